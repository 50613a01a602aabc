"""The chat message (upstream's ``common_chat_msg``, chat.h) and its tool calls and content parts.

Mutable dataclasses with upstream's defaults (every string empty, ``role`` included: the PEG
mappers set ``"assistant"``); ``==`` is upstream's ``operator==``. :meth:`ChatMessage.to_dict`
gives the oracle's ``msg_to_json`` shape (tests/oracle/oracle.cpp), key order included, and
:meth:`ChatMessage.from_dict` reads it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ChatMessage", "ContentPart", "ToolCall"]


def _str_field(d: Mapping[str, Any], key: str) -> str:
    if not isinstance(d, Mapping):
        raise TypeError(f"expected an object, got {type(d).__name__}")
    value = d.get(key, "")
    if not isinstance(value, str):
        raise TypeError(f"message field {key!r} must be a string, got {type(value).__name__}")
    return value


def _list_field(d: Mapping[str, Any], key: str) -> list[Any]:
    value = d.get(key, [])
    if not isinstance(value, list):
        raise TypeError(f"message field {key!r} must be a list, got {type(value).__name__}")
    return value


@dataclass
class ToolCall:
    """One tool call (upstream's ``common_chat_tool_call``).

    Attributes:
        name: the function's name.
        arguments: the arguments as JSON text (``json.loads`` them); possibly unfinished while streaming.
        id: the call's id, which a tool result names as ``tool_call_id``.
    """

    name: str = ""
    arguments: str = ""
    id: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "arguments": self.arguments, "id": self.id}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ToolCall:
        return cls(_str_field(d, "name"), _str_field(d, "arguments"), _str_field(d, "id"))


@dataclass
class ContentPart:
    """One typed part of a message's content (``common_chat_msg_content_part``)."""

    type: str = ""
    text: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "text": self.text}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ContentPart:
        return cls(_str_field(d, "type"), _str_field(d, "text"))


@dataclass
class ChatMessage:
    """A chat message (upstream's ``common_chat_msg``): what the parser makes of a reply, and what
    requests may carry instead of dicts.

    Attributes:
        role: "system", "user", "assistant" or "tool".
        content: the text.
        content_parts: typed parts, when the content is a list of them.
        reasoning_content: the thought, apart from the answer.
        tool_calls: the calls the message makes.
        tool_name: for a tool result, the tool's name.
        tool_call_id: for a tool result, the id of the call it answers.
    """

    role: str = ""
    content: str = ""
    content_parts: list[ContentPart] = field(default_factory=list)
    reasoning_content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_name: str = ""
    tool_call_id: str = ""

    def empty(self) -> bool:
        """Upstream's ``empty()``: nothing but (at most) a role."""
        return not (self.content or self.content_parts or self.tool_calls or self.reasoning_content
                    or self.tool_name or self.tool_call_id)

    def to_dict(self) -> dict[str, Any]:
        """The oracle's ``msg_to_json`` shape, in its key order."""
        return {
            "role": self.role,
            "content": self.content,
            "content_parts": [p.to_dict() for p in self.content_parts],
            "reasoning_content": self.reasoning_content,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "tool_name": self.tool_name,
            "tool_call_id": self.tool_call_id,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ChatMessage:
        """The inverse of :meth:`to_dict`; a missing field takes its default. Raises TypeError for
        a field of the wrong type."""
        return cls(
            role=_str_field(d, "role"),
            content=_str_field(d, "content"),
            content_parts=[ContentPart.from_dict(p) for p in _list_field(d, "content_parts")],
            reasoning_content=_str_field(d, "reasoning_content"),
            tool_calls=[ToolCall.from_dict(c) for c in _list_field(d, "tool_calls")],
            tool_name=_str_field(d, "tool_name"),
            tool_call_id=_str_field(d, "tool_call_id"),
        )
