"""GigaChat 3 (upstream's ``common_chat_params_init_gigachat_v3``, parsers/gigachat-v3.cpp).

Turns are ``ROLE<|role_sep|>\\nTEXT<|message_sep|>\\n\\n``. The assistant writes content, then at
most one tool call as its own turn: ``<|message_sep|>\\n\\nfunction call<|role_sep|>\\n{"name": "f",
"arguments": {...}}``. No reasoning; no parallel calls.
"""

from __future__ import annotations

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
from ._common import build_grammar, render_content

GEN_PREFIX = "assistant<|role_sep|>\n"
MESSAGE_SEP = "<|message_sep|>\n\n"
TOOL_CALL_START = MESSAGE_SEP + "function call<|role_sep|>\n"


def build(tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
    data = ChatParams()
    data.prompt = direct_apply(tmpl, inputs)
    data.generation_prompt = generation_prompt(tmpl, inputs)
    data.format = FORMAT_PEG_NATIVE
    data.supports_thinking = False
    data.preserved_tokens = [MESSAGE_SEP, "<|role_sep|>\n"]

    if inputs.has_continuation():
        data.generation_prompt = GEN_PREFIX + render_content(inputs.continue_msg)
        data.prompt += data.generation_prompt

    with_tools = inputs.has_tools and inputs.tool_choice != TOOL_CHOICE_NONE

    def root(p: ChatPegBuilder) -> P:
        ret = p.eps()  # upstream declares it first: the node id is taken
        if with_tools:
            tool_calls = _tool_calls(p)
            ret = p.content(p.until(MESSAGE_SEP)) << tool_calls
        else:
            ret = p.content(p.rest())
        return p.literal(GEN_PREFIX) + ret

    def _tool_calls(p: ChatPegBuilder) -> P:
        tool_choice = p.choice()
        # every tool, unfiltered (upstream reads tool["function"] of each)
        for tool in inputs.tools:
            function = tool["function"]
            name = function["name"]
            # `"\"" + tool_name(literal(name)) + "\""`: the quotes become literals inside the operators
            tool_name = p.json_member("name", p.seq_rtl('"', p.tool_name(p.literal(name)), '"'))
            schema = p.schema(p.json(), f"tool-{name}-schema", chat_tool_parameters(function))
            tool_args = p.json_member("arguments", p.tool_args(schema))
            tool_open = p.tool_open(p.literal("{") << tool_name)
            tool_choice |= p.rule(f"tool-{name}", tool_open << "," << tool_args << "}")
        min_calls = 1 if inputs.tool_choice == TOOL_CHOICE_REQUIRED else 0
        tool_call = p.rule("tool-call", p.literal(TOOL_CALL_START) + tool_choice)
        # at most one call: the format has no parallel calls
        return p.trigger_rule("tool-call-root", p.repeat(tool_call, min_calls, 1))

    parser = build_chat_peg_parser(root)
    data.parser = parser
    if with_tools:
        data.grammar_lazy = inputs.tool_choice == TOOL_CHOICE_AUTO
        data.grammar = build_grammar(parser, data.grammar_lazy)
        data.grammar_triggers = [GrammarTrigger("word", TOOL_CALL_START)]
    return data
