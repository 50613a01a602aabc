"""Ling 3.0 / Bailing V3 (upstream's ``common_chat_params_init_ling3``, parsers/ling3.cpp).

Turns are ``<role>X</role>`` sections ending in ``<|role_end|>``; an assistant turn is
``[<think>...</think>] [content] {<tool_call>NAME<arg_key>K</arg_key>\\n<arg_value>V</arg_value>...</tool_call>}``.
Schema-declared strings are raw text, other values JSON. The generation prompt ends with
``<role>ASSISTANT</role>\\n<think>`` (thinking on), so the model never writes the opening tag and may
start a tool call before any ``</think>``: the thought then ends at ``</think>`` or ``<tool_call>``.
With thinking off the template pre-closes the block and the model writes bare content.
"""

from __future__ import annotations

from ...peg.builder import P
from ..peg_builder import ChatPegBuilder, build_chat_peg_parser
from ..render import (
    CONTINUATION_CONTENT,
    TOOL_CHOICE_NONE,
    TOOL_CHOICE_REQUIRED,
    TemplateInputs,
    direct_apply,
    generation_prompt,
)
from ..result import FORMAT_PEG_NATIVE, ChatParams, GrammarTrigger
from ..templates import ChatTemplate
from ._common import build_grammar, foreach_function, foreach_parameter, render_content

ROLE = "<role>ASSISTANT</role>"
THINK_START, THINK_END = "<think>", "</think>"
CALL_START, CALL_END = "<tool_call>", "</tool_call>"
ARG_KEY, ARG_KEY_END = "<arg_key>", "</arg_key>"
ARG_VAL, ARG_VAL_END = "<arg_value>", "</arg_value>"
ROLE_END = "<|role_end|>"


def _think_open(data: ChatParams, inputs: TemplateInputs) -> bool:
    """Whether the model's output starts inside a thought (the prompt left ``<think>`` open)."""
    if inputs.has_continuation():
        return inputs.continue_final_message != CONTINUATION_CONTENT
    last_open = data.generation_prompt.rfind(THINK_START)
    last_close = data.generation_prompt.rfind(THINK_END)
    return last_open >= 0 and (last_close < 0 or last_open > last_close)


def build(tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
    data = ChatParams()
    data.prompt = direct_apply(tmpl, inputs)
    data.generation_prompt = generation_prompt(tmpl, inputs)
    data.format = FORMAT_PEG_NATIVE
    data.supports_thinking = True
    data.preserved_tokens = [THINK_START, THINK_END, CALL_START, CALL_END, ARG_KEY, ARG_KEY_END, ARG_VAL,
                             ARG_VAL_END, ROLE_END]
    data.thinking_start_tag = THINK_START
    # a call may come before the thought is closed
    data.thinking_end_tags = [THINK_END, CALL_START]
    data.delimiters(
        ("assistant", "<role>ASSISTANT</role>"),
        ("user", "<role>HUMAN</role>"),
        ("tool", "<role>OBSERVATION</role>"),
        ("system", "<role>SYSTEM</role>"),
    )
    # the model may spell the end-of-turn token out as text, which does not stop generation
    data.additional_stops = [ROLE_END]

    if inputs.has_continuation():
        msg = inputs.continue_msg
        data.generation_prompt = ROLE + "\n" + THINK_START + msg.reasoning_content
        if inputs.continue_final_message == CONTINUATION_CONTENT:
            data.generation_prompt += THINK_END + render_content(msg)
        data.prompt += data.generation_prompt

    think_open = _think_open(data, inputs)
    has_tools = inputs.has_tools
    extract_reasoning = inputs.reasoning_format != "none"
    with_tools = has_tools and inputs.tool_choice != TOOL_CHOICE_NONE

    def root(p: ChatPegBuilder) -> P:
        end = p.end()
        # the parse input is generation prompt + output: the assistant opener is consumed here
        opener = p.optional(p.seq_rtl(lambda: p.literal(ROLE), lambda: p.optional(p.space())))
        # an open thought also ends at a tool call, so a missing </think> does not swallow it
        body_end = p.until_one_of([THINK_END, CALL_START] if think_open else [THINK_END])
        think_body = p.reasoning(body_end) if extract_reasoning else p.content(body_end)
        reasoning = p.optional(p.seq_rtl(lambda: p.optional(p.literal(THINK_START)), think_body,
                                         lambda: p.optional(p.literal(THINK_END))))
        content = p.optional(p.content(p.until_one_of([CALL_START])))
        # a trailing end-of-turn token is consumed instead of leaking into content
        tail = p.seq_rtl(lambda: p.optional(p.content(p.until(ROLE_END))),
                         lambda: p.optional(p.literal(ROLE_END)))
        if not with_tools:
            return opener + reasoning + tail + end
        tools_section = _tools_section(p)
        tools = tools_section if inputs.tool_choice == TOOL_CHOICE_REQUIRED else p.optional(tools_section)
        return opener + reasoning + content + tools + tail + end

    def _tools_section(p: ChatPegBuilder) -> P:
        tool_choices = p.choice()
        arg_close = p.tool_arg_close(p.literal(ARG_VAL_END))
        arg_string = p.rule("ling3-arg-string", p.tool_arg_string_value(p.until(ARG_VAL_END)) + arg_close)
        for tool in foreach_function(inputs.tools):
            function = tool["function"]
            name = function["name"]
            required_args: list[P] = []
            optional_args: list[P] = []
            for param in foreach_parameter(function):
                rule_name = f"ling3-arg-{name}-{param.name}"
                types = param.schema.value_types()
                arg_value = p.eps()  # upstream declares it first: the node id is taken
                if "string" not in types:
                    arg_value = p.tool_arg_json_value(p.schema(p.json(), rule_name + "-schema", param.schema)) \
                        + arg_close
                elif types == {"string"}:
                    arg_value = arg_string
                else:
                    # the parser tries the JSON alternative first, to type the value
                    json_value = p.atomic(
                        p.tool_arg_json_value(p.schema(p.json(), rule_name + "-schema", param.schema)) + arg_close)
                    arg_value = p.gbnf(json_value | arg_string, "ling3-arg-string")
                # upstream's `optional(space()) + tool_arg(tool_arg_open(key) + optional(space()) + literal(ARG_VAL)
                # + arg_value)`: GCC makes the right operands first (the model writes whitespace between
                # arguments, the template history does not)
                val_open = p.literal(ARG_VAL)
                gap = p.optional(p.space())
                key_close = p.literal(ARG_KEY_END)
                key_name = p.tool_arg_name(p.literal(param.name))
                key = p.literal(ARG_KEY) + key_name + key_close
                arg_body = p.tool_arg(p.tool_arg_open(key) + gap + val_open + arg_value)
                lead = p.optional(p.space())
                arg = p.rule(rule_name, lead + arg_body)
                (required_args if param.required else optional_args).append(arg)
            # required arguments in any order, then optional ones in any order and number
            args = p.permute(f"ling3-{name}-args", required_args)
            if optional_args:
                args = args + p.zero_or_more(p.choice(optional_args))
            # `tool_open(...) + tool_args(args) + tool_close(...)`, right operands first
            close = p.tool_close(p.seq_rtl(lambda: p.optional(p.space()), lambda: p.literal(CALL_END)))
            tool_args = p.tool_args(args)
            name_gap = p.optional(p.space())
            tool_name = p.tool_name(p.literal(name))
            open_ = p.tool_open(p.literal(CALL_START) + tool_name + name_gap)
            call = p.tool(open_ + tool_args + close)
            tool_choices |= p.rule(f"ling3-tool-{name}", call)

        calls = tool_choices
        if inputs.parallel_tool_calls:
            calls = tool_choices + p.zero_or_more(p.space() + tool_choices)
        return p.trigger_rule("ling3-tool-call", p.seq_rtl(
            calls, p.space, lambda: p.optional(p.content(p.until(ROLE_END))), lambda: p.optional(p.literal(ROLE_END))))

    parser = build_chat_peg_parser(root)
    data.parser = parser
    if with_tools:
        data.grammar_lazy = inputs.tool_choice != TOOL_CHOICE_REQUIRED
        data.grammar = build_grammar(parser, data.grammar_lazy)
        data.grammar_triggers = [GrammarTrigger("word", CALL_START)]
    return data
