"""Shared by the streaming tests: oracle streams, ChatStreamParser runs and their comparison.

``oracle_steps`` asks the oracle's ``chat_parse_stream`` for a text cut at given byte offsets (the
server's ``update_chat_msg`` per token); ``compare_upstream`` feeds a ChatStreamParser in upstream
mode the same pieces and returns the steps that differ (empty: equal, step by step).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from llamact.chat.deltas import ChatDelta
from llamact.chat.diffs import ChatDiffError
from llamact.chat.messages import ChatMessage
from llamact.chat.output_parser import ChatParseError
from llamact.chat.result import ChatTemplateResult
from llamact.chat.streaming import ChatStreamParser
from llamact.json_types import Json
from llamact.parity.oracle import OracleClient, OracleError
from llamact.parity.stream_replay import Step, counter_ids, delta_json, replay, template_result, token_pieces

LLAMA_CPP = Path(__file__).resolve().parents[1] / "vendor" / "llama.cpp"
TEMPLATES_DIR = LLAMA_CPP / "models" / "templates"
USER = {"role": "user", "content": "What is the weather in Paris?"}


def template_source(name: str) -> str:
    return (TEMPLATES_DIR / f"{name}.jinja").read_text(encoding="utf-8")


def apply_answer(oracle: OracleClient, template: str, tools: list[Json] | None = None, **inputs: Json) -> Json:
    """The oracle's chat_apply answer for one user turn (``inputs`` override upstream's options)."""
    request_inputs: Json = {"messages": [USER], "tools": tools or [], "tool_choice": "auto",
                            "reasoning_format": "deepseek", "add_generation_prompt": True}
    request_inputs.update(inputs)
    answer = oracle.request("chat_apply", template=template_source(template), bos_token="<s>", eos_token="</s>",
                            add_bos=False, add_eos=False, inputs=request_inputs)
    assert not isinstance(answer, OracleError), answer
    return answer


def byte_ends(pieces: list[str]) -> list[int]:
    ends, end = [], 0
    for piece in pieces:
        end += len(piece.encode("utf-8"))
        ends.append(end)
    return ends


def oracle_steps(oracle: OracleClient, answer: Json, text: str, pieces: list[str]) -> list[Json]:
    """The oracle's server-style stream over ``text`` cut into ``pieces`` (partial parses, then final)."""
    steps = oracle.request("chat_parse_stream", parser=answer.get("parser"), format=answer["format"],
                           generation_prompt=answer.get("generation_prompt") or "", text=text,
                           ends=byte_ends(pieces))
    assert not isinstance(steps, OracleError), steps
    return list(steps)


def step_matches(mine: Step, expected: Json) -> bool:
    """One of my upstream-mode steps against the oracle's."""
    if "error" in expected:
        return isinstance(mine.error, ChatParseError) and mine.error.message == expected["error"]
    if "diffs_error" in expected:
        return isinstance(mine.error, ChatDiffError) and mine.error.message == expected["diffs_error"]
    if mine.error is not None:
        return False
    return [delta_json(d) for d in mine.deltas] == expected.get("diffs", [])


def compare_upstream(oracle: OracleClient, answer: Json, text: str, pieces: list[str]) -> tuple[list[Json], list[str]]:
    """(the oracle's steps, descriptions of ours that differ) for upstream mode fed ``pieces``."""
    expected = oracle_steps(oracle, answer, text, pieces)
    parser = ChatStreamParser(template_result(answer), upstream_compat=True, tool_call_id=counter_ids())
    mine = replay(parser, pieces)
    assert len(mine) == len(expected), (len(mine), len(expected))
    bad = [f"step {i} (end {e['end']}, partial {e['is_partial']}): expected {e}, got {_shown(m)}"
           for i, (m, e) in enumerate(zip(mine, expected, strict=True)) if not step_matches(m, e)]
    return expected, bad


def _shown(step: Step) -> Json:
    return repr(step.error) if step.error is not None else [delta_json(d) for d in step.deltas]


@dataclass
class Streamed:
    """What a stream sent, concatenated, and the parser's final message."""

    content: str
    thinking: str
    calls: list[tuple[str, str]]
    ids: list[str]
    message: ChatMessage
    parser: ChatStreamParser
    early_calls: int = 0  # tool-call deltas that came before finish

    @property
    def message_calls(self) -> list[tuple[str, str]]:
        return [(c.name, c.arguments) for c in self.message.tool_calls]

    def matches_message(self) -> bool:
        return (self.content == self.message.content and self.thinking == self.message.reasoning_content
                and self.calls == self.message_calls)


def collect(deltas: list[ChatDelta], parser: ChatStreamParser) -> Streamed:
    """Deltas of a default-mode stream (calls arrive whole) put together."""
    calls = [(c.name or "", c.arguments) for d in deltas for c in d.tool_calls]
    ids = [c.id or "" for d in deltas for c in d.tool_calls]
    return Streamed("".join(d.content for d in deltas), "".join(d.thinking for d in deltas), calls, ids,
                    parser.message, parser)


def stream_default(result: ChatTemplateResult, text: str, pieces: list[str] | None = None, *,
                   tools: list[Json] | None = None, stop_reason: str = "eog", seed: int = 0) -> Streamed:
    """``text`` through a default-mode ChatStreamParser (token-sized pieces unless given)."""
    parser = ChatStreamParser(result, tools=tools or [], tool_call_id=counter_ids())
    deltas: list[ChatDelta] = []
    for piece in pieces if pieces is not None else token_pieces(text, random.Random(seed)):
        deltas += parser.feed(piece)
    early = sum(len(d.tool_calls) for d in deltas)
    deltas += parser.finish(stop_reason)
    out = collect(deltas, parser)
    out.early_calls = early
    return out


def stream_upstream(result: ChatTemplateResult, text: str, pieces: list[str], stop_reason: str = "eog") -> Streamed:
    """``text`` through an upstream-mode ChatStreamParser (raises where upstream fails)."""
    parser = ChatStreamParser(result, upstream_compat=True, tool_call_id=counter_ids())
    deltas: list[ChatDelta] = []
    for piece in pieces:
        deltas += parser.feed(piece)
    deltas += parser.finish(stop_reason)
    out = collect(deltas, parser)
    # upstream streams arguments piecewise: put each call's pieces together
    calls: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    for d in deltas:
        for c in d.tool_calls:
            calls.setdefault(c.index, []).append(c.arguments)
            if c.name:
                names[c.index] = c.name
    out.calls = [(names.get(i, ""), "".join(parts)) for i, parts in sorted(calls.items())]
    return out
