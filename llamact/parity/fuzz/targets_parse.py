"""Parser targets: model-like outputs through every template's parser, as the server streams them.

A case is one template, one apply configuration (tools, tool choice, parallel calls, reasoning
format, thinking; from a fixed menu, so that the parser arenas upstream answers are few and cached)
and one output. ``chat_parse``: the output parsed at every UTF-8-safe prefix (partial) and whole
(final), with stable tool-call ids and the diffs between consecutive messages -- the oracle's
``chat_parse_stream``, one parse per step. ``peg_parse``: the raw PEG executor over the generation
prompt + the output as bytes (invalid UTF-8 included), digested at every prefix -- the oracle's
``peg_parse_stream``.

Inputs: ``{"template": stem, "apply": {...}, "text": str}`` and ``{"template": stem, "apply":
{...}, "text_hex": hex}``. The parser arena is upstream's answer to the apply request (llamact's
own apply pipeline is measured elsewhere); outputs come from gen_output.py.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from ...json_types import Json
from ..corpus import _apply_request, _strip_turn_tail, _turn_tail
from ..oracle import OracleError
from ..scenarios import USER
from .gen_output import arena_markers, assistant_message, invalid_utf8, marker_soup, mutate_text, token_soup
from .target import FuzzContext, Target, Unsent

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "unit": {"type": "string", "enum": ["c", "f"]}},
                   "required": ["city"]}}}
CALC = {"type": "function", "function": {
    "name": "calc", "description": "Evaluate an expression",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"},
                                                    "precision": {"type": "integer"}},
                   "required": ["expression"]}}}
RICH = {"type": "function", "function": {
    "name": "plan", "description": "",
    "parameters": {"type": "object", "properties": {"steps": {"type": "array", "items": {"type": "string"}},
                                                    "options": {"type": "object",
                                                                "properties": {"fast": {"type": "boolean"}}},
                                                    "score": {"type": "number"}},
                   "required": []}}}
TOOL_SETS: dict[str, list[Json]] = {"none": [], "weather": [WEATHER], "two": [WEATHER, CALC], "rich": [RICH, CALC]}


def apply_config(rng: random.Random) -> Json:
    tools = rng.choice(list(TOOL_SETS))
    return {"tools": tools, "tool_choice": rng.choice(["auto", "required"]) if tools != "none" else "auto",
            "parallel_tool_calls": rng.random() < 0.5, "reasoning_format": rng.choice(["none", "deepseek"]),
            "enable_thinking": rng.random() < 0.6}


def _apply_inputs(config: Json, messages: list[Json], add_generation_prompt: bool) -> Json:
    return {"messages": messages, "tools": TOOL_SETS[config["tools"]] or None, "tool_choice": config["tool_choice"],
            "parallel_tool_calls": config["parallel_tool_calls"], "reasoning_format": config["reasoning_format"],
            "enable_thinking": config["enable_thinking"], "add_generation_prompt": add_generation_prompt}


class _ParserTarget(Target):
    fixed_keys = frozenset({"template", "apply"})
    unit = "parse"

    def __init__(self, ctx: FuzzContext) -> None:
        super().__init__(ctx)
        self._pieces: list[bytes] | None = None
        self._tails: dict[str, str] = {}

    def applied(self, inp: Json) -> Json:
        """Upstream's chat params for the case's template and configuration (cached: they repeat)."""
        config = inp["apply"]
        request = _apply_request(self.ctx.template(inp["template"]), _apply_inputs(config, [USER], True))
        answer = self.ctx.oracle.request("chat_apply", **request)
        if isinstance(answer, OracleError):
            raise Unsent(f"upstream cannot apply the template with {config}: {answer.message[:200]}")
        return answer

    def _vocab_pieces(self) -> list[bytes]:
        if self._pieces is None:
            self._pieces = []
            if self.ctx.vocab_model is not None:
                from ...engine.tokenizer import Tokenizer

                with Tokenizer.load(self.ctx.vocab_model) as tokenizer:
                    self._pieces = [tokenizer.token_piece(t) for t in range(tokenizer.n_vocab)]
            if not self._pieces:
                self._pieces = [w.encode() for w in ("a", "b", " the", "\n", "{", "}", '"', "<", ">", "é")]
        return self._pieces

    def _turn_tail(self, stem: str) -> str:
        if stem not in self._tails:
            self._tails[stem] = _turn_tail(self.ctx.oracle, self.ctx.template(stem))
        return self._tails[stem]

    def outputs(self, rngs: list[random.Random]) -> list[tuple[Json, bytes]]:
        """(case skeleton, output bytes) per rng: rendered assistant turns (their renders batched),
        token soup, marker soup, each perhaps mutated."""
        names = self.ctx.template_names()
        skeletons = []
        for rng in rngs:
            skeletons.append({"template": rng.choice(names), "apply": apply_config(rng)})
        plans: list[tuple[str, Json | None]] = []
        renders: list[Json] = []
        for rng, sk in zip(rngs, skeletons, strict=True):
            kind = rng.choices(["rendered", "soup", "markers"], [0.6, 0.2, 0.2])[0]
            message = assistant_message(rng, TOOL_SETS[sk["apply"]["tools"]]) if kind == "rendered" else None
            plans.append((kind, message))
            if message is not None:
                request = _apply_request(self.ctx.template(sk["template"]),
                                         _apply_inputs(sk["apply"], [USER, message], False))
                renders.append({"op": "chat_apply", **request})
        rendered = iter(self.ctx.oracle.batch(renders))
        out = []
        for rng, sk, (kind, message) in zip(rngs, skeletons, plans, strict=True):
            try:
                base = self.applied(sk)
            except Unsent:
                out.append((sk, b""))
                if message is not None:
                    next(rendered)
                continue
            markers = arena_markers(base.get("parser"))
            if kind == "rendered":
                full = next(rendered)
                text = "" if isinstance(full, OracleError) else self._turn_text(sk["template"], base["prompt"],
                                                                                full["prompt"])
            elif kind == "soup":
                data = token_soup(rng, self._vocab_pieces(), markers)
                text = data.decode("utf-8", "replace")
                if self.raw and rng.random() < 0.7:
                    out.append((sk, data))
                    continue
            else:
                text = marker_soup(rng, markers)
            if rng.random() < 0.5:
                text = mutate_text(rng, text, markers)
            out.append((sk, text.encode("utf-8")))
        return out

    raw = False

    def _turn_text(self, stem: str, before: str, after: str) -> str:
        common = 0
        for a, b in zip(before, after, strict=False):
            if a != b:
                break
            common += 1
        return _strip_turn_tail(after[common:], self._turn_tail(stem))


class ChatParseTarget(_ParserTarget):
    name = "chat_parse"
    component = "chat_parse"

    def generate_batch(self, rngs: list[random.Random]) -> list[Json]:
        return [dict(sk, text=data.decode("utf-8", "replace")) for sk, data in self.outputs(rngs)]

    def request(self, inp: Json) -> dict[str, Any]:
        applied = self.applied(inp)
        return {"op": "chat_parse_stream", "parser": applied["parser"], "format": applied["format"],
                "generation_prompt": applied["generation_prompt"],
                "reasoning_format": inp["apply"]["reasoning_format"], "text": inp.get("text", "")}

    def run(self, inp: Json) -> Json:
        applied = self.applied(inp)
        return chat_parse_stream(applied["parser"], applied["format"], applied["generation_prompt"] or "",
                                 inp.get("text", ""))

    def units(self, inp: Json, expected: Json) -> int:
        return len(expected) if isinstance(expected, list) else 1


def chat_parse_stream(parser_json: Json, format: str, generation_prompt: str, text: str) -> list[Json]:
    """llamact's answer to the oracle's ``chat_parse_stream``: one resumable parser fed every
    UTF-8-safe prefix (partial), then the whole text (final); each step's message (before tool-call
    ids are assigned, as the oracle records it) or parse error, then ids and diffs as the server."""
    from ...chat.diffs import ChatDiffError, compute_diffs, set_tool_call_ids
    from ...chat.messages import ChatMessage
    from ...chat.output_parser import ChatOutputParser, ChatParseError, compile_parser

    parser = ChatOutputParser(compile_parser(parser_json), format, generation_prompt)
    data = text.encode("utf-8")
    previous, counter = ChatMessage(), itertools.count()
    ids: list[str] = []
    steps: list[Json] = []
    ends = [e for e in range(len(data) + 1) if e == len(data) or data[e] & 0xC0 != 0x80]
    for end, partial in [(e, True) for e in ends] + [(len(data), False)]:
        step: Json = {"end": end, "is_partial": partial}
        try:
            message = parser.parse(data[:end].decode("utf-8"), partial)
        except ChatParseError as exc:
            step["error"] = exc.message
            steps.append(step)
            continue
        step["message"] = message.to_dict()
        if not message.empty():
            set_tool_call_ids(message, ids, lambda: f"call_{next(counter)}")
            prev, previous = previous, message
            try:
                step["diffs"] = [d.to_dict() for d in compute_diffs(prev, message)]
            except ChatDiffError as exc:
                step["diffs_error"] = exc.message
        steps.append(step)
    return steps


class PegParseTarget(_ParserTarget):
    name = "peg_parse"
    component = "peg_parse"
    raw = True

    def generate_batch(self, rngs: list[random.Random]) -> list[Json]:
        out = []
        for rng, (sk, data) in zip(rngs, self.outputs(rngs), strict=True):
            if rng.random() < 0.4:
                data = invalid_utf8(rng, data)
            out.append(dict(sk, text_hex=data.hex()))
        return out

    def _data(self, inp: Json) -> tuple[Json, bytes, bytes]:
        applied = self.applied(inp)
        if not applied.get("parser"):
            raise Unsent("the template's parser is empty (content only): nothing for the raw executor")
        return applied["parser"], (applied["generation_prompt"] or "").encode("utf-8"), \
            bytes.fromhex(inp.get("text_hex", ""))

    def request(self, inp: Json) -> dict[str, Any]:
        parser, prompt, data = self._data(inp)
        return {"op": "peg_parse_stream", "parser": parser, "text_hex": (prompt + data).hex(), "from": len(prompt)}

    def run(self, inp: Json) -> Json:
        from ...chat.output_parser import compile_parser
        from ...peg.executor import IncrementalParser
        from ..components import parse_result_digest

        parser_json, prompt, output = self._data(inp)
        data = prompt + output
        parser = IncrementalParser(compile_parser(parser_json))
        ends = [e for e in range(len(prompt), len(data) + 1) if e == len(data) or data[e] & 0xC0 != 0x80]
        return [{"end": end, "digest": parse_result_digest(parser.parse(data[:end]))} for end in ends]

    def units(self, inp: Json, expected: Json) -> int:
        return len(expected) if isinstance(expected, list) else 1

