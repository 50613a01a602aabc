"""The chat PEG builder: upstream's ``common_chat_peg_builder`` (common/chat-peg-parser.cpp).

:class:`ChatPegBuilder` is a :class:`~llamact.peg.builder.ParserBuilder` with the chat tags
(``REASONING``, ``CONTENT``, ``TOOL_NAME``, ...), the tag helpers (the ``tool_open`` / ``tool_name``
/ ... family wrap their tag in ``atomic``), and the tool-call helpers: :meth:`~ChatPegBuilder.
standard_json_tools` (three JSON layouts), :meth:`~ChatPegBuilder.standard_constructed_tools`
(XML-ish markers), :meth:`~ChatPegBuilder.python_style_tool_calls`, plus ``permute``, ``prefix``,
``optspace`` and ``tag_with_safe_content``. :func:`build_chat_peg_parser` is the one-call form.

Tools are OpenAI-style: ``[{"type": "function", "function": {"name": ..., "parameters": {...}}}]``;
``properties`` are used in their given order. A tool without ``"function"`` is skipped; one whose
function has no string ``name`` raises :class:`~llamact.peg.PegArenaError`; a parameters schema
outside the supported subset raises ``SchemaError`` (JSON layouts only, as upstream).

Nodes are allocated in the order of upstream's GCC build (see builder.py): every ``a + b + ...``
chain of upstream is written with :meth:`~llamact.peg.builder.ParserBuilder.seq_rtl`, and every
``common_peg_parser x = eps();`` upstream declares is allocated here too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..peg.arena import Arena
from ..peg.builder import P, ParserBuilder, ParserLike
from ..peg.nodes import PegArenaError

__all__ = ["COMMON_CHAT_MAX_PERMUTE", "ChatPegBuilder", "build_chat_peg_parser", "chat_tool_parameters"]

COMMON_CHAT_MAX_PERMUTE = 6

_C_SPACE = " \t\n\v\f\r"


def chat_tool_parameters(function: Any) -> Any:
    """Upstream's ``common_chat_tool_parameters``: the function's parameters, or an empty object schema."""
    if isinstance(function, dict) and "parameters" in function:
        params = function["parameters"]
        if params is not None and params != {}:
            return params
    return {"type": "object", "properties": {}}


def _json_empty(value: Any) -> bool:
    # nlohmann's empty(): null is empty, a scalar never is
    return value is None or (isinstance(value, (dict, list)) and not value)


def _json_items(value: Any) -> list[tuple[str, Any]]:
    # nlohmann's items(): keys of an object, indices of an array, "" for a scalar
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, list):
        return [(str(i), v) for i, v in enumerate(value)]
    return [] if value is None else [("", value)]


def _functions(tools: Any) -> list[tuple[str, Any]]:
    """(name, parameters) of each tool that has a ``function``, in order."""
    out = []
    for tool_def in tools:
        if not isinstance(tool_def, dict) or "function" not in tool_def:
            continue
        function = tool_def["function"]
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str):
            raise PegArenaError("a tool's function needs a string 'name'", {"tool": tool_def})
        out.append((name, chat_tool_parameters(function)))
    return out


def _properties(params: Any) -> list[tuple[str, Any]]:
    if isinstance(params, dict) and "properties" in params and not _json_empty(params["properties"]):
        return _json_items(params["properties"])
    return []


def _key_spec(key: str) -> tuple[str, str]:
    """``"function.name"`` -> ``("function", "name")``; a key without a dot -> ``("", key)``."""
    prefix, dot, field = key.partition(".")
    return (prefix, field) if dot else ("", key)


def _quoted(key: str) -> str:
    return f'"{key}"'


# The AST tags of upstream's chat builder (the mappers read them back).
REASONING_BLOCK = "reasoning-block"
REASONING = "reasoning"
CONTENT = "content"
TOOL = "tool"
TOOL_OPEN = "tool-open"
TOOL_CLOSE = "tool-close"
TOOL_ID = "tool-id"
TOOL_NAME = "tool-name"
TOOL_ARGS = "tool-args"
TOOL_ARG = "tool-arg"
TOOL_ARG_OPEN = "tool-arg-open"
TOOL_ARG_CLOSE = "tool-arg-close"
TOOL_ARG_NAME = "tool-arg-name"
TOOL_ARG_VALUE = "tool-arg-value"
TOOL_ARG_STRING_VALUE = "tool-arg-string-value"  # schema-declared strings: never taken for JSON


class ChatPegBuilder(ParserBuilder):
    """Upstream's ``common_chat_peg_builder``: a parser builder with the chat tags and tool-call helpers."""

    REASONING_BLOCK = REASONING_BLOCK
    REASONING = REASONING
    CONTENT = CONTENT
    TOOL = TOOL
    TOOL_OPEN = TOOL_OPEN
    TOOL_CLOSE = TOOL_CLOSE
    TOOL_ID = TOOL_ID
    TOOL_NAME = TOOL_NAME
    TOOL_ARGS = TOOL_ARGS
    TOOL_ARG = TOOL_ARG
    TOOL_ARG_OPEN = TOOL_ARG_OPEN
    TOOL_ARG_CLOSE = TOOL_ARG_CLOSE
    TOOL_ARG_NAME = TOOL_ARG_NAME
    TOOL_ARG_VALUE = TOOL_ARG_VALUE
    TOOL_ARG_STRING_VALUE = TOOL_ARG_STRING_VALUE

    # -- tags ------------------------------------------------------------------------------------

    def reasoning_block(self, p: ParserLike) -> P:
        return self.tag(self.REASONING_BLOCK, p)

    def reasoning(self, p: ParserLike) -> P:
        return self.tag(self.REASONING, p)

    def content(self, p: ParserLike) -> P:
        return self.tag(self.CONTENT, p)

    def tool(self, p: ParserLike) -> P:
        return self.tag(self.TOOL, p)

    def tool_open(self, p: ParserLike) -> P:
        return self.atomic(self.tag(self.TOOL_OPEN, p))

    def tool_close(self, p: ParserLike) -> P:
        return self.atomic(self.tag(self.TOOL_CLOSE, p))

    def tool_id(self, p: ParserLike) -> P:
        return self.atomic(self.tag(self.TOOL_ID, p))

    def tool_name(self, p: ParserLike) -> P:
        return self.atomic(self.tag(self.TOOL_NAME, p))

    def tool_args(self, p: ParserLike) -> P:
        return self.tag(self.TOOL_ARGS, p)

    def tool_arg(self, p: ParserLike) -> P:
        return self.tag(self.TOOL_ARG, p)

    def tool_arg_open(self, p: ParserLike) -> P:
        return self.atomic(self.tag(self.TOOL_ARG_OPEN, p))

    def tool_arg_close(self, p: ParserLike) -> P:
        return self.atomic(self.tag(self.TOOL_ARG_CLOSE, p))

    def tool_arg_name(self, p: ParserLike) -> P:
        return self.atomic(self.tag(self.TOOL_ARG_NAME, p))

    def tool_arg_value(self, p: ParserLike) -> P:
        return self.tag(self.TOOL_ARG_VALUE, p)

    def tool_arg_string_value(self, p: ParserLike) -> P:
        return self.tag(self.TOOL_ARG_STRING_VALUE, p)

    def tool_arg_json_value(self, p: ParserLike) -> P:
        return self.tag(self.TOOL_ARG_VALUE, p)

    # -- small helpers ---------------------------------------------------------------------------

    def tag_with_safe_content(self, tag_name: str, marker: str, p: ParserLike) -> P:
        """Any number of ``p`` or content chunks (a chunk never starts with ``marker``), rule ``tag_name``."""
        if not marker:
            return self.zero_or_more(self.choice([p, self.rule(tag_name, self.content(self.any()))]))
        chunk = self.seq_rtl(lambda: self.negate(self.literal(marker)), self.any, lambda: self.until(marker))
        content_chunk = self.rule(tag_name, self.content(chunk))
        return self.zero_or_more(self.choice([p, content_chunk]))

    def permute(self, rule_prefix: str, parsers: Sequence[P]) -> P:
        """Every one of ``parsers`` exactly once, in any order (in order only when there are more than
        :data:`COMMON_CHAT_MAX_PERMUTE`); each remaining subset is a rule ``{rule_prefix}-{bitmask}``."""
        if not parsers:
            return self.eps()
        if len(parsers) == 1 or len(parsers) > COMMON_CHAT_MAX_PERMUTE:
            return self.sequence(parsers)
        rules: dict[int, P] = {}

        def remaining_of(remaining: int) -> P:
            if remaining == 0:
                return self.eps()
            if remaining in rules:
                return rules[remaining]
            alternatives = self.choice()
            for i, parser in enumerate(parsers):
                bit = 1 << i
                if remaining & bit:
                    alternatives |= parser + remaining_of(remaining & ~bit)
            rules[remaining] = self.rule(f"{rule_prefix}-{remaining}", alternatives)
            return rules[remaining]

        return remaining_of((1 << len(parsers)) - 1)

    def required_then_optional(self, required: Sequence[P], optional: Sequence[P]) -> P:
        """``required`` in order, space-separated, then any number of ``optional`` ones in any order,
        each after a space: how upstream lays out a tool's arguments or an object's members (its
        auto-parser generator and the DeepSeek V3.2 / MiniMax M3 builders each write this loop)."""
        parser = self.eps()
        for i, element in enumerate(required):
            if i > 0:
                parser = parser + self.space()
            parser = parser + element
        if optional:
            any_optional = self.choice()
            for element in optional:
                any_optional |= element
            parser = parser + self.repeat(self.space() + any_optional, 0, -1)
        return parser

    def prefix(self, s: str, delimiter: str = "") -> P:
        """A literal of ``s`` up to (not including) the first ``delimiter`` (all of it when absent)."""
        if not s:
            return self.eps()
        if not delimiter:
            return self.literal(s)
        index = s.find(delimiter)
        return self.literal(s if index < 0 else s[:index])

    def optspace(self, tag: str) -> P:
        """``tag`` whose leading and trailing whitespace characters are each optional."""
        parser = self.eps()
        body_start = len(tag) - len(tag.lstrip(_C_SPACE))
        body_end = len(tag.rstrip(_C_SPACE)) if body_start < len(tag) else len(tag)
        for ch in tag[:body_start]:
            parser += self.optional(self.literal(ch))
        parser += self.literal(tag[body_start:body_end])
        for ch in tag[body_end:]:
            parser += self.optional(self.literal(ch))
        return parser

    # -- tool calls: XML-ish markers ---------------------------------------------------------------

    def standard_constructed_tools(self, markers: Mapping[str, str], tools: Any, parallel_tool_calls: bool,
                                   force_tool_calls: bool) -> P:
        """``<tool_call><function=NAME><param=ARG>VALUE</param>...</function></tool_call>``, markers overridable
        (``tool_call_start_marker``, ``function_opener``, ``parameter_key_prefix``, ...)."""
        if not isinstance(tools, (list, tuple)) or not tools:
            return self.eps()
        m = {"tool_call_start_marker": "<tool_call>", "tool_call_end_marker": "</tool_call>",
             "function_opener": "<function=", "function_name_suffix": ">", "function_closer": "</function>",
             "parameter_key_prefix": "<param=", "parameter_key_suffix": ">", "parameter_closer": "</param>"}
        m.update(markers)
        tool_choices = self.choice()
        for name, params in _functions(tools):
            tool_choices |= self.rule(f"tool-{name}", self._constructed_tool(m, name, params))
        section_start, section_end = m["tool_call_start_marker"], m["tool_call_end_marker"]
        if parallel_tool_calls:
            body = self.seq_rtl(self._lit(section_start), self.space,
                                lambda: self.one_or_more(self.seq_rtl(tool_choices, self.space)),
                                self._lit(section_end))
        else:
            body = self.seq_rtl(self._lit(section_start), self.space, tool_choices, self.space,
                                self._lit(section_end))
        section = self.trigger_rule("tool-call", body)
        return section if force_tool_calls else self.optional(section)

    def _constructed_tool(self, m: Mapping[str, str], name: str, params: Any) -> P:
        args = self.eps()
        properties = _properties(params)
        if properties:
            arg_choice = self.choice()
            for prop_name, _ in properties:
                arg_choice |= self._constructed_arg(m, prop_name)
            args = self.zero_or_more(self.seq_rtl(arg_choice, self.space))
        # tool_open(...) is the leftmost operand: its own chain is evaluated after the other operands
        return self.tool(self.seq_rtl(
            lambda: self.tool_open(self.seq_rtl(self._lit(m["function_opener"]),
                                                lambda: self.tool_name(self.literal(name)),
                                                self._lit(m["function_name_suffix"]))),
            self.space, lambda: self.tool_args(args), self.space,
            lambda: self.tool_close(self.literal(m["function_closer"]))))

    def _constructed_arg(self, m: Mapping[str, str], prop_name: str) -> P:
        arg_name_parser = self.choice([self.literal(prop_name), self.literal(f'"{prop_name}"'),
                                       self.literal(f"'{prop_name}'")])
        return self.tool_arg(self.seq_rtl(
            lambda: self.tool_arg_open(self.literal(m["parameter_key_prefix"])),
            lambda: self.tool_arg_name(arg_name_parser), self._lit(m["parameter_key_suffix"]),
            lambda: self.tool_arg_value(self.until(m["parameter_closer"])),
            lambda: self.tool_arg_close(self.literal(m["parameter_closer"]))))

    # -- tool calls: Python style ------------------------------------------------------------------

    def python_or_json_value(self) -> P:
        """Like :meth:`python_value`, but the leaves also take JSON's true/false/null."""
        def body() -> P:
            ws = self.space()
            value = self.python_or_json_value()
            member = self.sequence([self.python_string(), ws, self.literal(":"), ws, value])
            members = self.sequence([member, self.zero_or_more(self.sequence([ws, self.literal(","), ws, member]))])
            dict_ = self.rule("python-or-json-dict", lambda: self._container("{", "}", members, ws, True))
            elements = self.sequence([value, self.zero_or_more(self.sequence([self.literal(","), ws, value]))])
            array = self.rule("python-or-json-array", lambda: self._container("[", "]", elements, ws, True))
            return self.choice([dict_, array, self.python_string(), self.python_number(), self.python_bool(),
                                self.python_null(), self.json_bool(), self.json_null()])

        return self.rule("python-or-json-value", body)

    def python_style_tool_calls(self, tools: Any, parallel_tool_calls: bool, allow_json_literals: bool) -> P:
        """``[name(arg="value", n=1), ...]``; ``allow_json_literals``: values may use true/false/null."""
        if not isinstance(tools, (list, tuple)) or not tools:
            return self.eps()
        tool_choices = self.choice()
        for name, params in _functions(tools):
            tool_choices |= self.rule(f"tool-{name}", self._python_style_tool(name, params, allow_json_literals))
        if parallel_tool_calls:
            return self.seq_rtl("[", self.space, tool_choices,
                                lambda: self.zero_or_more(self.seq_rtl(",", self.space, tool_choices)),
                                self.space, "]")
        return self.seq_rtl("[", self.space, tool_choices, self.space, "]")

    def _python_style_tool(self, name: str, params: Any, allow_json_literals: bool) -> P:
        args = self.eps()
        properties = _properties(params)
        if properties:
            arg_choice = self.choice()
            for prop_name, prop_def in properties:
                arg_choice |= self._python_style_arg(prop_name, prop_def, allow_json_literals)
            args = self.seq_rtl(arg_choice, lambda: self.zero_or_more(self.seq_rtl(",", self.space, arg_choice)))
        return self.tool(self.seq_rtl(
            lambda: self.tool_open(self.seq_rtl(lambda: self.tool_name(self.literal(name)), self._lit("("))),
            self.space, lambda: self.tool_args(args), self.space, lambda: self.tool_close(self.literal(")"))))

    def _python_style_arg(self, prop_name: str, prop_def: Any, allow_json_literals: bool) -> P:
        is_string_type = isinstance(prop_def, dict) and prop_def.get("type", None) == "string"
        arg_name_parser = self.literal(prop_name)
        arg_value_parser = self.eps()
        # a quoted value: the mapper's quote normalisation keeps its escapes
        string_value_parser = self.tool_arg_value(self.choice([
            self.seq_rtl(self._lit('"'), lambda: self.string_content('"'), self._lit('"')),
            self.seq_rtl(self._lit("'"), lambda: self.string_content("'"), self._lit("'"))]))
        if is_string_type:
            arg_value_parser = string_value_parser
        else:
            arg_value_parser = self.tool_arg_value(
                self.python_or_json_value() if allow_json_literals else self.python_value())
        return self.tool_arg(self.seq_rtl(
            lambda: self.tool_arg_open(self.seq_rtl(lambda: self.tool_arg_name(arg_name_parser), self._lit("="))),
            arg_value_parser, lambda: self.tool_arg_close(self.eps())))

    # -- tool calls: JSON ----------------------------------------------------------------------------

    def standard_json_tools(self, section_start: str, section_end: str, tools: Any, parallel_tool_calls: bool,
                            force_tool_calls: bool, name_key: str = "", args_key: str = "",
                            array_wrapped: bool = False, function_is_key: bool = False, call_id_key: str = "",
                            gen_call_id_key: str = "", parameters_order: Sequence[str] = (),
                            accept_openai_wrapper: bool = False) -> P:
        """JSON tool calls between ``section_start`` and ``section_end``, in one of three layouts:

        ``function_is_key``: ``{"NAME": {...args...}}`` (``args_key`` wraps the arguments);
        a dotted ``name_key``/``args_key`` (``"function.name"``): the name and arguments nested in
        an object; otherwise flat ``{"name": ..., "arguments": ...}`` with the fields in
        ``parameters_order``. ``call_id_key``/``gen_call_id_key`` add optional id fields,
        ``accept_openai_wrapper`` an optional ``"type": "function"``, ``array_wrapped`` a ``[...]``.
        """
        if not isinstance(tools, (list, tuple)) or not tools:
            return self.eps()
        effective_name_key = name_key or "name"
        effective_args_key = args_key or "arguments"
        tool_choices = self.eps()
        if function_is_key:
            tool_choices = self.build_json_tools_function_is_key(tools, args_key, effective_args_key, call_id_key,
                                                                 gen_call_id_key)
        elif _key_spec(effective_name_key)[0] or _key_spec(effective_args_key)[0]:
            tool_choices = self.build_json_tools_nested_keys(tools, effective_name_key, effective_args_key,
                                                             call_id_key, gen_call_id_key)
        else:
            tool_choices = self.build_json_tools_flat_keys(tools, effective_name_key, effective_args_key,
                                                           call_id_key, gen_call_id_key, parameters_order,
                                                           accept_openai_wrapper)
        tool_calls = tool_choices
        if parallel_tool_calls:
            tool_calls = self.seq_rtl(tool_calls, lambda: self.zero_or_more(
                self.seq_rtl(self.space, self._lit(","), self.space, tool_choices)))
        if array_wrapped:
            tool_calls = self.seq_rtl(self._lit("["), self.space, tool_calls, self.space, self._lit("]"))
        section = self.trigger_rule("tool-call", self.seq_rtl(self._lit(section_start), self.space, tool_calls,
                                                              self.space, self._lit(section_end)))
        return section if force_tool_calls else self.optional(section)

    def _args_schema(self, name: str, params: Any) -> P:
        return self.tool_args(self.schema(self.json(), f"tool-{name}-schema", params))

    def _quoted_tool_name(self, name: str) -> P:
        return self.atomic(self.seq_rtl(self._lit('"'), lambda: self.tool_name(self.literal(name)), self._lit('"')))

    def _key_colon(self, key: str, value: P | Callable[[], P]) -> P:
        """Upstream's ``literal("\\"key\\"") + space() + literal(":") + space() + value``."""
        return self.seq_rtl(self._lit(_quoted(key)), self.space, self._lit(":"), self.space, value)

    def _string_id(self, key: str) -> P:
        # one flat chain of seven operands: "key" space ":" space '"' tool_id(...) '"'
        return self.atomic(self.seq_rtl(self._lit(_quoted(key)), self.space, self._lit(":"), self.space,
                                        self._lit('"'), lambda: self.tool_id(self.string_content('"')),
                                        self._lit('"')))

    def _string_or_number_id(self, key: str) -> P:
        # the choice's braced list is evaluated left to right, each + chain right to left
        return self.atomic(self._key_colon(key, lambda: self.choice([
            self.seq_rtl(self._lit('"'), lambda: self.tool_id(self.string_content('"')), self._lit('"')),
            self.tool_id(self.json_number())])))

    def build_json_tools_function_is_key(self, tools: Any, args_key: str, effective_args_key: str,
                                         call_id_key: str, gen_call_id_key: str) -> P:
        """The ``{"NAME": {...}}`` layout's tool choice."""
        tool_choices = self.choice()
        for name, params in _functions(tools):
            tool_parser = self._function_is_key_tool(name, params, args_key, effective_args_key, call_id_key,
                                                     gen_call_id_key)
            tool_choices |= self.rule(f"tool-{name}", tool_parser)
        return tool_choices

    def _id_then_comma(self, id_parser: P) -> P:
        """Upstream's ``optional(id_parser + space() + optional(literal(",") + space()))``."""
        return self.optional(self.seq_rtl(id_parser, self.space,
                                          lambda: self.optional(self.seq_rtl(self._lit(","), self.space))))

    def _id_comma(self, id_parser: P) -> P:
        """Upstream's ``optional(id_parser + space() + literal(",") + space())``."""
        return self.optional(self.seq_rtl(id_parser, self.space, self._lit(","), self.space))

    def _function_is_key_tool(self, name: str, params: Any, args_key: str, effective_args_key: str,
                              call_id_key: str, gen_call_id_key: str) -> P:
        inner_fields: list[P] = []
        if call_id_key:
            inner_fields.append(self._id_then_comma(self._string_id(call_id_key)))
        if gen_call_id_key:
            inner_fields.append(self._id_then_comma(self._string_or_number_id(gen_call_id_key)))
        args_parser = self.eps()
        if not args_key:
            args_parser = self._args_schema(name, params)
        else:
            args_parser = self._key_colon(effective_args_key, lambda: self._args_schema(name, params))
        inner_fields.append(args_parser)
        inner_object = self.eps()
        if not args_key and len(inner_fields) == 1:
            inner_object = inner_fields[0]
        else:
            inner_object = self.seq_rtl(self._lit("{"), self.space)
            for i, field in enumerate(inner_fields):
                inner_object = inner_object + field
                if i < len(inner_fields) - 1:
                    inner_object = inner_object + self.space()
            inner_object = self.seq_rtl(inner_object, self.space, self._lit("}"))
        return self.tool(self.seq_rtl(
            lambda: self.tool_open(self.literal("{")), self.space, self._lit('"'),
            lambda: self.tool_name(self.literal(name)), self._lit('"'), self.space, self._lit(":"), self.space,
            inner_object, self.space, lambda: self.tool_close(self.literal("}"))))

    def build_json_tools_nested_keys(self, tools: Any, effective_name_key: str, effective_args_key: str,
                                     call_id_key: str, gen_call_id_key: str) -> P:
        """The layout with the name and arguments in a nested object (``"function.name"``)."""
        tool_choices = self.choice()
        name_spec, args_spec = _key_spec(effective_name_key), _key_spec(effective_args_key)
        nested_prefix = name_spec[0] or args_spec[0]
        fields = (nested_prefix, name_spec[1] if name_spec[0] else effective_name_key,
                  args_spec[1] if args_spec[0] else effective_args_key)
        for name, params in _functions(tools):
            tool_choices |= self.rule(f"tool-{name}",
                                      self._nested_keys_tool(name, params, fields, call_id_key, gen_call_id_key))
        return tool_choices

    def _nested_keys_tool(self, name: str, params: Any, fields: tuple[str, str, str], call_id_key: str,
                          gen_call_id_key: str) -> P:
        nested_prefix, nested_name_field, nested_args_field = fields
        nested_name = self._key_colon(nested_name_field, lambda: self._quoted_tool_name(name))
        nested_args = self._key_colon(nested_args_field, lambda: self._args_schema(name, params))
        nested_object = self.seq_rtl(self._lit("{"), self.space, nested_name, self.space, self._lit(","),
                                     self.space, nested_args, self.space, self._lit("}"))
        body = self.seq_rtl(lambda: self.tool_open(self.literal("{")), self.space)
        # a dotted id key has no place in this layout: upstream leaves it out
        if call_id_key and not _key_spec(call_id_key)[0]:
            id_parser = self._string_id(call_id_key)
            body = self.seq_rtl(body, lambda: self._id_comma(id_parser))
        if gen_call_id_key and not _key_spec(gen_call_id_key)[0]:
            gen_id_parser = self._string_or_number_id(gen_call_id_key)
            body = self.seq_rtl(body, lambda: self._id_comma(gen_id_parser))
        nested_field = self._key_colon(nested_prefix, nested_object)
        body = self.seq_rtl(body, nested_field, self.space, lambda: self.tool_close(self.literal("}")))
        return self.tool(body)

    def build_json_tools_flat_keys(self, tools: Any, effective_name_key: str, effective_args_key: str,
                                   call_id_key: str, gen_call_id_key: str, parameters_order: Sequence[str],
                                   accept_openai_wrapper: bool) -> P:
        """The flat ``{"name": ..., "arguments": ...}`` layout, fields in ``parameters_order``."""
        tool_choices = self.choice()
        key_parsers = (self.literal(_quoted(effective_name_key)), self.literal(_quoted(effective_args_key)))
        for name, params in _functions(tools):
            body = self._flat_keys_tool(name, params, key_parsers, (effective_name_key, effective_args_key),
                                        call_id_key, gen_call_id_key, parameters_order, accept_openai_wrapper)
            tool_choices |= self.rule(f"tool-{name}", self.tool(body))
        return tool_choices

    def _flat_keys_tool(self, name: str, params: Any, key_parsers: tuple[P, P], keys: tuple[str, str],
                        call_id_key: str, gen_call_id_key: str, parameters_order: Sequence[str],
                        accept_openai_wrapper: bool) -> P:
        tool_name_ = self.seq_rtl(key_parsers[0], self.space, self._lit(":"), self.space,
                                  lambda: self._quoted_tool_name(name))
        tool_args_ = self.seq_rtl(key_parsers[1], self.space, self._lit(":"), self.space,
                                  lambda: self._args_schema(name, params))
        id_parser = self.eps()
        if call_id_key:
            id_parser = self._string_or_number_id(call_id_key)
        gen_id_parser = self.eps()
        if gen_call_id_key:
            gen_id_parser = self._string_or_number_id(gen_call_id_key)
        pairs = [(tool_name_, keys[0]), (tool_args_, keys[1])]
        if call_id_key:
            pairs.append((self.optional(id_parser), call_id_key))
        if gen_call_id_key:
            pairs.append((self.optional(gen_id_parser), gen_call_id_key))
        order = list(parameters_order)
        # std::sort of at most 4 (< 16) elements is an insertion sort, so stable like list.sort()
        pairs.sort(key=lambda pair: order.index(pair[1]) if pair[1] in order else len(order))
        type_field = self.eps()
        if accept_openai_wrapper:
            type_field = self.optional(self.seq_rtl(
                self._lit('"type"'), self.space, self._lit(":"), self.space, self._lit('"function"'),
                self.space, self._lit(","), self.space))
        body = self.seq_rtl(lambda: self.tool_open(self.literal("{")), self.space, type_field)
        for i, (field, _) in enumerate(pairs):
            body = body + field
            if i < len(pairs) - 1:
                body = self.seq_rtl(body, self.space, self._lit(","), self.space)
        return self.seq_rtl(body, self.space, lambda: self.tool_close(self.literal("}")))

def build_chat_peg_parser(fn: Callable[[ChatPegBuilder], P]) -> Arena:
    """Upstream's ``build_chat_peg_parser``: ``fn``'s parser becomes the root of a built arena
    (built once per what ``fn`` can see: chat/parser_memo.py)."""
    from .parser_memo import build_once

    return build_once(fn, _build_fresh)


def _build_fresh(fn: Callable[[ChatPegBuilder], P]) -> Arena:
    builder = ChatPegBuilder()
    builder.set_root(fn(builder))
    return builder.build()
