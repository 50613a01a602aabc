"""LFM2 (upstream's ``common_chat_params_init_lfm2`` with ``tool_list_tokens = true``, parsers/lfm2.cpp).

ChatML turns; the assistant may think in ``<think>...</think>`` (when the template knows the tag),
then writes content, then tool calls, always wrapped:
``<|tool_call_start|>[name(arg="value", n=1), other(...)]<|tool_call_end|>`` -- Python-style calls
whose values may also be JSON's true/false/null. LFM2's system turn lists the tools between
``<|tool_list_start|>`` and ``<|tool_list_end|>``, which are preserved tokens; LFM2.5 (lfm2_5.py)
uses the same builder without them. The templates read a message's reasoning from ``thinking``.
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
from ._common import build_grammar, render_content

__all__ = ["build", "build_lfm2"]

TOOL_CALL_START, TOOL_CALL_END = "<|tool_call_start|>", "<|tool_call_end|>"
TOOL_LIST_START, TOOL_LIST_END = "<|tool_list_start|>", "<|tool_list_end|>"
THINK_START, THINK_END = "<think>", "</think>"
GEN_PROMPT = "<|im_start|>assistant\n"


def _with_thinking(messages: list[dict[str, object]]) -> list[dict[str, object]]:
    """The messages with each string ``reasoning_content`` copied to ``thinking`` (what the templates read)."""
    out = []
    for msg in messages:
        if isinstance(msg.get("reasoning_content"), str):
            msg = {**msg, "thinking": msg["reasoning_content"]}
        out.append(msg)
    return out


def build_lfm2(tmpl: ChatTemplate, inputs: TemplateInputs, tool_list_tokens: bool) -> ChatParams:
    """The LFM2 / LFM2.5 params; ``tool_list_tokens`` preserves LFM2's tool-list markers."""
    messages = _with_thinking(inputs.messages)
    data = ChatParams()
    data.prompt = direct_apply(tmpl, inputs, messages)
    data.generation_prompt = generation_prompt(tmpl, inputs, messages)
    data.format = FORMAT_PEG_NATIVE
    data.supports_thinking = True
    data.preserved_tokens = [TOOL_CALL_START, TOOL_CALL_END, THINK_START, THINK_END]
    if tool_list_tokens:
        data.preserved_tokens += [TOOL_LIST_START, TOOL_LIST_END]
    data.thinking_start_tag = THINK_START
    data.thinking_end_tags = [THINK_END]

    has_tools = inputs.has_tools
    # any object, even an empty one (unlike most builders)
    has_response_format = isinstance(inputs.json_schema, dict)
    extract_reasoning = inputs.reasoning_format != "none" and THINK_START in tmpl.source
    with_tools = has_tools and inputs.tool_choice != TOOL_CHOICE_NONE

    if inputs.has_continuation():
        msg = inputs.continue_msg
        data.generation_prompt = GEN_PROMPT + THINK_START + msg.reasoning_content
        if inputs.continue_final_message == CONTINUATION_CONTENT:
            data.generation_prompt += THINK_END + render_content(msg)
        data.prompt += data.generation_prompt

    def root(p: ChatPegBuilder) -> P:
        gen = p.literal(GEN_PROMPT)
        end = p.end()
        reasoning = p.eps()
        if extract_reasoning:
            reasoning = p.optional(p.seq_rtl(THINK_START, lambda: p.reasoning(p.until(THINK_END)), THINK_END))
        if not with_tools:
            if has_response_format:
                response_format = p.content(p.schema(p.json(), "response-format-schema", inputs.json_schema))
                return gen + reasoning + response_format + end
            return p.seq_rtl(gen, reasoning, lambda: p.content(p.rest()), end)
        calls = p.seq_rtl(lambda: p.literal(TOOL_CALL_START),
                          lambda: p.python_style_tool_calls(inputs.tools, inputs.parallel_tool_calls,
                                                            allow_json_literals=True),
                          lambda: p.literal(TOOL_CALL_END))
        tool_calls = p.rule("tool-calls", p.trigger_rule("tool-call", calls))
        content = p.content(p.until(TOOL_CALL_START))
        return gen + reasoning + content + tool_calls + end

    parser = build_chat_peg_parser(root)
    data.parser = parser
    if has_response_format or with_tools:
        data.grammar_lazy = not (has_response_format or (has_tools and inputs.tool_choice == TOOL_CHOICE_REQUIRED))
        data.grammar = build_grammar(parser, data.grammar_lazy)
        data.grammar_triggers = [GrammarTrigger("word", TOOL_CALL_START)]
    return data


def build(tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
    return build_lfm2(tmpl, inputs, tool_list_tokens=True)
