"""The components the scoreboard measures, and llamact's implementation of each (where it exists).

A component pairs a corpus (corpus.py) with a runner: ``run(case) -> result`` in the oracle's
result shape. ``runner is None`` means llamact does not implement that component yet: its row
shows "not implemented" and its cases are still counted. A runner raising LlamaException counts
as an error result, compared with the oracle's error answers by the table in error_kinds.py; how
results are compared is scoreboard.py's (strict types; key order where ``ordered`` says so).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..json_types import Json
from .compare import Ordered
from .corpus import Case, Corpus

Runner = Callable[[Case], Json]


class Judgement(Protocol):
    """A judge's verdict with its reason: ``kind`` is the outcome, ``str()`` says why."""

    @property
    def kind(self) -> str: ...


@dataclass(frozen=True)
class Component:
    name: str
    description: str
    runner: Runner | None = None
    # A deliberate deviation (docs/design.md "Deviations") is counted apart, never as equal.
    is_deviation: Callable[[Case, Json], bool] | None = None
    # Where equality is not JSON equality (server_e2e): "equal" | "deviation" | "different", or a
    # Judgement whose kind is one of those (its str() is the reason a difference is reported with).
    judge: Callable[[Case, Json], str | Judgement] | None = None
    # Where object key order is upstream's (compare.py): True for the whole result, or the
    # top-level keys whose values are ordered.
    ordered: Ordered = False
    # Paths inside an ordered value whose key order is still not upstream's (compare.py).
    unordered: frozenset[str] = frozenset()
    # "parity" (llamact computes what upstream computes) or "round-trip" (llamact reads upstream's
    # output and writes it back: a check of the reader/writer, listed apart from parity)
    check: str = "parity"

    @property
    def implemented(self) -> bool:
        return self.runner is not None


class ModelRunners:
    """llamact's runtime components: tokenization, greedy generation and chat completions (the
    server_e2e row, with ``llama_cpp``: the pinned tree whose templates its cases name) on the real
    models."""

    def __init__(self, models: dict[str, Path], llama_cpp: Path | None = None) -> None:
        self._paths = models
        self._llama_cpp = llama_cpp
        self._engines: dict[tuple[str, int, int, int], Any] = {}
        self._models: dict[str, Any] = {}
        self._create: Any = None

    def close(self) -> None:
        for engine in self._engines.values():
            engine.close()
        for model in self._models.values():
            model.close()
        if self._create is not None:
            self._create.close()
        self._engines.clear()
        self._models.clear()
        self._create = None

    @property
    def runs_server_e2e(self) -> bool:
        return self._llama_cpp is not None

    def server_e2e(self, case: Case) -> Json:
        """engine.create() answering a server_e2e case (create_answer.py), with engines configured
        as the llama-server that answered it."""
        from .create_answer import CreateRunner

        if self._llama_cpp is None:
            raise ValueError("ModelRunners was made without llama_cpp: it cannot run server_e2e cases")
        if self._create is None:
            self._create = CreateRunner(self._paths, self._llama_cpp)
        return self._create.run(case)

    def _model(self, label: str) -> Any:
        from ..engine.tokenizer import Tokenizer

        if label not in self._models:
            self._models[label] = Tokenizer.load(self._paths[label])
        return self._models[label]

    def tokenize(self, case: Case) -> Json:
        inp = case.input
        return self._model(inp["model"]).tokenize(
            inp["text"], add_special=inp["add_special"], parse_special=inp["parse_special"]
        )

    def generate_greedy(self, case: Case) -> Json:
        from ..engine import GenerationParams, LlamaEngine, ModelParams, StopReason

        inp = case.input
        key = (inp["model"], inp["n_ctx"], inp["n_batch"], inp["n_threads"])
        if key not in self._engines:
            self._engines[key] = LlamaEngine.load(
                self._paths[inp["model"]],
                ModelParams(n_ctx=inp["n_ctx"], n_batch=inp["n_batch"], n_threads=inp["n_threads"]),
            )
        engine = self._engines[key]
        prompt = engine.tokenize(inp["prompt"], add_special=True, parse_special=True)
        result = engine.complete(
            prompt, GenerationParams(greedy=True, max_tokens=inp["n_predict"], render_special=True)
        )
        stop = {StopReason.EOG: "eog", StopReason.MAX_TOKENS: "length", StopReason.CONTEXT_FULL: "context"}
        return {
            "prompt_tokens": result.prompt_tokens,
            "tokens": result.tokens,
            "text": result.text,
            "stop": stop.get(result.stop_reason, result.stop_reason.value),
        }


def _peg_grammar_runner(case: Case) -> Json:
    from ..peg import arena_to_gbnf, load_arena

    return arena_to_gbnf(load_arena(case.input["parser"]), lazy=case.input["lazy"])


def parse_result_json(result: Any) -> Json:
    """A ParseResult in the oracle's peg_parse shape."""
    return {"type": result.type, "start": result.start, "end": result.end,
            "nodes": [n.to_json() for n in result.nodes], "invalid_utf8": [list(x) for x in result.invalid_utf8]}


def parse_result_digest(result: Any) -> str:
    """64-bit FNV-1a of the compact JSON of a ParseResult, as the oracle's peg_parse_stream computes it."""
    h = 0xCBF29CE484222325
    for byte in json.dumps(parse_result_json(result), separators=(",", ":"), ensure_ascii=False).encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def _peg_arena_runner(case: Case) -> Json:
    from ..peg import load_arena

    return load_arena(case.input["parser"]).to_json()


class ChatParseRunners:
    """The chat_parse and msg_diffs runners. Parses are fresh (one compiled parser per arena);
    diffs replay each stream as the server does, through llamact's ChatStreamParser in upstream
    mode (resumable parse, stable ids, upstream's diffs)."""

    def __init__(self, corpus: Corpus | None) -> None:
        self._compiled: dict[int, tuple[Json, Any]] = {}
        self._finals: dict[str, Case] = {}
        self._replays: dict[str, dict[tuple[int, bool], Json]] = {}
        self._raw: dict[str, dict[int, str]] = {}
        for case in (corpus.cases.get("chat_parse", []) if corpus else []):
            if case.id.endswith("/final"):
                self._finals[case.input["stream"]] = case

    def _compile(self, parser: Json) -> Any:
        from ..chat.output_parser import compile_parser

        # cases of one stream share the parser object; keep it alive so its id stays unique
        hit = self._compiled.get(id(parser))
        if hit is None:
            hit = self._compiled[id(parser)] = (parser, compile_parser(parser))
        return hit[1]

    def chat_parse(self, case: Case) -> Json:
        from ..chat.output_parser import ChatOutputParser

        inp = case.input
        parser = ChatOutputParser(self._compile(inp.get("parser")), inp["format"], inp.get("generation_prompt") or "")
        return parser.parse(inp["text"], inp["is_partial"]).to_dict()

    def peg_parse(self, case: Case) -> Json:
        """The raw parse's digest at this prefix, from one IncrementalParser fed the stream in order."""
        stream = case.input["stream"]
        if stream not in self._finals:
            return skipped(f"no final parse case for stream {stream!r}")
        if stream not in self._raw:
            self._raw[stream] = self._raw_replay(self._finals[stream].input)
        return self._raw[stream].get(case.input["end"], skipped(f"llamact made no parse ending at {case.input['end']}"))

    def _raw_replay(self, inp: Json) -> dict[int, str]:
        from ..peg.executor import IncrementalParser

        prompt = (inp.get("generation_prompt") or "").encode("utf-8")
        data = prompt + inp["text"].encode("utf-8")
        parser = IncrementalParser(self._compile(inp["parser"]))
        ends = [e for e in range(len(prompt), len(data) + 1) if e == len(data) or data[e] & 0xC0 != 0x80]
        return {end: parse_result_digest(parser.parse(data[:end])) for end in ends}

    def msg_diffs(self, case: Case) -> Json:
        stream = case.input["stream"]
        if stream not in self._finals:
            return skipped(f"no final parse case for stream {stream!r}")
        if stream not in self._replays:
            self._replays[stream] = self._replay(self._finals[stream].input)
        step = (case.input["end"], case.input["is_partial"])
        if step not in self._replays[stream]:
            return skipped(f"llamact computed no diffs at {step} (its parse failed or was empty)")
        return self._replays[stream][step]

    def _replay(self, inp: Json) -> dict[tuple[int, bool], Json]:
        """The stream through llamact's ChatStreamParser in upstream mode, one character (one
        UTF-8-safe prefix) at a time from the empty text, then finished."""
        from ..chat.diffs import ChatDiffError
        from ..chat.output_parser import ChatParseError
        from ..chat.streaming import ChatStreamParser
        from .stream_replay import counter_ids, delta_json, template_result

        result = template_result({"parser": inp.get("parser"), "format": inp["format"],
                                  "generation_prompt": inp.get("generation_prompt") or ""})
        stream = ChatStreamParser(result, upstream_compat=True, tool_call_id=counter_ids())  # ids as the oracle's
        text = inp["text"]
        out: dict[tuple[int, bool], Json] = {}
        end = 0
        for piece in [""] + list(text) + [None]:
            if piece is not None:
                end += len(piece.encode("utf-8"))
            key = (end, piece is not None)
            try:
                deltas = stream.feed(piece) if piece is not None else stream.finish("eog")
            except ChatParseError:
                continue
            except ChatDiffError as exc:
                out[key] = {"error": {"kind": "diff", "message": exc.message}}
                continue
            out[key] = [delta_json(d) for d in deltas]
        return out


def skipped(why: str) -> Json:
    """A runner's answer for a case llamact has no result for (e.g. a streamed step it never
    reached): a value no oracle answer equals, so the case counts as different, with the reason."""
    return {"skipped": why}


def _json_schema_runner(case: Case) -> Json:
    from ..grammar import json_schema_to_grammar

    return json_schema_to_grammar(case.input["schema"], case.input.get("force_gbnf", False))


# The oracle's fixed clock (2026-01-15T12:00:00Z): strftime_now and date globals read it.
ORACLE_NOW = 1768478400


def _jinja_runner(case: Case) -> Json:
    from ..jinja import render

    return render(case.input["template"], case.input["context"], now=ORACLE_NOW, source_name=case.id)


def _chat_apply_runner(case: Case) -> Json:
    from .apply_runner import apply_request

    return apply_request(case.input, ORACLE_NOW)


def _chat_parse_own_runner(case: Case) -> Json:
    from .apply_runner import own_parse_stream

    return own_parse_stream(case.input, ORACLE_NOW)


def _template_render_runner(case: Case) -> Json:
    return {"prompt": _chat_apply_runner(case)["prompt"]}


def _caps_runner(case: Case) -> Json:
    from ..jinja.caps import template_caps

    return template_caps(case.input["template"]).to_map()


def _autoparser_analysis_runner(case: Case) -> Json:
    from ..chat.autoparser.analysis import analyze_template
    from ..chat.templates import load_chat_templates

    inp = case.input
    tmpl = load_chat_templates(inp["template"], bos_token=inp["bos_token"], eos_token=inp["eos_token"]).default
    return analyze_template(tmpl).to_json()


# A PEG arena's "rules" object is upstream's std::unordered_map: its key order is a hash table's.
ARENA_RULES = frozenset({"$.rules"})
ARENA_RULES_IN_PARAMS = frozenset({"$.parser.rules"})


def _server_e2e_judge(case: Case, got: Json) -> Judgement:
    from .server_e2e import judge

    return judge(case, got)


def components(model_runners: ModelRunners | None, corpus: Corpus | None = None) -> list[Component]:
    """Every component in pipeline order. Later work plugs its runner in here. ``corpus`` lets the
    msg_diffs runner find the streams its cases belong to."""
    parse_runners = ChatParseRunners(corpus)
    return [
        Component("jinja", "upstream's test-jinja vectors: render output or error", _jinja_runner),
        Component("template_jinja", "direct renders of every template x scenario (no apply pipeline)",
                  _jinja_runner),
        Component("caps", "template capability maps, every vendored template", _caps_runner, ordered=True),
        Component("template_render", "prompts: every template x the scenario matrix", _template_render_runner),
        Component("chat_apply", "full chat params (format, grammar, triggers, parser JSON, ...)", _chat_apply_runner,
                  ordered={"parser"}, unordered=ARENA_RULES_IN_PARAMS),
        Component("autoparser_analysis", "the autoparser's differential analysis of every template (whole struct)",
                  _autoparser_analysis_runner),
        Component("chat_parse", "parsed messages of synthesised outputs, whole and every UTF-8-safe prefix",
                  parse_runners.chat_parse),
        Component("msg_diffs", "streaming diffs between consecutive prefix parses",
                  parse_runners.msg_diffs if corpus is not None else None),
        Component("chat_parse_own", "each output stream parsed with llamact's own parser for the request: "
                  "parser, messages and diffs at every prefix (one case per stream)", _chat_parse_own_runner,
                  ordered={"parser"}, unordered=ARENA_RULES_IN_PARAMS),
        Component("peg_arena", "parser arenas loaded from upstream's JSON and saved back", _peg_arena_runner,
                  ordered=True, unordered=ARENA_RULES, check="round-trip"),
        Component("peg_parse", "raw PEG parse (result, span, AST) at every prefix, resumed as the text grows",
                  parse_runners.peg_parse if corpus is not None else None),
        Component("peg_grammar", "GBNF generated from the parser arenas, lazy and not", _peg_grammar_runner),
        Component("json_schema", "upstream's JSON-schema -> GBNF vectors", _json_schema_runner),
        Component("tokenize", "tokenization with the real models",
                  model_runners.tokenize if model_runners else None),
        Component("generate_greedy", "greedy generation with the real models, token for token",
                  model_runners.generate_greedy if model_runners else None),
        Component("server_e2e", "llama-server itself vs engine.create(): tokens, chunks, messages",
                  model_runners.server_e2e if model_runners and model_runners.runs_server_e2e else None,
                  judge=_server_e2e_judge),
    ]
