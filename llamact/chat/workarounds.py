"""Upstream's message workarounds (chat.cpp ``namespace workaround``), on OpenAI JSON messages.

Each takes the rendered-message JSON list (already a private copy made by the pipeline) and
rewrites it as upstream does before rendering: developer -> system, a first system message merged
into the next one for templates without a system role, ``content: ""`` on tool-call messages,
string arguments parsed to objects for templates that read them as objects, and StepFun's trimming
of every content (done on the typed messages, before conversion). Raises ``ChatRequestError`` with
upstream's reason.
"""

from __future__ import annotations

from ..grammar.json_value import nlohmann_type_name
from ..json_types import Json
from .json_text import JsonParseError, parse_json
from .messages import ChatMessage, ContentPart
from .oai import ChatRequestError

__all__ = [
    "map_developer_role_to_system", "parse_string_arguments", "require_non_null_content",
    "system_message_not_supported", "trim_all_content", "trim_whitespace",
]

_C_SPACE = " \t\n\v\f\r"


def trim_whitespace(text: str) -> str:
    """Upstream's ``trim_whitespace``: C ``isspace`` on both ends."""
    return text.strip(_C_SPACE)


def map_developer_role_to_system(messages: list[Json]) -> None:
    for message in messages:
        if message.get("role") == "developer":
            message["role"] = "system"


def _content_string(message: Json) -> str:
    content = message.get("content")
    if not isinstance(content, str):
        raise ChatRequestError(
            f"[json.exception.type_error.302] type must be string, but is {nlohmann_type_name(content)}",
            {"reason": "a template without a system role needs string content to merge the system message"})
    return content


def system_message_not_supported(messages: list[Json]) -> None:
    """A first system message is merged into the next message (``\\n`` between), or dropped when alone."""
    if messages and messages[0].get("role") == "system":
        if len(messages) > 1:
            merged = _content_string(messages[0]) + "\n" + _content_string(messages[1])
            messages[1] = {**messages[1], "content": merged}
        del messages[0]


def require_non_null_content(messages: list[Json]) -> None:
    for message in messages:
        if "tool_calls" in message and "content" not in message:
            message["content"] = ""


def parse_string_arguments(messages: list[Json]) -> None:
    """Tool-call arguments given as JSON text become objects (templates that read ``arguments.x``)."""
    for message in messages:
        if "tool_calls" not in message:
            continue
        calls = []
        for call in message["tool_calls"]:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                try:
                    args = parse_json(function["arguments"])
                except JsonParseError as exc:
                    raise ChatRequestError("Failed to parse tool call arguments as JSON: " + exc.message,
                                           {"arguments": function["arguments"]}) from None
                call = {**call, "function": {**function, "arguments": args}}
            calls.append(call)
        message["tool_calls"] = calls


def trim_all_content(messages: list[ChatMessage]) -> list[ChatMessage]:
    """StepFun: every content, reasoning and text part trimmed (new messages; the inputs are kept)."""
    return [ChatMessage(m.role, trim_whitespace(m.content),
                        [ContentPart(p.type, trim_whitespace(p.text) if p.type == "text" else p.text)
                         for p in m.content_parts],
                        trim_whitespace(m.reasoning_content), list(m.tool_calls), m.tool_name, m.tool_call_id)
            for m in messages]
