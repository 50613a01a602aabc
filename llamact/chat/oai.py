"""OpenAI-shaped requests in and out: upstream's ``common_chat_*_oaicompat`` conversions (chat.cpp).

    parse_messages(messages) -> list[ChatMessage]      (common_chat_msgs_parse_oaicompat)
    parse_tools(tools) -> list[ChatTool]               (common_chat_tools_parse_oaicompat)
    parse_tool_choice(choice) -> str                   ("auto" / "required" / "none")
    message_to_json(message) / tools_to_json(tools)    (to_json_oaicompat / common_chat_tools_to_json_oaicompat)
    normalize_content(messages, caps)                  (messages_inp_normalizer)

Enters: plain JSON-shaped values (dicts, lists) or the package's own dataclasses (``ChatMessage``,
``ChatTool``). Leaves: the typed values, and the JSON the templates are rendered with, keys in
upstream's order (templates that iterate a message see them in that order). Raises
:class:`ChatRequestError` with upstream's text ("Failed to parse messages: ...", "Failed to parse
tools: ...; tools = ..."); the caller's values are never modified.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import LlamaRequestException
from ..grammar.json_value import dump, dump_indented, nlohmann_type_name, normalize
from ..json_types import Json
from .messages import ChatMessage, ContentPart, ToolCall

__all__ = [
    "ChatRequestError", "ChatTool", "message_to_json", "messages_to_json", "normalize_content", "parse_messages",
    "parse_tool_choice", "parse_tools", "tools_to_json",
]


class ChatRequestError(LlamaRequestException):
    """The request's messages, tools or options are malformed (upstream's reason in the message)."""


class _JsonError(Exception):
    """nlohmann's exception texts, raised while reading a value, wrapped by the caller."""


@dataclass(frozen=True)
class ChatTool:
    """A function tool (``common_chat_tool``): ``parameters`` is a JSON schema (a dict)."""

    name: str
    description: str = ""
    parameters: Json = field(default_factory=dict)

    def to_json(self) -> Json:
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


# -- nlohmann accessors ----------------------------------------------------------------------------


def _dump(value: Json) -> str:
    try:
        return dump(value)
    except TypeError:
        return repr(value)


def _at(obj: Json, key: str) -> Json:
    if not isinstance(obj, dict):
        raise _JsonError(f"[json.exception.type_error.304] cannot use at() with {nlohmann_type_name(obj)}")
    if key not in obj:
        raise _JsonError(f"[json.exception.out_of_range.403] key '{key}' not found")
    return obj[key]


def _string(value: Json) -> str:
    if not isinstance(value, str):
        raise _JsonError(f"[json.exception.type_error.302] type must be string, but is {nlohmann_type_name(value)}")
    return value


def _contains(obj: Json, key: str) -> bool:
    return isinstance(obj, dict) and key in obj


def _elements(value: Json) -> list[Json]:
    """What a range-for over a nlohmann value visits: array items, object values, a scalar once."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        return list(value.values())
    return [value]


def _json(value: Json, what: str) -> Json:
    try:
        out = normalize(value)
    except Exception as exc:  # noqa: BLE001 - any non-JSON value is the caller's error
        raise ChatRequestError(f"{what} is not JSON: {exc}") from None
    _check_utf8(out, what)
    return out


def _check_utf8(value: Json, what: str) -> None:
    """Text that has no UTF-8 form (a lone surrogate) cannot reach a template or the tokenizer."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start:exc.end] if isinstance(exc.object, str) else ""
        raise ChatRequestError(f"{what} holds a lone surrogate ({bad!r}), which has no UTF-8 form: "
                               "decode the text with errors='replace' or fix its source") from None


# -- messages --------------------------------------------------------------------------------------


def parse_messages(messages: Json) -> list[ChatMessage]:
    """Upstream's ``common_chat_msgs_parse_oaicompat``; ``ChatMessage`` items are taken as they are."""
    if isinstance(messages, Sequence) and not isinstance(messages, (str, bytes)) and all(
            isinstance(m, ChatMessage) for m in messages):
        _check_utf8([m.to_dict() for m in messages], "messages")
        return [_copy_message(m) for m in messages]
    messages = _json([m.to_dict() if isinstance(m, ChatMessage) else m for m in messages]
                     if isinstance(messages, (list, tuple)) else messages, "messages")
    try:
        if not isinstance(messages, list):
            raise _JsonError("Expected 'messages' to be an array, got " + _dump(messages))
        return [_parse_message(m) for m in messages]
    except _JsonError as exc:
        raise ChatRequestError("Failed to parse messages: " + str(exc)) from None


def _copy_message(m: ChatMessage) -> ChatMessage:
    return ChatMessage(m.role, m.content, [ContentPart(p.type, p.text) for p in m.content_parts], m.reasoning_content,
                       [ToolCall(c.name, c.arguments, c.id) for c in m.tool_calls], m.tool_name, m.tool_call_id)


def _parse_message(message: Json) -> ChatMessage:
    if not isinstance(message, dict):
        raise _JsonError("Expected 'message' to be an object, got " + _dump(message))
    if "role" not in message:
        raise _JsonError("Missing 'role' in message: " + _dump(message))
    msg = ChatMessage(role=_string(message["role"]))
    has_content, has_tool_calls = "content" in message, "tool_calls" in message
    if has_content:
        content = message["content"]
        if isinstance(content, str):
            msg.content = content
        elif isinstance(content, list):
            for part in content:
                if not _contains(part, "type"):
                    raise _JsonError("Missing content part type: " + _dump(part))
                kind = part["type"]
                if kind not in ("text", "media_marker"):
                    raise _JsonError("Unsupported content part type: " + _dump(kind))
                msg.content_parts.append(ContentPart(kind, _string(_at(part, "text"))))
        elif content is not None:
            raise _JsonError("Invalid 'content' type: expected string or array, got " + _dump(content)
                             + " (ref: https://github.com/ggml-org/llama.cpp/issues/8367)")
    if has_tool_calls:
        for call in _elements(message["tool_calls"]):
            msg.tool_calls.append(_parse_tool_call(call))
    if not has_content and not has_tool_calls:
        raise _JsonError("Expected 'content' or 'tool_calls' (ref: https://github.com/ggml-org/llama.cpp/issues/8367 & "
                         "https://github.com/ggml-org/llama.cpp/issues/12279)")
    if "reasoning_content" in message:
        msg.reasoning_content = _string(message["reasoning_content"])
    if "name" in message:
        msg.tool_name = _string(message["name"])
    if "tool_call_id" in message:
        msg.tool_call_id = _string(message["tool_call_id"])
    return msg


def _parse_tool_call(call: Json) -> ToolCall:
    if not _contains(call, "type"):
        raise _JsonError("Missing tool call type: " + _dump(call))
    if call["type"] != "function":
        raise _JsonError("Unsupported tool call type: " + _dump(call))
    if "function" not in call:
        raise _JsonError("Missing tool call function: " + _dump(call))
    function = call["function"]
    if not _contains(function, "name"):
        raise _JsonError("Missing tool call name: " + _dump(call))
    name = _string(function["name"])
    args = _at(function, "arguments")
    arguments = args if isinstance(args, str) else dump(args)
    return ToolCall(name, arguments, _string(call["id"]) if "id" in call else "")


def message_to_json(msg: ChatMessage, concat_typed_text: bool = False) -> Json:
    """Upstream's ``to_json_oaicompat``: ``content`` always present (``""`` when empty), arguments kept
    as JSON text, ``reasoning_content`` / ``name`` / ``tool_call_id`` / ``id`` only when non-empty."""
    if msg.content and msg.content_parts:
        raise ChatRequestError("Cannot specify both content and content_parts")
    out: Json = {"role": msg.role}
    if msg.content:
        out["content"] = msg.content
    elif msg.content_parts:
        if concat_typed_text or any(p.type == "media_marker" for p in msg.content_parts):
            out["content"] = _concat_parts([{"type": p.type, "text": p.text} for p in msg.content_parts])
        else:
            out["content"] = [{"type": p.type, "text": p.text} for p in msg.content_parts]
    else:
        out["content"] = ""
    if msg.reasoning_content:
        out["reasoning_content"] = msg.reasoning_content
    if msg.tool_name:
        out["name"] = msg.tool_name
    if msg.tool_call_id:
        out["tool_call_id"] = msg.tool_call_id
    if msg.tool_calls:
        calls = []
        for call in msg.tool_calls:
            entry: Json = {"type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            if call.id:
                entry["id"] = call.id
            calls.append(entry)
        out["tool_calls"] = calls
    return out


def _concat_parts(parts: list[Json]) -> str:
    """Text parts joined with a newline, none around media markers; other part types ignored."""
    text = ""
    last_was_marker = False
    for part in parts:
        kind = part.get("type", "") if isinstance(part, dict) else ""
        if kind == "text":
            newline = not last_was_marker and bool(text)
            last_was_marker = False
        elif kind == "media_marker":
            newline = False
            last_was_marker = True
        else:
            continue
        if newline:
            text += "\n"
        text += part.get("text", "")
    return text


def normalize_content(messages: Json, supports_string: bool, supports_typed: bool) -> Json:
    """``messages_inp_normalizer``: string-only templates get typed parts joined, typed-only templates
    get strings wrapped as one text part; the messages are copied, never changed in place."""
    only_string = supports_string and not supports_typed
    only_typed = not supports_string and supports_typed
    if (not only_string and not only_typed) or not isinstance(messages, list):
        return messages
    out = []
    for msg in messages:
        if isinstance(msg, dict) and "content" in msg:
            content = msg["content"]
            if only_typed and isinstance(content, str):
                msg = {**msg, "content": [{"type": "text", "text": content}]}
            elif only_string and isinstance(content, list):
                msg = {**msg, "content": _concat_parts(content)}
        out.append(msg)
    return out


def messages_to_json(messages: Sequence[ChatMessage], supports_string: bool, supports_typed: bool) -> Json:
    """``render_message_to_json``: every message as OpenAI JSON, then the content normalisation."""
    return normalize_content([message_to_json(m) for m in messages], supports_string, supports_typed)


# -- tools -----------------------------------------------------------------------------------------


def parse_tools(tools: Json) -> list[ChatTool]:
    """Upstream's ``common_chat_tools_parse_oaicompat``; ``ChatTool`` items are taken as they are."""
    if tools is None:
        return []
    if isinstance(tools, (list, tuple)) and all(isinstance(t, ChatTool) for t in tools):
        return [ChatTool(t.name, t.description, _json(t.parameters, f"tool {t.name!r} parameters")) for t in tools]
    tools = _json([t.to_json() if isinstance(t, ChatTool) else t for t in tools]
                  if isinstance(tools, (list, tuple)) else tools, "tools")
    try:
        if not isinstance(tools, list):
            raise _JsonError("Expected 'tools' to be an array, got " + _dump(tools))
        return [_parse_tool(tool) for tool in tools]
    except _JsonError as exc:
        raise ChatRequestError(f"Failed to parse tools: {exc}; tools = {dump_indented(tools)}") from None


def _parse_tool(tool: Json) -> ChatTool:
    if not _contains(tool, "type"):
        raise _JsonError("Missing tool type: " + _dump(tool))
    if tool["type"] != "function":
        raise _JsonError("Unsupported tool type: " + _dump(tool))
    if "function" not in tool:
        raise _JsonError("Missing tool function: " + _dump(tool))
    function = tool["function"]
    name = _string(_at(function, "name"))
    description = _string(function["description"]) if "description" in function else ""
    # upstream keeps the parameters as JSON text and parses them back: the same value
    parameters = function["parameters"] if "parameters" in function else {}
    return ChatTool(name, description, parameters)


def tools_to_json(tools: Sequence[ChatTool]) -> Json:
    """``common_chat_tools_to_json_oaicompat``: None when there are no tools."""
    return [t.to_json() for t in tools] if tools else None


def parse_tool_choice(choice: str) -> str:
    """``common_chat_tool_choice_parse_oaicompat``."""
    if choice in ("auto", "none", "required"):
        return choice
    raise ChatRequestError(f"Invalid tool_choice: {choice}", {"tool_choice": choice})
