"""One candidate text read as tool calls, each validated against its tool's JSON schema.

    reader = CallReader(tools)
    reader.read(text) -> Read(calls, rules) | None     every call in ``text`` valid, or None

A candidate is the body of a code fence, a bare JSON value, an envelope's body or a Python call
expression. It is read as JSON (leniently: single quotes, Python literals, trailing commas), as
several JSON values one after another, or as Python calls; each value must be a call object --
``{"name": N, "arguments": {...}}`` or a variant of its keys (``function`` / ``tool`` /
``tool_name`` for the name; ``parameters`` / ``args`` / ``params`` / ``input`` for the arguments;
OpenAI's ``{"type": "function", "function": {...}}``; ``{N: {...}}``), the arguments an object or
that object as a JSON string -- naming one of the tools, with arguments that validate against the
tool's parameters schema (``jsonschema``, the same standard deviation 2 validates with). A name
that is no tool's but becomes exactly one tool's once separators (``.``, ``-``, ``_``, blanks) and
case are set aside names that tool (``NAME_VARIANT``: BFCL's ``prob_dist.binomial`` is offered as
``prob_dist_binomial``, and models write the dotted name); two tools alike that way take no variant.
A call that fails any of this makes the whole candidate None: nothing is guessed, and the text stays
content.

Enters: the request's tools, then candidate texts. Leaves: ``ToolCall`` values (arguments as JSON
text) and the rule names each needed. Raises nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError as JsonSchemaError
from referencing.exceptions import Unresolvable

from ..messages import ToolCall
from ..oai import ChatTool
from ..peg_builder import chat_tool_parameters
from .jsonish import Brackets, loads_lenient, python_calls
from .rules import ARGUMENTS_STRING, KEY_VARIANTS, NAME_VARIANT, PYTHON_CALL

__all__ = ["CallReader", "Read", "name_key"]

_NAME_KEYS = ("name", "function", "tool", "tool_name", "function_name")
_ARG_KEYS = ("arguments", "parameters", "args", "params", "input")
_IGNORED_KEYS = frozenset({"id", "type", "index"})   # what a call object may carry besides its name and arguments
_WHITESPACE = " \t\n\r\f\v"
_SEPARATORS = re.compile(r"[.\-_\s]")


def name_key(name: str) -> str:
    """``name`` with its separators (``.``, ``-``, ``_``, blanks) made one and its case set aside."""
    return _SEPARATORS.sub("_", name).lower()


@dataclass(frozen=True)
class Read:
    """The calls one candidate held, and the rules reading them needed."""

    calls: tuple[ToolCall, ...]
    rules: frozenset[str]


@dataclass(frozen=True)
class _Tool:
    properties: tuple[str, ...]   # the parameters' names, in the schema's order (positional Python arguments)
    validator: Any                # None: the schema is unusable, any object passes


def _compile(tool: ChatTool) -> _Tool:
    schema = chat_tool_parameters({"parameters": tool.parameters})
    props = schema.get("properties") if isinstance(schema, dict) else None
    names = tuple(props) if isinstance(props, dict) else ()
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        return _Tool(names, cls(schema))
    except (JsonSchemaError, TypeError):
        return _Tool(names, None)


class CallReader:
    """The tools of a request, ready to validate calls (validators compiled once)."""

    def __init__(self, tools: Sequence[ChatTool]) -> None:
        self._tools: dict[str, _Tool] = {}
        for tool in tools:
            self._tools.setdefault(tool.name, _compile(tool))
        self._keys: dict[str, str | None] = {}   # name_key -> the one tool it names (None: several)
        for name in self._tools:
            key = name_key(name)
            self._keys[key] = name if key not in self._keys else None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def resolve(self, name: str) -> tuple[str, frozenset[str]] | None:
        """(the tool ``name`` names, the rules that needed); None when it names none, or several."""
        if name in self._tools:
            return name, frozenset()
        tool = self._keys.get(name_key(name))
        return None if tool is None else (tool, frozenset({NAME_VARIANT}))

    def may_name(self, prefix: str) -> bool:
        """Whether ``prefix`` may still grow into a name :meth:`resolve` reads (streaming)."""
        key = name_key(prefix)
        return any(k.startswith(key) for k in self._keys)

    def read(self, text: str) -> Read | None:
        """The calls of ``text`` (JSON values, or Python calls), every one valid; else None."""
        values = _json_values(text)
        if values is not None:
            calls: list[ToolCall] = []
            rules: set[str] = set()
            for value, used in values:
                items = value if isinstance(value, list) else [value]
                for item in items:
                    one = self._object(item)
                    if one is None:
                        return None
                    calls.append(one[0])
                    rules |= one[1] | used
            return Read(tuple(calls), frozenset(rules)) if calls else None
        return self._python(text)

    def call(self, name: str, args: Any) -> ToolCall | None:
        """``name(args)`` when ``name`` is a tool (exactly) and ``args`` an object its schema accepts."""
        tool = self._tools.get(name)
        if tool is None or not isinstance(args, dict):
            return None
        if tool.validator is not None:
            try:
                if not tool.validator.is_valid(args):
                    return None
            except (Unresolvable, RecursionError):
                pass   # a $ref jsonschema cannot follow: the object stands, as in deviation 2
        return ToolCall(name, json.dumps(args, ensure_ascii=False))

    def _object(self, obj: Any) -> tuple[ToolCall, frozenset[str]] | None:
        shaped = _call_shape(obj, self)
        if shaped is None:
            return None
        written, args, rules = shaped
        resolved = self.resolve(written)
        if resolved is None:
            return None
        name, rules = resolved[0], rules | resolved[1]
        if isinstance(args, str):
            read = loads_lenient(args)
            if read is None:
                return None
            args, used = read
            rules = rules | used | {ARGUMENTS_STRING}
        call = self.call(name, args)
        return None if call is None else (call, frozenset(rules))

    def _python(self, text: str) -> Read | None:
        """Python calls: the text one expression (a call, a list of calls), or one call a line."""
        read = python_calls(text)
        if read is None:
            lines = [line for line in text.splitlines() if line.strip()]
            each = [python_calls(line) for line in lines] if len(lines) > 1 else []
            if not each or any(r is None for r in each):
                return None
            read = ([c for r in each if r is not None for c in r[0]], frozenset({PYTHON_CALL}))
        found, rules = read
        calls: list[ToolCall] = []
        for written, keywords, positional in found:
            resolved = self.resolve(written)
            if resolved is None:
                return None
            name, used = resolved
            rules = rules | used
            tool = self._tools[name]
            if len(positional) > len(tool.properties):
                return None
            args = dict(zip(tool.properties, positional, strict=False))
            if args.keys() & keywords.keys():
                return None
            call = self.call(name, {**args, **keywords})
            if call is None:
                return None
            calls.append(call)
        return Read(tuple(calls), rules)


def _call_shape(obj: Any, reader: CallReader) -> tuple[str, Any, frozenset[str]] | None:
    """(name as written, arguments, rules) of a call object in any of the accepted key spellings."""
    if not isinstance(obj, dict):
        return None
    inner = obj.get("function")
    if isinstance(inner, dict) and set(obj) - {"function"} <= _IGNORED_KEYS:
        shaped = _call_shape(inner, reader)   # OpenAI's {"type": "function", "function": {...}}
        return None if shaped is None else (shaped[0], shaped[1], shaped[2] | {KEY_VARIANTS})
    if len(obj) == 1:
        ((key, value),) = obj.items()
        if reader.resolve(key) is not None and isinstance(value, (dict, str)):
            return key, value, frozenset({KEY_VARIANTS})   # {NAME: {...}}
    name_keys = [k for k in _NAME_KEYS if isinstance(obj.get(k), str)]
    arg_keys = [k for k in _ARG_KEYS if k in obj]
    if len(name_keys) != 1 or len(arg_keys) > 1 or set(obj) - {*name_keys, *arg_keys} - _IGNORED_KEYS:
        return None
    rules = frozenset() if name_keys == ["name"] and arg_keys == ["arguments"] else frozenset({KEY_VARIANTS})
    return obj[name_keys[0]], obj[arg_keys[0]] if arg_keys else {}, rules


def _json_values(text: str) -> list[tuple[Any, frozenset[str]]] | None:
    """The JSON values ``text`` holds one after another (whitespace, commas or semicolons between),
    each read leniently; None unless all of it is such values."""
    values: list[tuple[Any, frozenset[str]]] = []
    i, n = 0, len(text)
    while True:
        while i < n and (text[i] in _WHITESPACE or (values and text[i] in ",;")):
            i += 1
        if i == n:
            return values or None
        if text[i] not in "{[":
            return None
        end = Brackets(i).end(text)
        if end is None or end < 0:
            return None
        read = loads_lenient(text[i:end])
        if read is None:
            return None
        values.append(read)
        i = end
