"""Qwen3-Coder XML tool calls, also Nemotron Nano 3, Qwen3.5 and StepFun-3.5-Flash
(upstream's ``common_chat_params_init_qwen3_coder``, parsers/qwen3-coder.cpp).

``<tool_call>\\n<function=NAME>\\n<parameter=ARG>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call>``;
schema-declared strings are raw text, other values JSON. Templates with ``<think>`` reason in
``<think>...</think>`` (a tool call may also end the thought); Qwen3-Coder itself (no ``<think>``)
may omit the opening ``<tool_call>``.
"""

from __future__ import annotations

from ...peg.builder import P
from ..peg_builder import ChatPegBuilder, build_chat_peg_parser
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
from ._common import build_grammar, foreach_function, foreach_parameter, render_content

GEN_PREFIX = "<|im_start|>assistant\n"
_ARG_CLOSE = "\n</parameter>\n"


def build(tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
    data = ChatParams()
    data.prompt = direct_apply(tmpl, inputs)
    data.generation_prompt = generation_prompt(tmpl, inputs)
    data.format = FORMAT_PEG_NATIVE

    supports_reasoning = "<think>" in tmpl.source
    data.supports_thinking = supports_reasoning
    data.preserved_tokens = ["<tool_call>", "</tool_call>"]
    is_qwen3_coder = not supports_reasoning
    if supports_reasoning:
        data.thinking_start_tag = "<think>"
        # the newline variant first, so that it is the one a forced end of thought writes
        data.thinking_end_tags = ["\n</think>", "</think>", "<tool_call>"]
        data.preserved_tokens += ["<think>", "</think>"]
    data.delimiters(
        ("assistant", "<|im_start|>assistant"),
        ("tool", "<|im_start|>user\n<tool_response>"),  # Qwen3-Coder, Qwen3.5, Nemotron Nano 3
        ("tool", "<|im_start|>tool_response"),           # StepFun-3.5-Flash
        ("user", "<|im_start|>user"),
        ("system", "<|im_start|>system"),
    )

    has_tools = inputs.has_tools
    has_response_format = inputs.has_response_format
    extract_reasoning = inputs.reasoning_format != "none"
    include_grammar = has_response_format or (has_tools and inputs.tool_choice != TOOL_CHOICE_NONE)

    if inputs.has_continuation():
        msg = inputs.continue_msg
        data.generation_prompt = GEN_PREFIX
        if supports_reasoning:
            data.generation_prompt += "<think>\n" + msg.reasoning_content
            if inputs.continue_final_message == "content":
                data.generation_prompt += "\n</think>\n\n"
        if inputs.continue_final_message == "content":
            data.generation_prompt += render_content(msg)
        data.prompt += data.generation_prompt

    tool_call_starts = ["<tool_call>"]
    if is_qwen3_coder:
        # the model sometimes omits <tool_call>: a complete <function=name> opener counts too
        tool_call_starts += [f"<function={tool['function']['name']}>" for tool in foreach_function(inputs.tools)]

    def root(p: ChatPegBuilder) -> P:
        gen = p.literal(GEN_PREFIX)
        reasoning = p.eps()
        if supports_reasoning and extract_reasoning:
            reasoning = p.optional(p.seq_rtl(
                "<think>", p.space, lambda: p.reasoning(p.until_one_of(["</think>", "<tool_call>"])),
                lambda: p.alt_rtl(lambda: p.literal("</think>"), lambda: p.peek(p.literal("<tool_call>")))))
        if has_response_format:
            return gen + (reasoning << p.content(p.schema(p.json(), "response-format", inputs.json_schema)))
        if has_tools and inputs.tool_choice != TOOL_CHOICE_NONE:
            tool_calls = _tool_calls(p)
            return gen + (reasoning << p.content(p.until_one_of(tool_call_starts)) << tool_calls)
        return gen + (reasoning << p.content(p.rest()))

    def _tool_calls(p: ChatPegBuilder) -> P:
        arg_close = p.tool_arg_close(p.literal(_ARG_CLOSE))
        arg_string = p.rule("xml-arg-string",
                            p.ac(p.tool_arg_string_value(p.until(_ARG_CLOSE)) + arg_close, _ARG_CLOSE))
        tool_choice = p.choice()
        for tool in foreach_function(inputs.tools):
            function = tool["function"]
            name = function["name"]
            required_args: list[P] = []
            optional_args: list[P] = []
            for param in foreach_parameter(function):
                rule_name = f"tool-{name}-arg-{param.name}"
                arg_open = p.tool_arg_open(p.seq_rtl("<parameter=", p.tool_arg_name(p.literal(param.name)), ">\n"))
                types = param.schema.value_types()
                arg_value = p.eps()  # upstream declares it first: the node id is taken
                if "string" not in types:
                    schema = p.schema(p.json(), rule_name + "-schema", param.schema)
                    arg_value = p.tool_arg_json_value(schema) + arg_close
                elif types == {"string"}:
                    arg_value = arg_string
                else:
                    # the string alternative takes any text, so the grammar keeps only the raw string
                    # rule; the parser still tries the JSON alternatives first, to type the value
                    json_value = p.choice()
                    if "object" in types:
                        json_value |= p.json_object()
                    if "array" in types:
                        json_value |= p.json_array()
                    if "number" in types or "integer" in types:
                        json_value |= p.json_number()
                    if "boolean" in types:
                        json_value |= p.json_bool()
                    if "null" in types:
                        json_value |= p.json_null()
                    arg_value = p.gbnf(p.atomic(p.tool_arg_json_value(json_value) + arg_close) | arg_string,
                                       "xml-arg-string")
                arg_rule = p.rule(rule_name, p.tool_arg(arg_open + arg_value))
                (required_args if param.required else optional_args).append(arg_rule)
            # required arguments in any order: Qwen does not always keep the given order
            args = p.permute(f"tool-{name}-args", required_args)
            if optional_args:
                args = args + p.zero_or_more(p.choice(optional_args))
            # upstream's `open + args + close` chain: GCC makes the right operands first
            close = p.tool_close(p.literal("</function>\n"))
            tool_args = p.tool_args(args)
            open_ = p.tool_open(p.seq_rtl("<function=", p.tool_name(p.literal(name)), ">\n"))
            func = p.tool(p.seq_rtl(open_, tool_args, close))
            tool_choice |= p.rule(f"tool-{name}", func)

        min_calls = 1 if inputs.tool_choice == TOOL_CHOICE_REQUIRED else 0
        body = p.seq_rtl(tool_choice, "</tool_call>", p.space)
        tool_call = p.rule("tool-call", "<tool_call>\n" + body)
        first = (p.rule("tool-call-first", p.optional(p.literal("<tool_call>\n")) + body)
                 if is_qwen3_coder else tool_call)
        calls = p.seq_rtl(first, lambda: p.zero_or_more(tool_call)) if inputs.parallel_tool_calls else first
        return p.trigger_rule("tool-call-root", p.repeat(calls, min_calls, 1))

    parser = build_chat_peg_parser(root)
    data.parser = parser
    if include_grammar:
        data.grammar_lazy = has_tools and inputs.tool_choice == TOOL_CHOICE_AUTO
        data.grammar = build_grammar(parser, data.grammar_lazy)
        if data.grammar_lazy:
            data.grammar_triggers = [GrammarTrigger("word", start) for start in tool_call_starts]
    return data
