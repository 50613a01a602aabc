"""Streams for parity: an oracle ``chat_apply`` answer as a ChatTemplateResult, outputs cut into
token-sized pieces, and a ChatStreamParser's run recorded step by step.

The oracle answers with upstream's ``common_chat_params`` as JSON (``params_to_json``); every
template family, the autoparser's included, can then drive llamact's streaming with upstream's
own parser. Raises what ``load_arena`` raises for a malformed parser (PegArenaError).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from ..chat.deltas import ChatDelta
from ..chat.result import ChatTemplateResult, GrammarTrigger, MessageDelimiter
from ..chat.streaming import ChatStreamParser
from ..errors import LlamaException
from ..json_types import Json
from ..peg import load_arena


def template_result(answer: Json, family: str = "oracle") -> ChatTemplateResult:
    """The oracle's ``chat_apply`` answer (or a stream case's parser fields) as a ChatTemplateResult."""
    parser = answer.get("parser")
    arena = load_arena(parser) if parser else None
    return ChatTemplateResult(
        format=answer.get("format", "Content-only"),
        family=family,
        prompt=answer.get("prompt", ""),
        generation_prompt=answer.get("generation_prompt") or "",
        grammar=answer.get("grammar", ""),
        grammar_lazy=answer.get("grammar_lazy", False),
        grammar_triggers=tuple(GrammarTrigger(t["type"], t["value"], t.get("token", -1))
                               for t in answer.get("grammar_triggers", [])),
        preserved_tokens=tuple(answer.get("preserved_tokens", [])),
        additional_stops=tuple(answer.get("additional_stops", [])),
        supports_thinking=answer.get("supports_thinking", False),
        thinking_start_tag=answer.get("thinking_start_tag", ""),
        thinking_end_tags=tuple(answer.get("thinking_end_tags", [])),
        parser=arena if arena is not None and not arena.empty else None,
        message_delimiters=tuple(MessageDelimiter(d["role"], d["delimiter"])
                                 for d in answer.get("message_delimiters", [])),
    )


def token_pieces(text: str, rng: random.Random, max_chars: int = 6) -> list[str]:
    """``text`` cut into pieces of 1..``max_chars`` characters, as tokens might cut it (an empty
    text is one empty piece: a generation of one token with no text)."""
    if not text:
        return [""]
    pieces: list[str] = []
    pos = 0
    while pos < len(text):
        size = rng.randint(1, max_chars)
        pieces.append(text[pos:pos + size])
        pos += size
    return pieces


def counter_ids() -> Callable[[], str]:
    """Tool-call ids as the oracle's chat_parse_stream makes them: call_0, call_1, ..."""
    counter = itertools.count()
    return lambda: f"call_{next(counter)}"


@dataclass
class Step:
    """One fed piece (``piece`` None: the finish) and what came of it: deltas or an error."""

    piece: str | None
    deltas: list[ChatDelta] = field(default_factory=list)
    error: LlamaException | None = None


def replay(parser: ChatStreamParser, pieces: list[str], stop_reason: str = "eog") -> list[Step]:
    """Feed every piece, then finish; errors are recorded and the stream goes on, as the oracle's
    stream goes on after an error."""
    steps: list[Step] = []
    for piece in pieces:
        step = Step(piece)
        try:
            step.deltas = parser.feed(piece)
        except LlamaException as exc:
            step.error = exc
        steps.append(step)
    step = Step(None)
    try:
        step.deltas = parser.finish(stop_reason)
    except LlamaException as exc:
        step.error = exc
    steps.append(step)
    return steps


def delta_json(delta: ChatDelta) -> Json:
    """An upstream-mode delta (one upstream diff) in the oracle's diff shape (``diffs_to_json``)."""
    call = delta.tool_calls[0] if delta.tool_calls else None
    return {
        "reasoning_content_delta": delta.thinking,
        "content_delta": delta.content,
        "tool_call_index": call.index if call is not None else None,
        "tool_call_delta": {"name": (call.name or "") if call else "", "arguments": call.arguments if call else "",
                            "id": (call.id or "") if call else ""},
    }
