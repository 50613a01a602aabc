"""Helpers the specialized builders share (upstream's parsers/parsers.cpp and a few chat.cpp bits)."""

from __future__ import annotations

from collections.abc import Iterator

from ...grammar.schema import ObjectSchema, Property, schema_from_json
from ...json_types import Json
from ...peg.arena import Arena
from ...peg.gbnf import arena_to_gbnf
from ..messages import ChatMessage
from ..peg_builder import chat_tool_parameters

__all__ = ["build_grammar", "foreach_function", "foreach_parameter", "render_content"]


def foreach_function(tools: Json) -> Iterator[Json]:
    """The function tools of an OpenAI tools array, in order (others skipped, as upstream)."""
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and tool.get("type") == "function" and "function" in tool:
            yield tool


def foreach_parameter(function: Json) -> Iterator[Property]:
    """The properties of a function's parameters schema (none when its root is not an object).
    Raises ``SchemaError`` for a schema outside the supported subset, as upstream throws."""
    root = schema_from_json(chat_tool_parameters(function)).root
    if isinstance(root, ObjectSchema):
        yield from root.properties


def build_grammar(parser: Arena, lazy: bool) -> str:
    """``build_grammar([&](builder) { parser.build_grammar(builder, lazy); })``, once per arena."""
    from ..parser_memo import grammar_once

    return grammar_once(parser, lazy, arena_to_gbnf)


def render_content(msg: ChatMessage, delimiter: str = "\n\n") -> str:
    """``common_chat_msg::render_content``: the content, or the text parts joined by ``delimiter``."""
    if msg.content and msg.content_parts:
        from ..oai import ChatRequestError

        raise ChatRequestError("Cannot specify both content and content_parts")
    if msg.content:
        return msg.content
    text = ""
    for part in msg.content_parts:
        if part.type == "text":
            # upstream adds the delimiter only once some text is there: leading empty parts add none
            text += (delimiter if text else "") + part.text
    return text
