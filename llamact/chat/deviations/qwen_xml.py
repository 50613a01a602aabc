"""Deviation 2: Qwen XML tool calls validated against the tools passed in.

Upstream's parser admits what its structure admits and silently drops the rest: with Qwen3-Coder
an unknown function or parameter ends the parse early and the call's text vanishes; with Seed-OSS
the same output is a parse error; a JSON value the schema forbids (``3.5`` for an integer) passes.
Here each ``<tool_call>`` envelope of the tool-call region is read on its own
(``<function=NAME>``, then ``<parameter=ARG>VALUE</parameter>`` entries) and becomes a call only if

* the function is one of the tools, each parameter is declared (or the schema allows more), none
  appears twice;
* each value reads as its schema types it -- a schema-declared string such as ``123`` stays the
  string "123" (the raw text), other types are JSON (Python literals such as ``True`` or
  ``{'a': 1}``, which the Qwen templates themselves render, read as JSON, as upstream's mapper
  reads them), a value allowed both ways is JSON when it parses as one of the allowed JSON types
  (upstream's order);
* the arguments object validates against the tool's parameters schema (required values, types,
  enums, bounds, nested shapes).

Anything else -- an invalid envelope, an unterminated one, stray text in the region -- stays
content, in order. Valid calls carry arguments as upstream's mapper writes them (compact
``{"k":v}``, the value's own JSON text).

Validation uses the ``jsonschema`` package: tool schemas are arbitrary user JSON schema, and a
call is "valid for the tool" in the standard's sense, not in the narrower sense of what the GBNF
converter happens to encode (which ignores e.g. ``multipleOf`` and number bounds). It runs once
per envelope, when generation ends, never per token. A schema jsonschema itself rejects (or whose
``$ref`` cannot be resolved) leaves the structural checks only. The typing of raw values uses
llamact.grammar's schema model (``value_types``), the one the Qwen3-Coder parser builder types
values with, so valid calls get the very arguments upstream's parse gives them.

Enters: the region's text (from its start), the layout, the tools. Leaves: calls and content text.
Raises nothing (an unusable tool schema is reported through the structural checks only).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError as JsonSchemaError
from referencing.exceptions import Unresolvable

from ...grammar.json_value import dump_string
from ...grammar.schema import ALL_TYPES, ObjectSchema, SchemaError, schema_from_json
from ..messages import ToolCall
from ..oai import ChatTool
from ..peg_builder import chat_tool_parameters
from ..peg_mappers import normalize_quotes_to_json
from .layouts import ToolCallLayout, envelopes
from .reasoning import WHITESPACE

__all__ = ["XmlTools", "read_region"]

_FUNCTION = "<function="
_FUNCTION_END = "</function>"
_PARAMETER = "<parameter="
_PARAMETER_END = "</parameter>"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


@dataclass
class _Tool:
    """One tool's parameters: their value types, which are required, whether others are allowed,
    and the compiled validator (None: structural checks only)."""

    types: dict[str, frozenset[str]]
    required: frozenset[str]
    open: bool
    validator: Any


class XmlTools:
    """The tools of a request, ready to validate calls (validators compiled once)."""

    def __init__(self, tools: Sequence[ChatTool]) -> None:
        self._tools: dict[str, _Tool] = {}
        for tool in tools:
            if tool.name not in self._tools:  # the first of a duplicated name, as a grammar would pick
                self._tools[tool.name] = _compile(tool)

    def call(self, name: str, params: list[tuple[str, str]]) -> ToolCall | None:
        """The call ``name(params)`` (raw values), or None when it is not valid for the tools."""
        tool = self._tools.get(name)
        if tool is None:
            return None
        values: dict[str, Any] = {}
        parts: list[str] = []
        for key, raw in params:
            if key in values:
                return None
            types = tool.types.get(key)
            if types is None:
                if not tool.open:
                    return None
                types = ALL_TYPES
            typed = _typed_value(raw, types)
            if typed is None:
                return None
            values[key], text = typed
            parts.append(dump_string(key) + ":" + text)
        if not tool.required <= values.keys():
            return None
        if tool.validator is not None and not _valid(tool.validator, values):
            return None
        return ToolCall(name, "{" + ",".join(parts) + "}")


def _compile(tool: ChatTool) -> _Tool:
    schema = chat_tool_parameters({"parameters": tool.parameters})
    types: dict[str, frozenset[str]] = {}
    required: set[str] = set()
    allow_more = True
    try:
        root = schema_from_json(schema).root
    except SchemaError:
        root = None
    if isinstance(root, ObjectSchema):
        for prop in root.properties:
            types[prop.name] = prop.schema.value_types() or ALL_TYPES
            if prop.required:
                required.add(prop.name)
        allow_more = root.additional_properties is not None
    validator: Any = None
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validator = cls(schema)
    except JsonSchemaError:
        validator = None
    return _Tool(types, frozenset(required), allow_more, validator)


def _valid(validator: Any, values: dict[str, Any]) -> bool:
    try:
        return bool(validator.is_valid(values))
    except Unresolvable:
        return True  # a $ref jsonschema cannot follow: the structural checks stand


def _typed_value(raw: str, types: frozenset[str]) -> tuple[Any, str] | None:
    """(value, JSON text) of a raw parameter value under the schema's ``types``; None if it fits none."""
    if types == {"string"}:
        return raw, dump_string(raw)
    # Python literals (True, None, 'text') as the templates render them -> JSON, as upstream's mapper does
    text = normalize_quotes_to_json(raw.strip(WHITESPACE))
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except ValueError:
        value, kind = None, ""
    else:
        kind = _json_kind(value)
        if kind == "integer" and "number" in types:
            kind = "number"
    if kind and (kind in types or (kind == "number" and "integer" in types)):
        return value, text
    if "string" in types:
        return raw, dump_string(raw)
    return None


def _read_envelope(body: str, value_newlines: bool) -> tuple[str, list[tuple[str, str]]] | None:
    """``<function=NAME>`` + parameters + ``</function>`` (whitespace around each), or None."""
    i = _skip_space(body, 0)
    if not body.startswith(_FUNCTION, i):
        return None
    close = body.find(">", i)
    name = body[i + len(_FUNCTION):close] if close >= 0 else ""
    if not name or "<" in name or "\n" in name:
        return None
    i = close + 1
    params: list[tuple[str, str]] = []
    while True:
        i = _skip_space(body, i)
        if body.startswith(_FUNCTION_END, i):
            i += len(_FUNCTION_END)
            break
        if not body.startswith(_PARAMETER, i):
            return None
        close = body.find(">", i)
        end = body.find(_PARAMETER_END, close + 1) if close >= 0 else -1
        key = body[i + len(_PARAMETER):close] if close >= 0 else ""
        if end < 0 or not key or "<" in key or "\n" in key:
            return None
        value = body[close + 1:end]
        if value_newlines:
            value = value[1:] if value.startswith("\n") else value
            value = value[:-1] if value.endswith("\n") else value
        params.append((key, value))
        i = end + len(_PARAMETER_END)
    if body[i:].strip(WHITESPACE):
        return None
    return name, params


def _skip_space(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i] in WHITESPACE:
        i += 1
    return i


def read_region(text: str, start: int, layout: ToolCallLayout, tools: XmlTools) -> tuple[list[ToolCall], str]:
    """The valid calls of ``text[start:]`` and what stays content: every envelope that is not a
    valid call and every non-blank text between envelopes, in order (whitespace around a valid
    call belongs to it)."""
    calls: list[ToolCall] = []
    content: list[str] = []
    pos = start
    for env in envelopes(text, start, layout):
        gap = text[pos:env.start]
        parsed = _read_envelope(env.body, layout.value_newlines) if env.closed else None
        call = tools.call(*parsed) if parsed is not None else None
        if call is None:
            content.append(gap)
            content.append(text[env.start:env.end])
        else:
            if gap.strip(WHITESPACE):
                content.append(gap)
            calls.append(call)
        pos = env.end
    tail = text[pos:]
    if tail.strip(WHITESPACE):
        content.append(tail)
    return calls, "".join(content)
