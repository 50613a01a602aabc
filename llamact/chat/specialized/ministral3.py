"""Ministral 3 and Devstral (upstream's ``common_chat_params_init_ministral_3``, parsers/ministral3.cpp).

The model thinks in ``[THINK]...[/THINK]``, answers, and calls tools as
``[TOOL_CALLS]NAME[ARGS]{...json...}`` (one ``[TOOL_CALLS]`` per call). A response format is JSON
in a code fence (```` ```json ... ``` ````), which is what the model writes. The template reads
system and assistant content as typed blocks, reasoning as a ``{"type": "thinking"}`` block, so
those messages are rebuilt that way before rendering.
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


def _as_blocks(messages: Json) -> Json:
    """System and assistant messages with their reasoning and content as typed blocks (copies)."""
    adjusted = []
    for msg in messages:
        if not isinstance(msg, dict) or msg.get("role", "") not in ("system", "assistant"):
            adjusted.append(msg)
            continue
        blocks: list[Json] = []
        reasoning = msg.get("reasoning_content")
        if isinstance(reasoning, str):
            blocks.append({"type": "thinking", "thinking": reasoning})
        content = msg.get("content")
        if isinstance(content, str):
            blocks.append({"type": "text", "text": content})
        elif isinstance(content, list):
            blocks.extend(content)
        out = {**msg, "content": blocks}
        out.pop("reasoning_content", None)
        adjusted.append(out)
    return adjusted


def build(tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
    data = ChatParams()
    messages = _as_blocks(inputs.messages)
    has_tools = inputs.has_tools
    has_response_format = inputs.has_response_format
    extract_reasoning = inputs.reasoning_format != "none"
    calls_tools = has_tools and inputs.tool_choice != TOOL_CHOICE_NONE

    data.supports_thinking = True
    data.thinking_start_tag = "[THINK]"
    data.thinking_end_tags = ["[/THINK]"]
    data.prompt = direct_apply(tmpl, inputs, messages)
    data.generation_prompt = generation_prompt(tmpl, inputs, messages)
    data.format = FORMAT_PEG_NATIVE
    data.preserved_tokens = ["[THINK]", "[/THINK]", "[TOOL_CALLS]", "[ARGS]"]

    if inputs.has_continuation():
        msg = inputs.continue_msg
        data.generation_prompt = "[THINK]" + msg.reasoning_content
        if inputs.continue_final_message == CONTINUATION_CONTENT:
            data.generation_prompt += "[/THINK]" + render_content(msg)
        data.prompt += data.generation_prompt

    def root(p: ChatPegBuilder) -> P:
        gen = p.eps()
        reasoning = (p.optional(p.seq_rtl("[THINK]", lambda: p.reasoning(p.until("[/THINK]")), "[/THINK]"))
                     if extract_reasoning else p.eps())
        if has_response_format:
            # the model fences its JSON
            return gen + (reasoning << "```json"
                          << p.content(p.schema(p.json(), "response-format", inputs.json_schema)) << "```")
        if calls_tools:
            tool_choice = p.choice()
            for tool in foreach_function(inputs.tools):
                function = tool["function"]
                name = function["name"]
                schema = chat_tool_parameters(function)
                args = p.tool_args(p.schema(p.json(), f"tool-{name}-schema", schema))
                tool_open = p.tool_open(p.tool_name(p.literal(name)) + "[ARGS]")
                tool_choice |= p.rule(f"tool-{name}", tool_open + args)
            min_calls = 1 if inputs.tool_choice == TOOL_CHOICE_REQUIRED else 0
            max_calls = -1 if inputs.parallel_tool_calls else 1
            tool_calls = p.trigger_rule("tool-call", p.repeat("[TOOL_CALLS]" + tool_choice, min_calls, max_calls))
            return gen + (reasoning << p.content(p.until("[TOOL_CALLS]")) << tool_calls)
        return gen + (reasoning << p.content(p.rest()))

    parser = build_chat_peg_parser(root)
    data.parser = parser
    # content only: no grammar
    if has_response_format or calls_tools:
        data.grammar_lazy = has_tools and inputs.tool_choice == TOOL_CHOICE_AUTO
        data.grammar = build_grammar(parser, data.grammar_lazy)
        data.grammar_triggers = [GrammarTrigger("word", "[TOOL_CALLS]")]
    return data
