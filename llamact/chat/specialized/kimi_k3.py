"""Kimi K3's tagged format (upstream's ``common_chat_params_init_kimi_k3``, parsers/kimi-k3.cpp).

Tags open as ``<|open|>NAME attr="v"...<|sep|>`` and close as ``<|close|>NAME<|sep|>``. An
assistant message is ``[think] [response] [tools]``, then the message closer and ``<|end_of_msg|>``::

    <|open|>message role="assistant"<|sep|><|open|>think<|sep|>THOUGHT<|close|>think<|sep|>
    <|open|>response<|sep|>TEXT<|close|>response<|sep|>
    <|open|>tools<|sep|><|open|>call tool="NAME" index="0"<|sep|>
    <|open|>argument key="ARG" type="string"<|sep|>VALUE<|close|>argument<|sep|>...
    <|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>

An argument's ``type`` attribute is skipped: whether its value is raw text or JSON comes from the
tool's schema (a property typed ``"string"``, or untyped, is text). The generation prompt already
opens the think section, so every section opener is optional; all calls go in one tools section.
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

SEP = "<|sep|>"
MSG_START = '<|open|>message role="assistant"<|sep|>'
THINK_START = "<|open|>think<|sep|>"
THINK_END = "<|close|>think<|sep|>"
RESP_START = "<|open|>response<|sep|>"
RESP_END = "<|close|>response<|sep|>"
TOOLS_START = "<|open|>tools<|sep|>"
TOOLS_END = "<|close|>tools<|sep|>"
CALL_START = '<|open|>call tool="'
CALL_END = "<|close|>call<|sep|>"
ARG_START = '<|open|>argument key="'
ARG_END = "<|close|>argument<|sep|>"
MSG_END = "<|close|>message<|sep|>"
EOM_TOKEN = "<|end_of_msg|>"


def _properties(schema: Json) -> list[tuple[str, Json]]:
    """(key, property schema) pairs as upstream walks ``schema["properties"]`` (nlohmann's ``items()``)."""
    if not isinstance(schema, dict) or "properties" not in schema:
        return []
    props = schema["properties"]
    if isinstance(props, dict):
        return list(props.items())
    if isinstance(props, list):
        return [(str(i), v) for i, v in enumerate(props)]
    return [] if props is None else [("", props)]


def _declared_type(prop: Json) -> str:
    """The property's ``type`` when it is one string; "string" otherwise."""
    if isinstance(prop, dict) and isinstance(prop.get("type"), str):
        return str(prop["type"])
    return "string"


def build(tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
    data = ChatParams()
    data.prompt = direct_apply(tmpl, inputs)
    data.generation_prompt = generation_prompt(tmpl, inputs)
    data.format = FORMAT_PEG_NATIVE
    data.supports_thinking = True
    # only the markers are special tokens: preserving tag names ("think", ...) would break prose
    data.preserved_tokens = ["<|open|>", "<|close|>", SEP, EOM_TOKEN]
    data.thinking_start_tag = THINK_START
    data.thinking_end_tags = [THINK_END]
    # system and tool openers carry more attributes: their delimiters stop after the role
    data.delimiters(
        ("assistant", MSG_START),
        ("user", '<|open|>message role="user"<|sep|>'),
        ("tool", '<|open|>message role="tool"'),
        ("system", '<|open|>message role="system"'),
    )
    extract_reasoning = inputs.reasoning_format != "none"
    calls_tools = inputs.has_tools and inputs.tool_choice != TOOL_CHOICE_NONE

    if inputs.has_continuation():
        msg = inputs.continue_msg
        data.generation_prompt = MSG_START + THINK_START + msg.reasoning_content
        if inputs.continue_final_message == CONTINUATION_CONTENT:
            data.generation_prompt += THINK_END + RESP_START + render_content(msg)
        data.prompt += data.generation_prompt

    def root(p: ChatPegBuilder) -> P:
        end = p.end()
        start = p.optional(p.literal(MSG_START))
        # the think section is always consumed (the generation prompt opens it); it ends at its
        # closer or, when the model skips that, at the response opener
        body_tag = p.reasoning if extract_reasoning else p.content
        think_body = body_tag(p.until_one_of([THINK_END, RESP_START]))
        reasoning = p.optional(p.seq_rtl(lambda: p.optional(p.literal(THINK_START)), think_body,
                                         lambda: p.optional(p.literal(THINK_END))))
        # content ends at the response closer, or at the next section when the closer is missing
        response = p.seq_rtl(lambda: p.optional(p.literal(RESP_START)),
                             lambda: p.content(p.until_one_of([RESP_END, TOOLS_START, MSG_END])),
                             lambda: p.optional(p.literal(RESP_END)))
        # the end-of-message token reaches the parser as text: consume it
        trailer = p.seq_rtl(lambda: p.optional(p.literal(MSG_END)), lambda: p.optional(p.literal(EOM_TOKEN)))
        if not calls_tools:
            return p.seq_rtl(start, reasoning, response, trailer, end)

        tool_choices = p.choice()
        for tool in foreach_function(inputs.tools):
            name = tool["function"]["name"]
            args = _args(p, name, chat_tool_parameters(tool["function"]))
            tool_choices |= p.rule(f"kimi-k3-tool-{name}", _call(p, name, args))
        # the message closer belongs to the trigger rule, or a lazy grammar rejects it after the calls
        tools_section = p.trigger_rule("kimi-k3-tool-call", p.seq_rtl(
            lambda: p.literal(TOOLS_START), lambda: p.one_or_more(tool_choices), lambda: p.literal(TOOLS_END),
            lambda: p.optional(p.literal(MSG_END)), lambda: p.optional(p.literal(EOM_TOKEN))))
        tools = tools_section if inputs.tool_choice == TOOL_CHOICE_REQUIRED else p.optional(tools_section)
        return p.seq_rtl(start, reasoning, response, tools, trailer, end)

    parser = build_chat_peg_parser(root)
    data.parser = parser
    if calls_tools:
        data.grammar_lazy = inputs.tool_choice != TOOL_CHOICE_REQUIRED
        data.grammar = build_grammar(parser, data.grammar_lazy)
        data.grammar_triggers = [GrammarTrigger("word", TOOLS_START)]
    return data


def _call(p: ChatPegBuilder, name: str, args: P) -> P:
    """``<|open|>call tool="NAME" index="N"<|sep|>ARGS<|close|>call<|sep|>`` (the index is skipped)."""
    return p.tool(p.seq_rtl(
        lambda: p.tool_open(p.seq_rtl(lambda: p.literal(CALL_START), lambda: p.tool_name(p.literal(name)),
                                      lambda: p.literal('"'), lambda: p.until(SEP), lambda: p.literal(SEP))),
        lambda: p.tool_args(args), lambda: p.tool_close(p.literal(CALL_END))))


def _args(p: ChatPegBuilder, name: str, schema: Json) -> P:
    """Any number of the tool's arguments, in any order."""
    args = p.eps()  # upstream declares it first: the node id is taken
    props = _properties(schema)
    if not props:
        return args
    arg_choices = p.choice()
    for key, prop in props:
        arg_choices |= p.rule(f"kimi-k3-arg-{name}-{key}", _arg(p, key, prop))
    return p.zero_or_more(arg_choices)


def _arg(p: ChatPegBuilder, key: str, prop: Json) -> P:
    """``<|open|>argument key="KEY" type="T"<|sep|>VALUE<|close|>argument<|sep|>`` (the type is skipped)."""
    tag = p.tool_arg_string_value if _declared_type(prop) == "string" else p.tool_arg_value
    value = tag(p.until(ARG_END))
    return p.tool_arg(p.seq_rtl(
        lambda: p.tool_arg_open(p.literal(ARG_START)), lambda: p.tool_arg_name(p.literal(key)),
        lambda: p.literal('"'), lambda: p.until(SEP), lambda: p.literal(SEP), value,
        lambda: p.tool_arg_close(p.literal(ARG_END))))
