"""Streaming deltas between two parses of a growing output (upstream's ``common_chat_msg_diff``).

:func:`compute_diffs` is upstream's ``compute_diffs``: a reasoning delta, a content delta, then the
last known tool call's changes and every new call whole. What upstream rejects (a message that
lost tool calls, a call whose name changed to something else, text that no longer extends what was
streamed) raises :class:`ChatDiffError` with upstream's message. :func:`set_tool_call_ids` gives
calls stable ids across a stream, as upstream's server does.

These are upstream's semantics, measured by the parity suite. The engine's own streaming applies
docs/design.md's deviation 5 on top (held whitespace and markers, calls emitted whole).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import LlamaInferenceException
from .messages import ChatMessage, ToolCall


class ChatDiffError(LlamaInferenceException):
    """A new parse does not extend the previous one (upstream's "Invalid diff: ...")."""


@dataclass
class MessageDiff:
    """One delta: reasoning text, content text, or a tool call's changes (``tool_call_index`` set)."""

    reasoning_content_delta: str = ""
    content_delta: str = ""
    tool_call_index: int | None = None
    tool_call_delta: ToolCall = field(default_factory=ToolCall)

    def to_dict(self) -> dict[str, Any]:
        """The oracle's shape of a diff."""
        return {"reasoning_content_delta": self.reasoning_content_delta, "content_delta": self.content_delta,
                "tool_call_index": self.tool_call_index, "tool_call_delta": self.tool_call_delta.to_dict()}


def string_diff(last: str, current: str) -> str:
    """What ``current`` adds to ``last``; "" when ``current`` is a prefix of it (a stop word erased)."""
    if not last:
        return current
    if not current.startswith(last):
        if last.startswith(current):
            return ""
        raise ChatDiffError(f"Invalid diff: '{last}' not found at start of '{current}'")
    return current[len(last):]


def _fewer_calls(prev: ChatMessage, new: ChatMessage) -> ChatDiffError:
    lines = ["Invalid diff: now finding less tool calls!", f"  Previous ({len(prev.tool_calls)}):"]
    lines += [f"    - name: '{tc.name}', args: '{tc.arguments}'" for tc in prev.tool_calls]
    lines.append(f"  Current ({len(new.tool_calls)}):")
    lines += [f"    - name: '{tc.name}', args: '{tc.arguments}'" for tc in new.tool_calls]
    lines.append("  Current msg text content:")
    return ChatDiffError("\n".join(lines) + "\n" + new.content + "\n", {"previous": len(prev.tool_calls),
                                                                      "current": len(new.tool_calls)})


def compute_diffs(prev: ChatMessage, new: ChatMessage) -> list[MessageDiff]:
    """The deltas that turn ``prev`` into ``new``; raises ChatDiffError where upstream throws."""
    diffs: list[MessageDiff] = []
    if prev.reasoning_content != new.reasoning_content:
        diffs.append(MessageDiff(reasoning_content_delta=string_diff(prev.reasoning_content, new.reasoning_content)))
    if prev.content != new.content:
        diffs.append(MessageDiff(content_delta=string_diff(prev.content, new.content)))
    if len(new.tool_calls) < len(prev.tool_calls):
        raise _fewer_calls(prev, new)
    if prev.tool_calls:
        idx = len(prev.tool_calls) - 1
        pref, newf = prev.tool_calls[idx], new.tool_calls[idx]
        # a name may appear or grow while it streams, never change into another one
        if pref.name != newf.name and pref.name and newf.name and not newf.name.startswith(pref.name):
            raise ChatDiffError("Invalid diff: tool call mismatch!", {"previous": pref.name, "current": newf.name})
        args_diff = string_diff(pref.arguments, newf.arguments)
        if args_diff or pref.id != newf.id or pref.name != newf.name:
            delta = ToolCall(arguments=args_diff)
            if pref.id != newf.id or pref.name != newf.name:
                delta.id, delta.name = newf.id, newf.name
            diffs.append(MessageDiff(tool_call_index=idx, tool_call_delta=delta))
    for idx in range(len(prev.tool_calls), len(new.tool_calls)):
        call = new.tool_calls[idx]
        diffs.append(MessageDiff(tool_call_index=idx, tool_call_delta=ToolCall(call.name, call.arguments, call.id)))
    return diffs


def set_tool_call_ids(message: ChatMessage, ids: list[str], new_id: Callable[[], str]) -> None:
    """Give the message's calls the ids the stream used so far (``ids``), new ones from their own id
    or ``new_id()``: a call keeps its id while its arguments stream (upstream's set_tool_call_ids)."""
    for i, call in enumerate(message.tool_calls):
        if len(ids) <= i:
            ids.append(call.id or new_id())
        call.id = ids[i]
