"""DeepSeek V3.2 and V4 DSML tool calls (upstream's ``common_chat_params_init_deepseek_v3_2``,
parsers/deepseek.cpp).

The generation starts at ``<｜Assistant｜>``; reasoning is ``<think>...</think>``; tool calls are a
DSML block::

    <｜DSML｜function_calls>
    <｜DSML｜invoke name="NAME">
    <｜DSML｜parameter name="ARG" string="true">raw text</｜DSML｜parameter>
    <｜DSML｜parameter name="N" string="false">JSON</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

V4 names the block ``tool_calls`` (its source has no ``function_calls``), renders consecutive tool
results in the order of the calls they answer, receives the response format as a template variable,
and its generation prompt without thinking ends in a bare ``</think>`` (V3.2: an empty
``<think></think>`` pair). A response format is a fenced ```` ```json ```` block.
"""

from __future__ import annotations

from collections.abc import Callable

from ...grammar.schema import Property
from ...json_types import Json
from ...peg.builder import P
from ..peg_builder import ChatPegBuilder, build_chat_peg_parser
from ..render import TOOL_CHOICE_NONE, TOOL_CHOICE_REQUIRED, TemplateInputs, direct_apply, generation_prompt
from ..result import FORMAT_PEG_NATIVE, ChatParams, GrammarTrigger
from ..templates import ChatTemplate
from ._common import build_grammar, foreach_function, foreach_parameter, render_content

DSML = "｜DSML｜"
THINK_START = "<think>"
THINK_END = "</think>"
GEN_PROMPT = "<｜Assistant｜>"
TC_SEPARATOR = "\n\n"
INVOKE_START = "<" + DSML + "invoke"
INVOKE_END = "</" + DSML + "invoke>"
PARAM_START = "<" + DSML + "parameter"
PARAM_END = "</" + DSML + "parameter>"


def _role(message: Json) -> str:
    role = message.get("role", "") if isinstance(message, dict) else ""
    return role if isinstance(role, str) else ""


def sort_v4_tool_results(messages: Json) -> Json:
    """A copy of ``messages`` where each run of user / tool messages has its tool results in the
    order of the preceding assistant message's calls (matched by id; unknown ids count as the first
    call, and the sort is stable). V4's reference renders such a run as one user block."""
    adjusted = list(messages)
    call_order: dict[str, int] = {}
    i = 0
    while i < len(adjusted):
        msg = adjusted[i]
        role = _role(msg)
        calls = msg.get("tool_calls") if isinstance(msg, dict) else None
        if role == "assistant" and isinstance(calls, list) and calls:
            call_order = {}
            for idx, call in enumerate(calls):
                call_id = call.get("id", "") if isinstance(call, dict) else ""
                if call_id:
                    call_order[call_id] = idx
            i += 1
            continue
        if role not in ("user", "tool"):
            i += 1
            continue
        run_end = i
        tool_positions: list[int] = []
        while run_end < len(adjusted):
            r = _role(adjusted[run_end])
            if r == "tool":
                tool_positions.append(run_end)
            elif r != "user":
                break
            run_end += 1
        if len(tool_positions) > 1 and call_order:
            results = sorted((adjusted[pos] for pos in tool_positions),
                             key=lambda m: call_order.get(m.get("tool_call_id", ""), 0))
            for pos, result in zip(tool_positions, results, strict=True):
                adjusted[pos] = result
        i = run_end
    return adjusted


def _lit(p: ChatPegBuilder, text: str) -> Callable[[], P]:
    """A ``p.literal(text)`` operand of a ``seq_rtl`` chain (made when the chain evaluates it; a bare
    ``str`` operand would be made inside the operator instead, as upstream's ``"text" + parser``)."""
    return lambda: p.literal(text)


def build(tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
    data = ChatParams()
    is_v4 = "function_calls" not in tmpl.source
    adjusted_messages = sort_v4_tool_results(inputs.messages) if is_v4 else None

    has_tools = inputs.has_tools
    # upstream tests is_object() only: an empty schema counts here
    has_response_format = isinstance(inputs.json_schema, dict)
    extract_reasoning = inputs.reasoning_format != "none"
    include_grammar = has_response_format or (has_tools and inputs.tool_choice != TOOL_CHOICE_NONE)
    additional_context = {"response_format": inputs.json_schema} if is_v4 and has_response_format else None

    block = "tool_calls" if is_v4 else "function_calls"
    fc_start = "<" + DSML + block + ">"
    fc_end = "</" + DSML + block + ">"

    # lets the server find user turns in the prompt and place context checkpoints there
    data.delimiters(("assistant", GEN_PROMPT), ("user", "<｜User｜>"))
    data.prompt = direct_apply(tmpl, inputs, adjusted_messages, None, additional_context)
    data.generation_prompt = generation_prompt(tmpl, inputs, adjusted_messages, None, additional_context)
    data.format = FORMAT_PEG_NATIVE
    data.supports_thinking = True
    data.thinking_start_tag = THINK_START
    data.thinking_end_tags = [THINK_END, fc_start]
    data.preserved_tokens = [DSML, THINK_START, THINK_END]

    if inputs.has_continuation():
        msg = inputs.continue_msg
        continue_content = inputs.continue_final_message == "content"
        if is_v4 and not msg.reasoning_content:
            data.generation_prompt = GEN_PROMPT + THINK_END
            if continue_content:
                data.generation_prompt += render_content(msg)
        else:
            data.generation_prompt = GEN_PROMPT + THINK_START + msg.reasoning_content
            if continue_content:
                data.generation_prompt += THINK_END + render_content(msg)
        data.prompt += data.generation_prompt

    require_tools = inputs.tool_choice == TOOL_CHOICE_REQUIRED
    has_tool_calls = has_tools and inputs.tool_choice != TOOL_CHOICE_NONE

    def root(p: ChatPegBuilder) -> P:
        gen = p.literal(GEN_PROMPT)
        end = p.end()

        # the tool call section comes first: the reasoning may end in it
        tool_choice = p.choice()
        if has_tool_calls:
            for tool in foreach_function(inputs.tools):
                name = tool["function"]["name"]
                tool_choice |= p.rule(f"tool-{name}", _tool(p, tool["function"]))

        tool_calls = p.eps()
        if inputs.parallel_tool_calls:
            tool_calls = p.trigger_rule("tool-call", p.seq_rtl(
                _lit(p, fc_start), p.space, tool_choice, lambda: p.zero_or_more(p.space() + tool_choice),
                p.space, _lit(p, fc_end)))
        else:
            tool_calls = p.trigger_rule("tool-call", p.seq_rtl(
                _lit(p, fc_start), p.space, tool_choice, p.space, _lit(p, fc_end)))

        reasoning = p.eps()
        reasoning_with_tc = p.eps()
        obligatory_tool_calls = tool_calls
        allow_reasoning_with_tc = False
        if not require_tools:
            tool_calls = p.optional(tool_calls)

        if extract_reasoning and inputs.enable_thinking:
            reasoning = p.optional(p.seq_rtl(THINK_START, lambda: p.reasoning(p.until(THINK_END)), THINK_END))
            reasoning_with_tc = p.seq_rtl(
                THINK_START, lambda: p.reasoning(p.until_one_of([TC_SEPARATOR + fc_start, fc_start, THINK_END])),
                p.space, obligatory_tool_calls)
            allow_reasoning_with_tc = True
        elif extract_reasoning:
            # thinking off: the generation prompt still holds </think> (V4) or <think></think> (V3.2)
            if is_v4:
                reasoning = p.optional(p.literal(THINK_END))
            else:
                reasoning = p.optional(p.seq_rtl(_lit(p, THINK_START), lambda: p.until(THINK_END),
                                                 _lit(p, THINK_END)))

        if has_response_format:
            response_format = p.rule("response-format", p.seq_rtl(
                _lit(p, "```json"), p.space,
                lambda: p.content(p.schema(p.json(), "response-format-schema", inputs.json_schema)),
                p.space, _lit(p, "```")))
            return p.seq_rtl(gen, reasoning, response_format, end)

        if not has_tool_calls:
            return p.seq_rtl(gen, reasoning, lambda: p.content(p.rest()), end)

        content_before_tools = p.seq_rtl(
            lambda: p.negate(p.literal(THINK_START)),
            lambda: p.content(p.until_one_of([TC_SEPARATOR + fc_start, fc_start])), p.space)
        if allow_reasoning_with_tc:
            return p.seq_rtl(gen, lambda: reasoning_with_tc | p.seq_rtl(reasoning, content_before_tools, tool_calls),
                             end)
        return p.seq_rtl(gen, reasoning, content_before_tools, tool_calls, end)

    parser = build_chat_peg_parser(root)
    data.parser = parser
    if include_grammar:
        data.grammar_lazy = has_tools and not require_tools
        data.grammar = build_grammar(parser, data.grammar_lazy)
        data.grammar_triggers = [GrammarTrigger("word", fc_start)]
    return data


def _tool_arg(p: ChatPegBuilder, name: str, param: Property) -> P:
    """``<｜DSML｜parameter name="ARG" string="true|false">VALUE</｜DSML｜parameter>``, as a rule."""
    is_string = param.schema.may_be_string()
    rule_name = f"tool-{name}-arg-{param.name}"
    # upstream's `open + value + close`: GCC makes the right operands first
    close = p.tool_arg_close(p.literal(PARAM_END))
    if is_string:
        value = p.tool_arg_string_value(p.until(PARAM_END))
    else:
        value = p.tool_arg_json_value(p.schema(p.json(), rule_name + "-schema", param.schema))
    flag = "true" if is_string else "false"
    open_ = p.tool_arg_open(p.seq_rtl(_lit(p, PARAM_START + ' name="'),
                                      lambda: p.tool_arg_name(p.literal(param.name)),
                                      _lit(p, f'" string="{flag}">')))
    return p.rule(rule_name, p.tool_arg(p.seq_rtl(open_, value, close)))


def _tool(p: ChatPegBuilder, function: Json) -> P:
    """One invoke: the required arguments in order, then any optional ones."""
    name = function["name"]
    required: list[P] = []
    optional: list[P] = []
    for param in foreach_parameter(function):
        (required if param.required else optional).append(_tool_arg(p, name, param))
    args_seq = p.required_then_optional(required, optional)
    return p.tool(p.seq_rtl(
        lambda: p.tool_open(p.seq_rtl(_lit(p, INVOKE_START + ' name="'), lambda: p.tool_name(p.literal(name)),
                                      _lit(p, '">\n'))),
        args_seq, p.space, lambda: p.tool_close(p.literal(INVOKE_END))))
