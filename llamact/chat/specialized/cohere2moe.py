"""Cohere2 MoE, a.k.a. North Code (upstream's ``common_chat_params_init_cohere2moe``, parsers/cohere2moe.cpp).

The assistant turn is marker-wrapped throughout::

    <|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>REASONING<|END_THINKING|>
    <|START_TEXT|>CONTENT<|END_TEXT|>            (content)
    <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": {...}}, ...]<|END_ACTION|>
    <|END_OF_TURN_TOKEN|>

Content and tool calls exclude each other. The generation prompt forces ``<|START_THINKING|>``, so
the parser's literal covers only the stable turn prefix and the reasoning rule takes the thinking
markers itself, wherever they came from.
"""

from __future__ import annotations

from ...peg.builder import P
from ..peg_builder import ChatPegBuilder, build_chat_peg_parser
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
from ._common import build_grammar, render_content

TURN_START, TURN_END = "<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>"
CHATBOT, USER, SYSTEM = "<|CHATBOT_TOKEN|>", "<|USER_TOKEN|>", "<|SYSTEM_TOKEN|>"
THINK_START, THINK_END = "<|START_THINKING|>", "<|END_THINKING|>"
TEXT_START, TEXT_END = "<|START_TEXT|>", "<|END_TEXT|>"
ACTION_START, ACTION_END = "<|START_ACTION|>", "<|END_ACTION|>"
RESULT_START, RESULT_END = "<|START_TOOL_RESULT|>", "<|END_TOOL_RESULT|>"
# the stable part of the generation prompt, before the forced <|START_THINKING|>
GEN_PREFIX = TURN_START + CHATBOT


def build(tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
    data = ChatParams()
    data.prompt = direct_apply(tmpl, inputs)
    data.generation_prompt = generation_prompt(tmpl, inputs)
    data.format = FORMAT_PEG_NATIVE
    data.supports_thinking = True
    data.thinking_start_tag = THINK_START
    data.thinking_end_tags = [THINK_END]
    data.preserved_tokens = [TURN_START, TURN_END, CHATBOT, USER, SYSTEM, THINK_START, THINK_END, TEXT_START,
                             TEXT_END, ACTION_START, ACTION_END, RESULT_START, RESULT_END]
    # tool results open with the system token: their delimiter must come before the plain system one
    data.delimiters(
        ("assistant", GEN_PREFIX),
        ("user", TURN_START + USER),
        ("tool", TURN_START + SYSTEM + RESULT_START),
        ("system", TURN_START + SYSTEM),
    )

    has_tools = inputs.has_tools
    has_response_format = inputs.has_response_format
    extract_reasoning = inputs.reasoning_format != "none"
    with_tools = has_tools and inputs.tool_choice != TOOL_CHOICE_NONE

    if inputs.has_continuation():
        msg = inputs.continue_msg
        data.generation_prompt = GEN_PREFIX + THINK_START + msg.reasoning_content
        if inputs.continue_final_message == CONTINUATION_CONTENT:
            data.generation_prompt += THINK_END + TEXT_START + render_content(msg)
        data.prompt += data.generation_prompt

    def root(p: ChatPegBuilder) -> P:
        gen = p.literal(GEN_PREFIX)
        end = p.end()
        thought_end = [THINK_END, TEXT_START, ACTION_START]
        reasoning = p.eps()
        if extract_reasoning:
            reasoning = p.optional(p.seq_rtl(lambda: p.literal(THINK_START),
                                             lambda: p.reasoning(p.until_one_of(thought_end)),
                                             lambda: p.optional(p.literal(THINK_END))))
        else:
            # the whole block, markers included, stays in the content
            reasoning = p.optional(p.content(p.seq_rtl(lambda: p.literal(THINK_START),
                                                       lambda: p.until_one_of(thought_end),
                                                       lambda: p.optional(p.literal(THINK_END)))))
        # `literal(TEXT_START) + content(...) + optional(literal(TEXT_END))`, right operands first
        text_end = p.optional(p.literal(TEXT_END))
        if has_response_format:
            text = p.content(p.schema(p.json(), "response-format-schema", inputs.json_schema))
        else:
            text = p.content(p.until(TEXT_END))
        text_content = p.literal(TEXT_START) + text + text_end
        if not with_tools:
            return p.seq_rtl(gen, reasoning, text_content, lambda: p.optional(p.literal(TURN_END)), end)
        tool_calls = p.standard_json_tools(
            ACTION_START, ACTION_END, inputs.tools, inputs.parallel_tool_calls, force_tool_calls=True,
            name_key="tool_name", args_key="parameters", array_wrapped=True, gen_call_id_key="tool_call_id",
            parameters_order=("tool_call_id", "tool_name", "parameters"))
        answer = tool_calls if inputs.tool_choice == TOOL_CHOICE_REQUIRED else p.choice([tool_calls, text_content])
        return p.seq_rtl(gen, reasoning, answer, lambda: p.optional(p.literal(TURN_END)), end)

    parser = build_chat_peg_parser(root)
    data.parser = parser
    if has_response_format or with_tools:
        data.grammar_lazy = not has_response_format and inputs.tool_choice == TOOL_CHOICE_AUTO
        data.grammar = build_grammar(parser, data.grammar_lazy)
        data.grammar_triggers = [GrammarTrigger("word", ACTION_START)]
    return data
