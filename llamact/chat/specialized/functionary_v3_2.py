"""Functionary v3.2 (upstream's ``common_chat_params_init_functionary_v3_2``, parsers/functionary-v3-2.cpp).

Every assistant message names its recipient after ``>>>``: ``>>>all\\nTEXT`` is content for the
user, ``>>>NAME\\n{...json...}`` a call of the tool NAME. The generation prompt ends with ``>>>``, so
the model's output starts with the recipient. Content before a call runs up to the next ``>>>``.
"""

from __future__ import annotations

from ...json_types import Json
from ...peg.builder import P
from ..peg_builder import ChatPegBuilder, build_chat_peg_parser, chat_tool_parameters
from ..render import (
    TOOL_CHOICE_AUTO,
    TOOL_CHOICE_NONE,
    TOOL_CHOICE_REQUIRED,
    TemplateInputs,
    direct_apply,
    generation_prompt,
)
from ..result import FORMAT_PEG_NATIVE, ChatParams, GrammarTrigger
from ..templates import ChatTemplate
from ._common import build_grammar, foreach_function, render_content

_GEN_PREFIX = "<|start_header_id|>assistant<|end_header_id|>\n\n>>>"


def build(tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
    data = ChatParams()
    data.prompt = direct_apply(tmpl, inputs)
    data.generation_prompt = generation_prompt(tmpl, inputs)
    data.format = FORMAT_PEG_NATIVE
    data.preserved_tokens = [">>>all"]
    calls_tools = inputs.has_tools and inputs.tool_choice != TOOL_CHOICE_NONE

    if inputs.has_continuation():
        data.generation_prompt = _GEN_PREFIX + "all\n" + render_content(inputs.continue_msg)
        data.prompt += data.generation_prompt

    def root(p: ChatPegBuilder) -> P:
        # with tools, content stops at the next ">>>" (a call); without, it runs to the end
        content_until_tool = p.seq_rtl(lambda: p.literal("all\n"), lambda: p.content(p.until(">>>")))
        content_until_end = p.seq_rtl(lambda: p.literal("all\n"), lambda: p.content(p.rest()))
        gen = p.literal(_GEN_PREFIX)
        if not calls_tools:
            return p.seq_rtl(gen, content_until_end, p.end)

        tool_choice = p.choice()
        for tool in foreach_function(inputs.tools):
            name = tool["function"]["name"]
            tool_choice |= p.rule(f"tool-{name}", _tool(p, name, chat_tool_parameters(tool["function"])))

        content_only = content_until_end
        tools_only = p.trigger_rule("tools", p.one_or_more(tool_choice))
        content_and_tools = content_until_tool + tools_only
        ret = p.eps()  # upstream declares it first: the node id is taken
        # in every `p.choice({...}) + p.end()` below, GCC makes the right operand (end) first
        if inputs.tool_choice == TOOL_CHOICE_REQUIRED:
            if inputs.parallel_tool_calls:
                ret = p.seq_rtl(lambda: p.choice([content_and_tools, tools_only]), p.end)
            else:
                ret = p.seq_rtl(lambda: p.choice([content_until_tool + tool_choice, tools_only]), p.end)
        elif inputs.parallel_tool_calls:
            ret = p.seq_rtl(lambda: p.choice([content_and_tools, content_only, tools_only]), p.end)
        else:
            content_and_tool = content_until_tool + tool_choice
            ret = p.seq_rtl(lambda: p.choice([content_and_tool, content_only, tool_choice]), p.end)
        return gen + ret

    parser = build_chat_peg_parser(root)
    data.parser = parser
    if calls_tools:
        data.grammar_lazy = inputs.tool_choice == TOOL_CHOICE_AUTO
        data.grammar = build_grammar(parser, data.grammar_lazy)
        # a recipient other than "all" after the prompt's ">>>" is a call
        data.grammar_triggers = [GrammarTrigger("pattern", ">>>(?!all)")]
    return data


def _tool(p: ChatPegBuilder, name: str, schema: Json) -> P:
    """``>>>NAME\\n{json args}`` (the ``>>>`` is the previous message's or the prompt's)."""
    return p.tool(p.seq_rtl(
        lambda: p.tool_open(p.seq_rtl(lambda: p.tool_name(p.literal(name)), lambda: p.literal("\n"))),
        lambda: p.tool_args(p.schema(p.json(), f"tool-{name}-schema", schema))))
