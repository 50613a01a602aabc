"""The autoparser's tool-call parsers, one per tool format the analysis can find
(upstream's ``analyze_tools::build_parser`` and its three builders, chat-auto-parser-generator.cpp).

    build_tools_parser(ctx) -> P         reasoning, content before the calls, the calls, end

``JSON_NATIVE``      ``{"name": "f", "arguments": {...}}`` (the chat builder's ``standard_json_tools``,
                     in the field layout the analysis found), in a section or per call
``TAG_WITH_JSON``    ``<function=f>{...}</function>``: the name in markers, JSON arguments
``TAG_WITH_TAGGED``  ``<function=f><param=k>v</param>...``: every argument in markers; a value the
                     schema allows as a string is raw text up to the value's end marker, others JSON

A call's opening is made atomic where the format can tell early that a call has begun (a name
suffix, a call id, or a peek at the arguments' first marker), so that a partial parse does not
report a call before its name is whole. ``ctx`` is the generator's :class:`BuildContext`.
Raises ``SchemaError`` for a parameters schema outside the supported subset.
"""

from __future__ import annotations

from typing import Any

from ...peg.builder import P
from ..peg_builder import ChatPegBuilder, chat_tool_parameters
from ..render import TOOL_CHOICE_REQUIRED
from ..specialized._common import foreach_function, foreach_parameter
from .build_context import BuildContext, is_always_wrapped, optional_wrapped_content
from .model import CallIdPosition, ToolFormat, ToolsAnalysis

__all__ = ["build_tools_parser"]

# what separates parallel calls when the format has no per-call markers
_CALL_SEPARATOR = ", "


def build_tools_parser(ctx: BuildContext) -> P:
    """``analyze_tools::build_parser``: the parser for output that may hold tool calls."""
    mode = ctx.analysis.tools.format.mode
    if mode == ToolFormat.JSON_NATIVE:
        return _json_native(ctx)
    if mode == ToolFormat.TAG_WITH_JSON:
        return _tag_with_json(ctx)
    if mode == ToolFormat.TAG_WITH_TAGGED:
        return _tag_with_tagged(ctx)
    # upstream logs that tool calling will not work for this template, and parses nothing
    return ctx.p.eps()


def _json_native(ctx: BuildContext) -> P:
    p, inputs, fmt = ctx.p, ctx.inputs, ctx.analysis.tools.format
    name_field, args_field = fmt.name_field, fmt.args_field
    if fmt.function_field and fmt.function_field != "function" and "." not in name_field:
        name_field = f"{fmt.function_field}.{name_field}"
        args_field = f"{fmt.function_field}.{args_field}"

    def calls(start: str, end: str) -> P:
        return p.standard_json_tools(
            start, end, inputs.tools, inputs.parallel_tool_calls, inputs.tool_choice == TOOL_CHOICE_REQUIRED,
            name_field, args_field, fmt.tools_array_wrapped, fmt.fun_name_is_key, fmt.id_field, fmt.gen_id_field,
            fmt.parameter_order, fmt.openai_wrapper_trigger)

    tools_parser = p.eps()
    if not fmt.section_start and fmt.per_call_start:
        single = calls(fmt.per_call_start, fmt.per_call_end)
        tools_parser = p.trigger_rule("tool-calls", p.one_or_more(single + p.space()))
    else:
        tools_parser = calls(fmt.section_start, fmt.section_end)

    if is_always_wrapped(ctx.analysis.content):
        wrapped = optional_wrapped_content(ctx)
        return p.seq_rtl(ctx.reasoning_parser, wrapped, tools_parser, p.end)
    tool_start = fmt.section_start or fmt.per_call_start or "{"
    return p.seq_rtl(ctx.reasoning_parser, lambda: p.optional(p.content(p.until(tool_start))), tools_parser, p.end)


def _call_id_section(p: ChatPegBuilder, tools: ToolsAnalysis, suffix_inside: bool) -> P | None:
    """The optional call id between the function name and its arguments, when the format has one
    (None otherwise). ``suffix_inside``: the id's end marker is part of the optional (tagged
    arguments) rather than required after it (JSON arguments), as upstream builds them."""
    call_id, args_start = tools.call_id, tools.arguments.start
    if not (call_id.pos == CallIdPosition.BETWEEN_FUNC_AND_ARGS and call_id.prefix
            and (call_id.suffix or args_start)):
        return None
    prefix, suffix = call_id.prefix, call_id.suffix
    if not suffix:
        return p.optional(p.seq_rtl(prefix, lambda: p.tool_id(p.until(args_start))))
    if suffix_inside:
        return p.optional(p.seq_rtl(prefix, lambda: p.tool_id(p.until(suffix)), suffix))
    return p.seq_rtl(lambda: p.optional(p.seq_rtl(prefix, lambda: p.tool_id(p.until(suffix)))), suffix)


def _func_parser(p: ChatPegBuilder, tools: ToolsAnalysis, name: str, call_id_section: P, have_call_id: bool,
                 args: P, atomic_peek: P | None) -> P:
    """``analyze_tools::build_func_parser``: one function's call, its opening atomic where possible."""
    function, fmt = tools.function, tools.format
    open_ = p.tool_open(p.seq_rtl(function.name_prefix, lambda: p.tool_name(p.literal(name)),
                                  function.name_suffix))
    matched_atomic = False
    func_parser = p.eps()
    if function.args_separator:
        separator = function.args_separator
        open_ = p.seq_rtl(open_, p.space, lambda: p.literal(separator))

    if function.name_suffix:
        func_parser = p.seq_rtl(open_, call_id_section, p.space, args)
        matched_atomic = True
    elif have_call_id:
        func_parser = p.seq_rtl(lambda: p.atomic(open_ + call_id_section), p.space, args)
        matched_atomic = True
    elif atomic_peek is not None:
        peek = atomic_peek
        func_parser = p.atomic(p.seq_rtl(open_, call_id_section, p.space, peek)) + args
        matched_atomic = True
    else:
        func_parser = p.seq_rtl(open_, call_id_section, p.space, args)

    if function.close:
        close = function.close
        func_parser = p.seq_rtl(func_parser, p.space, lambda: p.tool_close(p.literal(close)))
    elif fmt.per_call_end:
        # close only on seeing the end marker, so that a partial "</" does not close the call early;
        # Laguna's models may write whitespace before it although the template renders none
        end = fmt.per_call_end
        if tools.arguments.tolerate_intertag_whitespace:
            close_peek = p.peek(p.seq_rtl(p.space, lambda: p.literal(end)))
        else:
            close_peek = p.peek(p.literal(end))
        func_parser = func_parser + p.tool_close(close_peek)
    else:
        # an empty close still runs the mapper's end-of-call handling
        func_parser = func_parser + p.tool_close(p.space())
    if not matched_atomic:
        func_parser = p.atomic(func_parser)
    return func_parser


def _tag_with_json(ctx: BuildContext) -> P:
    p, inputs, tools = ctx.p, ctx.inputs, ctx.analysis.tools
    fmt, arguments = tools.format, tools.arguments
    tool_choice = p.choice()
    for tool in foreach_function(inputs.tools):
        function = tool["function"]
        name = function["name"]
        schema = chat_tool_parameters(function)
        call_id_section = p.eps()
        section = _call_id_section(p, tools, suffix_inside=False)
        have_call_id = section is not None
        if section is not None:
            call_id_section = section
        args_parser = p.tool_args(p.schema(p.json(), f"tool-{name}-schema", schema))
        if arguments.start:
            args_parser = p.literal(arguments.start) + args_parser
        if arguments.end:
            args_parser = args_parser + p.literal(arguments.end)
        atomic_peek = p.peek(p.literal(arguments.start)) if arguments.start else None
        func_parser = _func_parser(p, tools, name, call_id_section, have_call_id, args_parser, atomic_peek)
        tool_choice |= p.rule(f"tool-{name}", func_parser)

    tool_calls = p.eps()
    if fmt.per_call_start:
        wrapped_call = p.seq_rtl(fmt.per_call_start, tool_choice, fmt.per_call_end)
        if inputs.parallel_tool_calls:
            tool_calls = p.trigger_rule("tool-call", wrapped_call + p.zero_or_more(p.space() + wrapped_call))
        else:
            tool_calls = p.trigger_rule("tool-call", wrapped_call)
        if fmt.section_start:
            tool_calls = p.trigger_rule("tool-calls", _section(p, fmt.section_start, tool_calls, fmt.section_end,
                                                              space_after_end=False))
    elif inputs.parallel_tool_calls:
        tool_calls = p.trigger_rule("tool-call", p.seq_rtl(
            fmt.section_start, tool_choice, lambda: p.zero_or_more(p.seq_rtl(_CALL_SEPARATOR, tool_choice)),
            fmt.section_end))
    else:
        tool_calls = p.trigger_rule("tool-call", p.seq_rtl(fmt.section_start, tool_choice, fmt.section_end))
    return _with_content_before(ctx, tool_calls)


def _section(p: ChatPegBuilder, start: str, calls: P, end: str, space_after_end: bool) -> P:
    """``literal(start) + space() + calls + space() + (end ? literal(end) [+ space()] : end())``."""
    def closing() -> P:
        if not end:
            return p.end()
        return p.seq_rtl(lambda: p.literal(end), p.space) if space_after_end else p.literal(end)

    return p.seq_rtl(lambda: p.literal(start), p.space, calls, p.space, closing)


def _with_content_before(ctx: BuildContext, tool_calls: P) -> P:
    """Reasoning, then content up to the tool-call marker, then the calls (optional unless required)."""
    p, fmt = ctx.p, ctx.analysis.tools.format
    if ctx.inputs.tool_choice != TOOL_CHOICE_REQUIRED:
        tool_calls = p.optional(tool_calls)
    trigger_marker = fmt.section_start or fmt.per_call_start
    content_before_tools = p.until(trigger_marker) if trigger_marker else p.eps()
    return p.seq_rtl(ctx.reasoning_parser, lambda: p.optional(p.content(content_before_tools)), tool_calls, p.end)


def _tag_with_tagged(ctx: BuildContext) -> P:
    p, inputs, tools = ctx.p, ctx.inputs, ctx.analysis.tools
    fmt, arguments = tools.format, tools.arguments
    until_suffix = p.rule("until-suffix", p.until(arguments.value_suffix))
    tool_choice = p.choice()
    for tool in foreach_function(inputs.tools):
        function = tool["function"]
        name = function["name"]
        required: list[P] = []
        optional: list[P] = []
        for param in foreach_parameter(function):
            arg = _tagged_arg(p, tools, name, param.name, param.schema, until_suffix)
            named_arg = p.rule(f"tool-{name}-arg-{param.name}", arg)
            (required if param.required else optional).append(named_arg)

        # required arguments in definition order, then optional ones in any order
        args_seq = p.required_then_optional(required, optional)
        if arguments.start:
            args_seq = p.literal(arguments.start) + args_seq
        if arguments.end:
            args_seq = args_seq + p.literal(arguments.end)

        call_id_section = p.eps()
        section = _call_id_section(p, tools, suffix_inside=True)
        have_call_id = section is not None
        if section is not None:
            call_id_section = section
        # peek for an argument only when one must follow: with all of them optional the model may
        # write none
        atomic_peek = p.peek(p.literal(arguments.name_prefix)) if arguments.name_prefix and required else None
        func_parser = _func_parser(p, tools, name, call_id_section, have_call_id, args_seq, atomic_peek)
        tool_choice |= p.rule(f"tool-{name}", func_parser)

    tool_calls = p.eps()
    if fmt.per_call_start:
        wrapped_call = p.seq_rtl(fmt.per_call_start, p.space, tool_choice, p.space, fmt.per_call_end)
        if inputs.parallel_tool_calls:
            tool_calls = p.trigger_rule("tool-call", p.seq_rtl(
                wrapped_call, lambda: p.zero_or_more(p.space() + wrapped_call), p.space))
        else:
            tool_calls = p.trigger_rule("tool-call", wrapped_call + p.space())
        if fmt.section_start:
            tool_calls = p.trigger_rule("tool-calls", _section(p, fmt.section_start, tool_calls, fmt.section_end,
                                                              space_after_end=True))
    elif inputs.parallel_tool_calls:
        tool_calls = p.trigger_rule("tool-call", p.seq_rtl(
            fmt.section_start, p.space, tool_choice,
            lambda: p.zero_or_more(p.seq_rtl(_CALL_SEPARATOR, tool_choice)), p.space, fmt.section_end))
    else:
        tool_calls = p.trigger_rule("tool-call", p.seq_rtl(fmt.section_start, p.space, tool_choice, p.space,
                                                           fmt.section_end))
    return _with_content_before(ctx, tool_calls)


def _tagged_arg(p: ChatPegBuilder, tools: ToolsAnalysis, name: str, arg_name: str, schema: Any,
                until_suffix: P) -> P:
    """One argument: ``NAME_PREFIX arg NAME_SUFFIX VALUE_PREFIX value VALUE_SUFFIX``."""
    arguments = tools.arguments
    value_suffix = arguments.value_suffix

    def value() -> P:
        if schema.may_be_string():
            # raw text up to the end marker (the grammar: anything up to and including it)
            return p.ac(p.seq_rtl(lambda: p.tool_arg_string_value(until_suffix),
                                  lambda: p.tool_arg_close(p.literal(value_suffix))), value_suffix)
        return p.seq_rtl(
            lambda: p.tool_arg_json_value(p.schema(p.json(), f"tool-{name}-arg-{arg_name}-schema", schema)),
            lambda: p.tool_arg_close(p.literal(value_suffix)))

    arg_open = lambda: p.tool_arg_open(p.seq_rtl(  # noqa: E731 - an operand, made in GCC's order
        arguments.name_prefix, lambda: p.tool_arg_name(p.literal(arg_name)), arguments.name_suffix))
    return p.tool_arg(p.seq_rtl(arg_open, arguments.value_prefix, value))
