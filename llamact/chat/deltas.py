"""What a chat stream emits: deltas, tool-call deltas, and how generation ended.

:class:`ChatDelta` is one step's addition -- one OpenAI chunk's ``delta``: reasoning text
(``thinking``, OpenAI's ``reasoning_content``), content text, or tool-call entries shaped like
OpenAI's ``tool_calls[]`` deltas. :func:`finish_reason` is llama-server's choice of
``finish_reason`` (server-task.cpp ``to_json_oaicompat_chat*``), plus ``"cancelled"``.

Values only; nothing here raises.
"""

from __future__ import annotations

from dataclasses import dataclass

from .diffs import MessageDiff
from .messages import ChatMessage

__all__ = [
    "STOP_CANCELLED", "STOP_CONTEXT_FULL", "STOP_EOG", "STOP_MAX_TOKENS", "STOP_REASONS", "STOP_STRING",
    "ChatDelta", "ToolCallDelta", "finish_reason",
]

#: generation ended on an end-of-generation token
STOP_EOG = "eog"
#: generation ended on a stop string
STOP_STRING = "stop_string"
#: the token budget ran out
STOP_MAX_TOKENS = "max_tokens"
#: the context filled up
STOP_CONTEXT_FULL = "context_full"
#: the caller cancelled the generation
STOP_CANCELLED = "cancelled"
STOP_REASONS = frozenset({STOP_EOG, STOP_STRING, STOP_MAX_TOKENS, STOP_CONTEXT_FULL, STOP_CANCELLED})
#: the stop reasons after which the output may be cut short
TRUNCATING_STOPS = frozenset({STOP_MAX_TOKENS, STOP_CONTEXT_FULL, STOP_CANCELLED})


@dataclass(frozen=True)
class ToolCallDelta:
    """One OpenAI ``tool_calls[]`` delta entry: ``id`` and ``name`` are set when the call is new
    (or, upstream, when they changed), ``arguments`` is the argument text this step adds."""

    index: int
    id: str | None
    name: str | None
    arguments: str

    @classmethod
    def from_diff(cls, diff: MessageDiff) -> ToolCallDelta:
        """A tool-call diff of upstream's ``compute_diffs`` (its ``tool_call_index`` set)."""
        call = diff.tool_call_delta
        return cls(diff.tool_call_index or 0, call.id or None, call.name or None, call.arguments)


@dataclass(frozen=True)
class ChatDelta:
    """What one step adds: reasoning, content and / or tool-call entries."""

    content: str = ""
    thinking: str = ""
    tool_calls: tuple[ToolCallDelta, ...] = ()

    @classmethod
    def from_diff(cls, diff: MessageDiff) -> ChatDelta:
        """One diff of upstream's ``compute_diffs`` (each becomes one chunk upstream)."""
        calls = (ToolCallDelta.from_diff(diff),) if diff.tool_call_index is not None else ()
        return cls(diff.content_delta, diff.reasoning_content_delta, calls)


def finish_reason(stop_reason: str, message: ChatMessage) -> str:
    """llama-server's ``finish_reason``: "tool_calls" when the final message has calls and
    generation ended on an end-of-generation token or a stop string, "stop" otherwise for those,
    "length" when the token budget or the context ran out; "cancelled" when the caller cancelled."""
    if stop_reason == STOP_CANCELLED:
        return "cancelled"
    if stop_reason in (STOP_EOG, STOP_STRING):
        return "tool_calls" if message.tool_calls else "stop"
    return "length"
