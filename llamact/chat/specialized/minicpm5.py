"""MiniCPM5 XML tool calls (upstream's ``common_chat_params_init_minicpm5``, parsers/minicpm5.cpp).

ChatML turns; the reply starts at ``<|im_start|>assistant\\n`` with reasoning in
``<think>...</think>``, then content, then tool calls::

    <function name="NAME"><param name="ARG">VALUE</param>...</function>

A value the schema allows to be a string is raw text (or ``<![CDATA[...]]>`` when it holds
``</param>``); other values are JSON. A response format is the bare JSON value.
"""

from __future__ import annotations

from ...grammar.schema import Property
from ...json_types import Json
from ...peg.builder import P
from ..peg_builder import ChatPegBuilder, build_chat_peg_parser
from ..render import TOOL_CHOICE_NONE, TOOL_CHOICE_REQUIRED, TemplateInputs, direct_apply, generation_prompt
from ..result import FORMAT_PEG_NATIVE, ChatParams, GrammarTrigger
from ..templates import ChatTemplate
from ._common import build_grammar, foreach_function, foreach_parameter, render_content

GEN_PREFIX = "<|im_start|>assistant\n"
PARAM_CLOSE = "</param>"


def build(tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
    data = ChatParams()
    data.prompt = direct_apply(tmpl, inputs)
    data.generation_prompt = generation_prompt(tmpl, inputs)
    data.format = FORMAT_PEG_NATIVE
    data.supports_thinking = True
    data.preserved_tokens = ["<function", "<param", "</function>", "</param>", "<think>", "</think>"]
    data.thinking_start_tag = "<think>"
    data.thinking_end_tags = ["</think>"]
    data.delimiters(
        ("assistant", "<|im_start|>assistant"),
        ("tool", "<|im_start|>user\n<tool_response>"),
        ("user", "<|im_start|>user"),
        ("system", "<|im_start|>system"),
    )

    has_tools = inputs.has_tools
    has_response_format = inputs.has_response_format
    extract_reasoning = inputs.reasoning_format != "none"
    use_tools = has_tools and inputs.tool_choice != TOOL_CHOICE_NONE
    include_grammar = has_response_format or use_tools

    if inputs.has_continuation():
        msg = inputs.continue_msg
        data.generation_prompt = GEN_PREFIX + "<think>\n" + msg.reasoning_content
        if inputs.continue_final_message == "content":
            data.generation_prompt += "\n</think>\n\n" + render_content(msg)
        data.prompt += data.generation_prompt

    def root(p: ChatPegBuilder) -> P:
        gen = p.literal(GEN_PREFIX)
        reasoning = p.eps()
        if extract_reasoning:
            reasoning = p.seq_rtl(lambda: "<think>" << p.reasoning(p.until("</think>")) << "</think>", p.space)
        if has_response_format:
            return p.seq_rtl(gen, reasoning, lambda: p.content(p.schema(p.json(), "response-format",
                                                                         inputs.json_schema)))
        if use_tools:
            tool_calls = _tool_calls(p)
            content = p.content(p.until("<function"))
            return p.seq_rtl(gen, reasoning, content, tool_calls, p.end)
        return p.seq_rtl(gen, reasoning, lambda: p.content(p.rest()), p.end)

    def _tool_calls(p: ChatPegBuilder) -> P:
        # CDATA lets a value hold text that would close the tag (e.g. </param>): the inner text only
        string_value = p.choice([
            p.seq_rtl(lambda: p.literal("<![CDATA["),
                      lambda: p.ac(p.seq_rtl(lambda: p.tool_arg_string_value(p.until("]]>")),
                                             lambda: p.literal("]]>")), "]]>"),
                      lambda: p.tool_arg_close(p.literal(PARAM_CLOSE))),
            p.seq_rtl(lambda: p.negate(p.literal("<![CDATA[")),
                      lambda: p.ac(p.seq_rtl(lambda: p.tool_arg_string_value(p.until(PARAM_CLOSE)),
                                             lambda: p.tool_arg_close(p.literal(PARAM_CLOSE))), PARAM_CLOSE)),
        ])
        tool_choice = p.choice()
        for tool in foreach_function(inputs.tools):
            function = tool["function"]
            tool_choice |= p.rule(f"tool-{function['name']}", _tool(p, function, string_value))
        max_calls = -1 if inputs.parallel_tool_calls else 1
        return p.trigger_rule("tool-call", p.repeat(tool_choice + p.space(), 1, max_calls))

    parser = build_chat_peg_parser(root)
    data.parser = parser
    if include_grammar:
        data.grammar_lazy = not (has_response_format or (has_tools and inputs.tool_choice == TOOL_CHOICE_REQUIRED))
        data.grammar = build_grammar(parser, data.grammar_lazy)
        data.grammar_triggers = [GrammarTrigger("word", "<function")]
    return data


def _tool_arg(p: ChatPegBuilder, name: str, prop: Property, string_value: P) -> P:
    """``<param name="ARG">VALUE</param>``: raw (or CDATA) text when the schema allows a string, else JSON."""
    value = p.eps()  # upstream declares it first: the node id is taken
    if prop.schema.may_be_string():
        value = string_value
    else:
        rule_name = f"tool-{name}-arg-{prop.name}-schema"
        value = p.seq_rtl(lambda: p.tool_arg_json_value(p.schema(p.json(), rule_name, prop.schema)),
                          lambda: p.tool_arg_close(p.literal(PARAM_CLOSE)))
    arg_open = p.tool_arg_open(p.seq_rtl(lambda: p.literal('<param name="'),
                                         lambda: p.tool_arg_name(p.literal(prop.name)), lambda: p.literal('">')))
    return p.tool_arg(arg_open + value)


def _tool(p: ChatPegBuilder, function: Json, string_value: P) -> P:
    """``<function name="NAME">`` arguments in any order ``</function>``."""
    name = function["name"]
    arg_rules = [_tool_arg(p, name, prop, string_value) for prop in foreach_parameter(function)]
    args = p.eps()
    if arg_rules:
        args = p.zero_or_more(p.seq_rtl(lambda: p.choice(arg_rules), p.space))
    # `open << args << close`: C++17 evaluates shift operands left to right
    open_ = p.tool_open(p.seq_rtl(lambda: p.literal('<function name="'), lambda: p.tool_name(p.literal(name)),
                                  lambda: p.literal('">')))
    return p.tool(open_ << p.tool_args(args) << p.tool_close(p.literal("</function>")))
