"""GPT-OSS's Harmony format (upstream's ``common_chat_params_init_gpt_oss``, parsers/gpt-oss.cpp).

Every assistant turn is a run of channel messages::

    <|start|>assistant<|channel|>analysis<|message|>THOUGHT<|end|>
    <|start|>assistant<|channel|>commentary<|message|>PREAMBLE<|end|>
    <|start|>assistant<|channel|>final<|message|>ANSWER

A tool call names its recipient either in the role header
(``<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>ARGS``) or in the
channel header (``<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS``).
A response format is a final message, optionally constrained (``<|channel|>final <|constrain|>json``).
The template reads a past turn's reasoning from ``thinking``, so ``reasoning_content`` is copied
there (and the content of a tool-calling turn with reasoning dropped, as the template expects).
"""

from __future__ import annotations

from ...json_types import Json
from ...peg.builder import P
from ..peg_builder import ChatPegBuilder, build_chat_peg_parser, chat_tool_parameters
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
from ._common import build_grammar, foreach_function, render_content

_RETURN_TOKEN = "<|return|>"
_END_TOKEN = "<|end|>"

_TRIGGER_PATTERNS = (
    "^\\s+to$",
    "^<\\|channel\\|>(?:commentary|analysis)\\s+to=functions$",
    "<\\|start\\|>assistant(\\s+to)",
    "<\\|start\\|>assistant(<\\|channel\\|>(?:commentary|analysis)\\s+to)",
)


def _with_thinking(messages: Json) -> Json:
    """The messages with ``reasoning_content`` copied to ``thinking`` (copies; the inputs stay as they are)."""
    adjusted = []
    for msg in messages:
        if isinstance(msg, dict) and isinstance(msg.get("reasoning_content"), str):
            msg = {**msg, "thinking": msg["reasoning_content"]}
            calls = msg.get("tool_calls")
            if isinstance(calls, list) and calls:
                msg.pop("content", None)
        adjusted.append(msg)
    return adjusted


def build(tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
    data = ChatParams()
    messages = _with_thinking(inputs.messages)
    prompt = direct_apply(tmpl, inputs, messages)
    # A rendered history ends its last turn with <|return|>, but a prompt the model continues from
    # must show <|end|> there (llama.cpp issue 15417).
    if inputs.is_inference and not inputs.add_generation_prompt:
        pos = prompt.rfind(_RETURN_TOKEN)
        if pos >= 0:
            prompt = prompt[:pos] + _END_TOKEN + prompt[pos + len(_RETURN_TOKEN):]
    data.prompt = prompt
    data.generation_prompt = generation_prompt(tmpl, inputs, messages)
    data.delimiters(
        ("assistant", "<|start|>assistant"),
        ("user", "<|start|>user"),
        ("system", "<|start|>developer"),
        ("system", "<|start|>system"),
        ("tool", "<|start|>functions"),
    )
    data.format = FORMAT_PEG_NATIVE
    data.supports_thinking = True
    data.thinking_start_tag = "<|channel|>analysis<|message|>"
    data.thinking_end_tags = [_END_TOKEN]
    # needed to parse the channels, so kept even without tools
    data.preserved_tokens = ["<|channel|>", "<|constrain|>", "<|message|>", "<|start|>", _END_TOKEN]

    if inputs.has_continuation():
        msg = inputs.continue_msg
        data.generation_prompt = "<|start|>assistant<|channel|>analysis<|message|>" + msg.reasoning_content
        if inputs.continue_final_message == CONTINUATION_CONTENT:
            data.generation_prompt += "<|end|><|start|>assistant<|channel|>final<|message|>" + render_content(msg)
        data.prompt += data.generation_prompt

    has_tools = inputs.has_tools
    has_response_format = isinstance(inputs.json_schema, dict)  # upstream: any object, even {}
    calls_tools = has_tools and inputs.tool_choice != TOOL_CHOICE_NONE
    include_grammar = has_response_format or calls_tools
    extract_reasoning = inputs.reasoning_format != "none"

    def root(p: ChatPegBuilder) -> P:
        start = p.rule("start", p.literal("<|start|>assistant"))
        end = p.rule("end", p.literal(_END_TOKEN))
        content = p.rule("message-content", p.until(_END_TOKEN))
        channel = p.seq_rtl(lambda: p.literal("<|channel|>"),
                            lambda: p.alt_rtl(lambda: p.literal("commentary"), lambda: p.literal("analysis")))
        constrain_type = p.chars("[A-Za-z0-9_-]", 1, -1)

        def constraint() -> P:
            # " <|constrain|>json" or " json" before <|message|>
            return p.optional(p.seq_rtl(p.space, lambda: p.optional(p.literal("<|constrain|>")), constrain_type))

        # gpt-oss-20b sometimes opens a channel with a stray commentary header
        stray_commentary = p.optional(p.seq_rtl(lambda: p.literal("<|channel|>commentary"),
                                                lambda: p.optional(p.literal(" to=assistant"))))
        start_analysis = p.seq_rtl(stray_commentary, lambda: p.literal("<|channel|>analysis<|message|>"))
        if extract_reasoning:
            p.rule("analysis", p.seq_rtl(start_analysis, lambda: p.reasoning(content), end))
        else:
            p.rule("analysis", p.content(p.seq_rtl(start_analysis, content, end)))
        analysis = p.ref("analysis")
        preamble = p.rule("preamble", p.seq_rtl(lambda: p.literal("<|channel|>commentary<|message|>"),
                                                lambda: p.content(content), end))
        final_msg = p.rule("final", p.seq_rtl(stray_commentary, lambda: p.literal("<|channel|>final<|message|>"),
                                              lambda: p.content(content)))
        # unsolicited calls (e.g. builtin functions) are consumed, not parsed
        unsolicited = p.rule("unsolicited", p.atomic(p.seq_rtl(lambda: p.optional(channel),
                                                               lambda: p.literal(" to="), content, end)))
        any_msg = p.rule("any", preamble | analysis)

        if has_response_format:
            final_constraint = constraint()
            response_format = p.rule("response-format", p.seq_rtl(
                lambda: p.literal("<|channel|>final"), final_constraint, lambda: p.literal("<|message|>"),
                lambda: p.content(p.schema(p.json(), "response-format-schema", inputs.json_schema))))
            return p.seq_rtl(lambda: p.zero_or_more(start + analysis), start, response_format)

        if calls_tools:
            tool_choice = p.choice()
            for tool in foreach_function(inputs.tools):
                function = tool["function"]
                name = function["name"]
                params = chat_tool_parameters(function)
                tool_name = p.tool_name(p.literal(name))  # the right operand of `literal + tool_name`
                func_name = p.seq_rtl(lambda: p.literal(" to=functions."), tool_name)
                tool_constraint = constraint()
                args = p.tool_args(p.schema(p.json(), f"tool-{name}-schema", params))
                # <|start|>assistant to=functions.NAME<|channel|>commentary[ json]<|message|>ARGS
                in_role = p.tool(p.tool_open(p.seq_rtl(func_name, channel, tool_constraint,
                                                       lambda: p.literal("<|message|>"))) + args)
                # <|start|>assistant<|channel|>commentary to=functions.NAME[ json]<|message|>ARGS
                in_channel = p.tool(p.tool_open(p.seq_rtl(channel, func_name, tool_constraint,
                                                          lambda: p.literal("<|message|>"))) + args)
                tool_choice |= p.rule(f"tool-{name}", in_role | in_channel)
            tool_call = p.trigger_rule("tool-call", tool_choice)
            if inputs.tool_choice == TOOL_CHOICE_REQUIRED:
                return p.seq_rtl(lambda: p.zero_or_more(start + any_msg), start, tool_call)
            return p.seq_rtl(lambda: p.zero_or_more(start + any_msg), start, lambda: tool_call | final_msg)

        return p.seq_rtl(lambda: p.zero_or_more(start + any_msg), start, lambda: final_msg | unsolicited)

    parser = build_chat_peg_parser(root)
    data.parser = parser
    if include_grammar:
        data.grammar_lazy = not (has_response_format or (has_tools and inputs.tool_choice == TOOL_CHOICE_REQUIRED))
        data.grammar = build_grammar(parser, data.grammar_lazy)
        data.grammar_triggers = [GrammarTrigger("pattern", pattern) for pattern in _TRIGGER_PATTERNS]
    return data
