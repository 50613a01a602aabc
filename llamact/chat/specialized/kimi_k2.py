"""Kimi K2 (Instruct and Thinking) (upstream's ``common_chat_params_init_kimi_k2``, parsers/kimi-k2.cpp).

The model may think in ``<think>...</think>``, then answer, then call tools in a section::

    <|tool_calls_section_begin|>
    <|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...json...}<|tool_call_end|>
    <|tool_calls_section_end|>

The call id is ``functions.NAME:INDEX``. The model strays from this often (a call right after an
unclosed thought, a missing section marker or call end), so the parser tolerates those.
"""

from __future__ import annotations

from ...json_types import Json
from ...peg.builder import P
from ..peg_builder import ChatPegBuilder, build_chat_peg_parser, chat_tool_parameters
from ..render import (
    CONTINUATION_CONTENT,
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

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARGS_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
THINK_START = "<think>"
THINK_END = "</think>"
GEN_PROMPT = "<|im_assistant|>assistant<|im_middle|>"


def build(tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
    data = ChatParams()
    data.prompt = direct_apply(tmpl, inputs)
    data.generation_prompt = generation_prompt(tmpl, inputs)
    data.format = FORMAT_PEG_NATIVE
    data.supports_thinking = True
    data.preserved_tokens = [SECTION_BEGIN, SECTION_END, CALL_BEGIN, ARGS_BEGIN, CALL_END, THINK_START, THINK_END]
    data.thinking_start_tag = THINK_START
    data.thinking_end_tags = [THINK_END]
    extract_reasoning = inputs.reasoning_format != "none"
    calls_tools = inputs.has_tools and inputs.tool_choice != TOOL_CHOICE_NONE

    if inputs.has_continuation():
        msg = inputs.continue_msg
        data.generation_prompt = GEN_PROMPT + THINK_START + msg.reasoning_content
        if inputs.continue_final_message == CONTINUATION_CONTENT:
            data.generation_prompt += THINK_END + render_content(msg)
        data.prompt += data.generation_prompt

    def root(p: ChatPegBuilder) -> P:
        end = p.end()
        # a thought may also end where a tool call section or call begins, unclosed
        reasoning = p.optional(p.seq_rtl(
            THINK_START, lambda: p.reasoning(p.until_one_of([THINK_END, SECTION_BEGIN, CALL_BEGIN])),
            lambda: p.optional(p.literal(THINK_END)))) if extract_reasoning else p.eps()
        gen = p.literal(GEN_PROMPT)
        if not calls_tools:
            return p.seq_rtl(gen, reasoning, lambda: p.content(p.rest()), end)

        tool_choice = p.choice()
        for tool in foreach_function(inputs.tools):
            name = tool["function"]["name"]
            tool_choice |= p.rule(f"tool-{name}", _tool(p, name, chat_tool_parameters(tool["function"])))

        min_calls = 1 if inputs.tool_choice == TOOL_CHOICE_REQUIRED else 0
        max_calls = -1 if inputs.parallel_tool_calls else 1
        def calls() -> P:
            # the section markers are optional: the model sometimes leaves them out
            repeated = p.seq_rtl(lambda: p.repeat(CALL_BEGIN + tool_choice, min_calls, max_calls),
                                 lambda: p.optional(p.literal(SECTION_END)))
            return p.trigger_rule("tool-call", repeated)

        tool_calls = p.rule("tool-calls", p.seq_rtl(lambda: p.optional(p.literal(SECTION_BEGIN)), calls))
        content_before_tools = p.content(p.until_one_of([SECTION_BEGIN, CALL_BEGIN]))
        return p.seq_rtl(gen, reasoning, content_before_tools, tool_calls, end)

    parser = build_chat_peg_parser(root)
    data.parser = parser
    if calls_tools:
        data.grammar_lazy = inputs.tool_choice == TOOL_CHOICE_AUTO
        data.grammar = build_grammar(parser, data.grammar_lazy)
        data.grammar_triggers = [GrammarTrigger("word", CALL_BEGIN)]
    return data


def _tool(p: ChatPegBuilder, name: str, schema: Json) -> P:
    """``functions.NAME:INDEX<|tool_call_argument_begin|>{json}[<|tool_call_end|>]``; the id is the whole
    ``functions.NAME:INDEX``."""
    tool_id = p.tool_id(p.seq_rtl(lambda: p.literal("functions."), lambda: p.tool_name(p.literal(name)),
                                  lambda: p.literal(":"), lambda: p.chars("[0-9]", 1, -1)))
    return p.tool(p.seq_rtl(
        lambda: p.tool_open(tool_id + p.literal(ARGS_BEGIN)),
        lambda: p.tool_args(p.schema(p.json(), f"tool-{name}-schema", schema)),
        lambda: p.tool_close(p.optional(p.literal(CALL_END)))))
