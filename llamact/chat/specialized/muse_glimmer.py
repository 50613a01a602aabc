"""Muse Glimmer (upstream's ``common_chat_params_init_muse_glimmer``, parsers/muse-glimmer.cpp).

An assistant turn is one or more messages ``<|start|>assistant to=RECIPIENT<|message|>TEXT END``:
the thought goes ``to=self`` and ends with ``<|eom|>``, the answer ``to=user`` and ends with
``<|eot|>``. A tool call is a message to the tool, with ATEM markup::

    <|start|>assistant to=NAME<|message|><atem:function_calls>
    <atem:invoke name="NAME"><atem:parameter name="ARG">VALUE</atem:parameter>...</atem:invoke>
    </atem:function_calls>

Values that may be strings are raw text, others JSON. The generation prompt is just
``<|start|>assistant``: the model writes its own recipient.
"""

from __future__ import annotations

from ...grammar.schema import Property
from ...peg.builder import P
from ..peg_builder import ChatPegBuilder, build_chat_peg_parser
from ..render import (
    CONTINUATION_CONTENT,
    TOOL_CHOICE_NONE,
    TOOL_CHOICE_REQUIRED,
    TemplateInputs,
    direct_apply,
)
from ..result import FORMAT_PEG_NATIVE, ChatParams, GrammarTrigger
from ..templates import ChatTemplate
from ._common import build_grammar, foreach_function, foreach_parameter, render_content

_GEN_PREFIX = "<|start|>assistant"
_PARAM_CLOSE = "</atem:parameter>"
# a message to anyone but self or user is a tool call
_TRIGGER = "(?:^|<\\|start\\|>assistant)( to=(?!self<\\|message\\|>)(?!user<\\|message\\|>)[^<]*?<\\|message\\|>)"


def build(tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
    data = ChatParams()
    data.prompt = direct_apply(tmpl, inputs)
    data.generation_prompt = _GEN_PREFIX
    data.format = FORMAT_PEG_NATIVE
    data.supports_thinking = True
    data.preserved_tokens = [
        "<|start|>", "<|message|>", "<|eom|>", "<|eot|>",
        "<atem:function_calls>", "<atem:invoke", "<atem:parameter", _PARAM_CLOSE,
        "</atem:invoke>", "</atem:function_calls>",
    ]
    data.delimiters(
        ("assistant", "<|start|>assistant"),
        ("user", "<|start|>user"),
        ("system", "<|start|>system"),
        ("tool", "<|start|>tool"),
    )

    if inputs.has_continuation():
        msg = inputs.continue_msg
        data.generation_prompt = "<|start|>assistant to=self<|message|>" + msg.reasoning_content
        if inputs.continue_final_message == CONTINUATION_CONTENT:
            data.generation_prompt += "<|eom|><|start|>assistant to=user<|message|>" + render_content(msg)
        data.prompt += data.generation_prompt

    extract_reasoning = inputs.reasoning_format != "none"
    # the grammar constrains whenever tools are offered
    include_grammar = inputs.has_tools and inputs.tool_choice != TOOL_CHOICE_NONE

    def root(p: ChatPegBuilder) -> P:
        start = p.rule("start", p.literal(_GEN_PREFIX))
        if not extract_reasoning and not include_grammar:
            return start + p.content(p.rest())
        tag = p.reasoning if extract_reasoning else p.content
        p.rule("analysis", p.seq_rtl(lambda: p.literal(" to=self<|message|>"), lambda: tag(p.until("<|eom|>")),
                                     lambda: p.literal("<|eom|>")))
        analysis = p.ref("analysis")
        recipient = p.optional(p.literal(" to=user"))
        final_msg = p.rule("final", p.seq_rtl(recipient, lambda: p.literal("<|message|>"),
                                              lambda: p.content(p.until_one_of(["<|eot|>", "<|eom|>"]))))
        if include_grammar:
            tool_calls = _tool_calls(p, start)
            if inputs.tool_choice == TOOL_CHOICE_REQUIRED:
                return p.seq_rtl(lambda: p.zero_or_more(start + analysis), start, tool_calls)
            trailing_calls = p.optional(p.seq_rtl(lambda: p.literal("<|eom|>"), start, tool_calls))
            return p.seq_rtl(lambda: p.zero_or_more(start + analysis), start,
                             lambda: tool_calls | (final_msg + trailing_calls))
        return p.seq_rtl(lambda: p.zero_or_more(start + analysis), start, final_msg)

    def _tool_calls(p: ChatPegBuilder, start: P) -> P:
        string_value = p.ac(p.seq_rtl(lambda: p.tool_arg_string_value(p.until(_PARAM_CLOSE)),
                                      lambda: p.tool_arg_close(p.literal(_PARAM_CLOSE))), _PARAM_CLOSE)
        tool_choice = p.choice()
        for tool in foreach_function(inputs.tools):
            name = tool["function"]["name"]
            arg_rules = [_arg(p, name, prop, string_value) for prop in foreach_parameter(tool["function"])]
            tool_choice |= p.rule(f"tool-{name}", _invoke(p, name, arg_rules))
        if inputs.parallel_tool_calls:
            more = p.zero_or_more(p.seq_rtl(lambda: p.literal("<|eom|>"), start, tool_choice))
            return p.trigger_rule("tool-call", tool_choice + more)
        return p.trigger_rule("tool-call", tool_choice)

    parser = build_chat_peg_parser(root)
    data.parser = parser
    if include_grammar:
        data.grammar_lazy = inputs.tool_choice != TOOL_CHOICE_REQUIRED
        data.grammar = build_grammar(parser, data.grammar_lazy)
        data.grammar_triggers = [GrammarTrigger("pattern", _TRIGGER)]
    return data


def _arg(p: ChatPegBuilder, name: str, prop: Property, string_value: P) -> P:
    """``<atem:parameter name="ARG">VALUE</atem:parameter>``: raw text when the value may be a string."""
    value = p.eps()  # upstream declares it first: the node id is taken
    if prop.schema.may_be_string():
        value = string_value
    else:
        value = p.seq_rtl(
            lambda: p.tool_arg_json_value(p.schema(p.json(), f"tool-{name}-arg-{prop.name}-schema", prop.schema)),
            lambda: p.tool_arg_close(p.literal(_PARAM_CLOSE)))
    arg_open = p.tool_arg_open(p.seq_rtl(lambda: p.literal('<atem:parameter name="'),
                                         lambda: p.tool_arg_name(p.literal(prop.name)), lambda: p.literal('">')))
    return p.tool_arg(arg_open + value)


def _invoke(p: ChatPegBuilder, name: str, arg_rules: list[P]) -> P:
    """`` to=NAME<|message|><atem:function_calls><atem:invoke name="NAME">ARGS</atem:invoke></atem:function_calls>``
    (the recipient is taken as written)."""
    args = p.eps()
    if arg_rules:
        args = p.zero_or_more(p.seq_rtl(lambda: p.choice(arg_rules), p.space))
    # upstream's `tool_open(...) << tool_args(args) << tool_close(...)`: << goes left to right
    tool_open = p.tool_open(p.seq_rtl(
        lambda: p.literal(" to="), lambda: p.until("<|message|>"),
        lambda: p.literal("<|message|><atem:function_calls>"), p.space,
        lambda: p.literal('<atem:invoke name="'), lambda: p.tool_name(p.literal(name)),
        lambda: p.literal('">'), p.space))
    opened = tool_open << p.tool_args(args)
    tool_close = p.tool_close(p.seq_rtl(lambda: p.literal("</atem:invoke>"), p.space,
                                        lambda: p.literal("</atem:function_calls>")))
    return p.tool(opened << tool_close)
