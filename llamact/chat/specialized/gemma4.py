"""Gemma 4 (upstream's ``common_chat_params_init_gemma4`` and
``workaround::convert_tool_responses_gemma4``, parsers/gemma4.cpp).

Turns are ``<|turn>user ... <turn|>`` / ``<|turn>model ...``; reasoning is a channel
``<|channel>thought ... <channel|>`` (empty ``<|channel>`` openers before it are skipped); a tool
call is ``<|tool_call>call:NAME{key:value,...}<tool_call|>``, its arguments in Gemma's own value
syntax (strings quoted by ``<|"|>``, bare keys), mapped to JSON by the ``peg-gemma4`` mapper. A
response format is a fenced ```` ```json ```` block.

Templates older than the OpenAI-style one (no ``{#- OpenAI Chat Completions:`` in the source) read
tool results from the assistant message instead of ``role: tool`` messages: :func:`prepare` folds
each ``assistant(tool_calls) -> tool... -> assistant(content)`` run into one assistant message
with ``tool_responses`` before anything is rendered.
"""

from __future__ import annotations

from ...json_types import Json
from ...peg.builder import P
from ..json_text import JsonParseError, parse_json
from ..peg_builder import ChatPegBuilder, build_chat_peg_parser
from ..render import TOOL_CHOICE_NONE, TOOL_CHOICE_REQUIRED, TemplateInputs, direct_apply, generation_prompt
from ..result import FORMAT_PEG_GEMMA4, ChatParams, GrammarTrigger
from ..templates import ChatTemplate
from ._common import build_grammar, foreach_function, render_content

OPENAI_TEMPLATE_MARKER = "{#- OpenAI Chat Completions:"
MODEL_TURN = "<|turn>model\n"
TURN_END = "<turn|>\n"
STRING_QUOTE = '<|"|>'


# -- the tool-response folding of older templates ------------------------------------------------------


def _has_tool_calls(msg: Json) -> bool:
    calls = msg.get("tool_calls") if isinstance(msg, dict) else None
    return isinstance(calls, list) and bool(calls)


def _has_content(msg: Json) -> bool:
    content = msg.get("content")
    return isinstance(content, (str, list)) and bool(content)


def _role(msg: Json) -> str:
    role = msg.get("role", "") if isinstance(msg, dict) else ""
    return role if isinstance(role, str) else ""


def _tool_response(result: Json) -> Json:
    """A tool message's content as the template wants it: JSON text parsed, anything else as it is."""
    if "content" not in result:
        return None
    content = result["content"]
    if isinstance(content, str):
        try:
            return parse_json(content)
        except JsonParseError:
            return content
    return content


def _model_turn(messages: list[Json], pos: int) -> tuple[Json, int]:
    """The assistant message with tool calls at ``pos``, its tool results and a following final
    answer, folded into one message; and the position after them."""
    first = messages[pos]
    reasoning = first.get("reasoning_content")
    tool_calls = list(first["tool_calls"])
    pos += 1
    responses: list[Json] = []
    while pos < len(messages) and _role(messages[pos]) == "tool":
        result = messages[pos]
        name = ""
        # matched to the call at the same index; the call id when that call has no name
        if len(responses) < len(tool_calls):
            call = tool_calls[len(responses)]
            if isinstance(call, dict) and "function" in call:
                name = call["function"].get("name", "")
        if not name:
            name = result.get("tool_call_id", "")
        responses.append({"name": name, "response": _tool_response(result)})
        pos += 1
    content = None
    if pos < len(messages) and _role(messages[pos]) == "assistant":
        following = messages[pos]
        if not _has_tool_calls(following) and _has_content(following):
            content = following["content"]
            pos += 1
    # the first message's own content is not carried over (as upstream)
    folded: Json = {"role": "assistant", "tool_calls": tool_calls}
    if responses:
        folded["tool_responses"] = responses
    if content is not None:
        folded["content"] = content
    if isinstance(reasoning, str):
        # the prompt guide keeps reasoning between calls, even where the template drops it
        folded["reasoning_content"] = reasoning
    return folded, pos


def fold_tool_responses(messages: list[Json]) -> list[Json]:
    """Upstream's ``convert_tool_responses_gemma4``: a new list; the given messages are not changed."""
    out: list[Json] = []
    i = 0
    while i < len(messages):
        msg = messages[i]
        if _role(msg) != "assistant" or not _has_tool_calls(msg):
            out.append(msg)
            i += 1
            continue
        folded, i = _model_turn(messages, i)
        out.append(folded)
    return out


def prepare(tmpl: ChatTemplate, inputs: TemplateInputs) -> None:
    """Older Gemma 4 templates (no OpenAI-style tool handling): fold the tool results into the
    assistant messages (``inputs.messages`` is replaced, not changed in place)."""
    if OPENAI_TEMPLATE_MARKER not in tmpl.source:
        inputs.messages = fold_tool_responses(inputs.messages)


# -- the format ------------------------------------------------------------------------------------------


def build(tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
    data = ChatParams()
    data.prompt = direct_apply(tmpl, inputs)
    data.generation_prompt = generation_prompt(tmpl, inputs)
    if inputs.add_generation_prompt and data.prompt.endswith(TURN_END):
        # after content + tool call the template opens no model turn, which would keep the model
        # from starting with its reasoning sequence
        data.generation_prompt = MODEL_TURN
        data.prompt += data.generation_prompt

    data.delimiters(("user", "<|turn>user"), ("assistant", "<|turn>model"))
    data.format = FORMAT_PEG_GEMMA4
    data.supports_thinking = True
    data.thinking_start_tag = "<|channel>thought"
    data.thinking_end_tags = ["<channel|>"]
    data.preserved_tokens = ["<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|turn>"]

    if inputs.has_continuation():
        msg = inputs.continue_msg
        data.generation_prompt = MODEL_TURN if data.prompt.endswith(TURN_END) else ""
        data.generation_prompt += "<|channel>thought\n" + msg.reasoning_content
        if inputs.continue_final_message == "content":
            data.generation_prompt += "<channel|>" + render_content(msg)
        data.prompt += data.generation_prompt

    has_tools = inputs.has_tools
    # upstream tests is_object() only: an empty schema counts here
    has_response_format = isinstance(inputs.json_schema, dict)
    use_tools = has_tools and inputs.tool_choice != TOOL_CHOICE_NONE
    require_tools = has_tools and inputs.tool_choice == TOOL_CHOICE_REQUIRED
    include_grammar = has_response_format or use_tools
    extract_reasoning = inputs.reasoning_format != "none"

    def root(p: ChatPegBuilder) -> P:
        start = p.rule("start", p.optional(p.literal(MODEL_TURN)))
        if extract_reasoning:
            p.rule("thought", p.seq_rtl(lambda: p.literal("<|channel>thought"), p.space,
                                        lambda: p.reasoning(p.until("<channel|>")), lambda: p.literal("<channel|>")))
        else:
            p.rule("thought", p.content(p.seq_rtl(lambda: p.literal("<|channel>thought"), p.space,
                                                  lambda: p.until("<channel|>"), lambda: p.literal("<channel|>"))))
        # empty channel openers before the thought are consumed (and left out of the grammar)
        consume_empty_channels = p.gbnf(p.zero_or_more(p.seq_rtl(
            lambda: p.literal("<|channel>"), lambda: p.negate(p.literal("thought")))), "")
        thought = p.alt_rtl(
            lambda: p.seq_rtl(lambda: p.peek(p.literal("<|channel>")), consume_empty_channels,
                              lambda: p.ref("thought")),
            lambda: p.negate(p.literal("<|channel>")))

        if has_response_format:
            response_format = (p.literal("```json")
                               << p.content(p.schema(p.json(), "response-format-schema", inputs.json_schema))
                               << p.literal("```"))
            return start + p.optional(thought) + response_format

        if use_tools:
            tool_call = _tool_calls(p)
            if require_tools:
                return p.seq_rtl(start, thought, tool_call)
            scan_to_toolcall = p.rule("scan-to-toolcall", p.until("<|tool_call>"))
            content = p.rule("content", p.content(p.until_one_of(["<|channel>", "<channel|>", "<|tool_call>"])))
            message = p.rule("message", thought + content)
            return start + p.zero_or_more(message) + scan_to_toolcall + tool_call

        # Gemma 4 may end its content with an extra empty thought, or a lone <channel|>: every
        # complete reasoning block is consumed, and the content stops at an unmatched <channel|>
        content = p.rule("content", p.content(p.until_one_of(["<|channel>", "<channel|>"])))
        message = p.rule("message", thought + content)
        return start + p.one_or_more(message)

    def _tool_calls(p: ChatPegBuilder) -> P:
        _value_rules(p)
        tool_choice = p.choice()
        for tool in foreach_function(inputs.tools):
            name = tool["function"]["name"]
            tool_choice |= p.rule(f"tool-{name}", _tool(p, name))
        min_calls = 1 if inputs.tool_choice == TOOL_CHOICE_REQUIRED else 0
        max_calls = -1 if inputs.parallel_tool_calls else 1
        return p.trigger_rule("tool-call", p.repeat(p.seq_rtl("<|tool_call>call:", tool_choice, "<tool_call|>"),
                                                    min_calls, max_calls))

    parser = build_chat_peg_parser(root)
    data.parser = parser
    if include_grammar:
        data.grammar_lazy = not (has_response_format or require_tools)
        data.grammar = build_grammar(parser, data.grammar_lazy)
        data.grammar_triggers = [GrammarTrigger("word", "<|tool_call>")]
    return data


def _value_rules(p: ChatPegBuilder) -> None:
    """Gemma's argument value syntax as rules (the mapper's ``gemma4_to_json`` walks the same shapes)."""
    p.rule("gemma4-string-content", p.until(STRING_QUOTE))
    p.rule("gemma4-string", p.seq_rtl(lambda: p.literal(STRING_QUOTE), lambda: p.ref("gemma4-string-content"),
                                      lambda: p.literal(STRING_QUOTE)))
    p.rule("gemma4-bool", p.json_bool())
    p.rule("gemma4-null", p.json_null())
    p.rule("gemma4-number", p.json_number())
    p.rule("gemma4-dict-key", p.seq_rtl(lambda: p.rule("gemma4-dict-key-name", p.chars("[^:}]", 1, -1)),
                                        lambda: p.literal(":")))
    p.rule("gemma4-dict-kv", p.seq_rtl(lambda: p.ref("gemma4-dict-key"), p.space, lambda: p.ref("gemma4-value")))
    p.rule("gemma4-dict", lambda: _container(p, "{", "}", "gemma4-dict-kv"))
    p.rule("gemma4-array", lambda: _container(p, "[", "]", "gemma4-value"))
    p.rule("gemma4-value", lambda: p.choice([p.ref("gemma4-string"), p.ref("gemma4-dict"), p.ref("gemma4-array"),
                                             p.ref("gemma4-number"), p.ref("gemma4-bool"), p.ref("gemma4-null")]))


def _tool(p: ChatPegBuilder, name: str) -> P:
    """``NAME{...}``: the arguments are only checked to be a Gemma dict (no schema rules for this syntax)."""
    open_ = p.tool_open(p.seq_rtl(lambda: p.tool_name(p.literal(name)), lambda: p.peek(p.literal("{"))))
    return p.tool(p.sequence([open_, p.tool_args(p.ref("gemma4-dict"))]))


def _container(p: ChatPegBuilder, open_: str, close: str, element_rule: str) -> P:
    """``open ws (close | element ("," ws element)* ws close)``."""
    ws = p.space()
    element = p.ref(element_rule)
    elements = p.sequence([element, p.zero_or_more(p.sequence([p.literal(","), ws, element]))])
    return p.sequence([p.literal(open_), ws,
                       p.choice([p.literal(close), p.sequence([elements, ws, p.literal(close)])])])
