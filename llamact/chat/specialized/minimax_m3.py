"""MiniMax-M3 (upstream's ``common_chat_params_init_minimax_m3``, parsers/minimax-m3.cpp).

Every tool tag carries the namespace token ``]<]minimax[>[`` (NS)::

    <mm:think>REASONING</mm:think>CONTENT
    NS<tool_call>
    NS<invoke name="f">
    NS<city>Paris NS</city>
    NS<options>NS<mode>fast NS</mode>NS</options>
    NS<values>NS<item>1.5NS</item>NS<item>2NS</item>NS</values>
    NS</invoke>
    NS</tool_call>

(the spaces before the closing tags above are for reading only). A parameter's tag is its name, and
values expand recursively as the template's ``to_xml()`` writes them: objects as member elements,
arrays as ``<item>`` elements, strings raw, other scalars as JSON. The format's own mapper
(``peg-minimax-m3``) turns the tagged tree back into JSON arguments. A turn without reasoning starts
with a bare ``</mm:think>``. A response format is a fenced ```` ```json ```` block.
"""

from __future__ import annotations

from ...grammar.schema import AnyOfSchema, ArraySchema, ObjectSchema, SchemaNode, schema_from_json
from ...peg.builder import P
from ..peg_builder import ChatPegBuilder, build_chat_peg_parser, chat_tool_parameters
from ..peg_mappers import TOOL_ARG_ARRAY, TOOL_ARG_ITEM, TOOL_ARG_OBJECT
from ..render import (
    CONTINUATION_CONTENT,
    TOOL_CHOICE_NONE,
    TOOL_CHOICE_REQUIRED,
    TemplateInputs,
    direct_apply,
    generation_prompt,
)
from ..result import FORMAT_PEG_MINIMAX_M3, ChatParams, GrammarTrigger
from ..templates import ChatTemplate
from ._common import build_grammar, foreach_function, render_content

NS = "]<]minimax[>["
THINK_START, THINK_END = "<mm:think>", "</mm:think>"
FC_START, FC_END = NS + "<tool_call>", NS + "</tool_call>"
INVOKE_END = NS + "</invoke>"


class _ArgumentsBuilder:
    """The parser of one tool's arguments: elements named after the parameters, values by schema."""

    def __init__(self, p: ChatPegBuilder) -> None:
        self.p = p

    def element(self, tag: str, schema: SchemaNode, rule_name: str) -> P:
        """``NS<tag>VALUE NS</tag>`` as the rule ``rule_name``."""
        p = self.p
        # `tool_arg_open(...) + value_of(...)`: GCC makes the value first
        value = self.value(schema, rule_name, NS + "</" + tag + ">")
        arg_open = p.tool_arg_open(p.seq_rtl(lambda: p.literal(NS + "<"), lambda: p.tool_arg_name(p.literal(tag)),
                                             lambda: p.literal(">")))
        return p.rule(rule_name, p.tool_arg(arg_open + value))

    def value(self, schema: SchemaNode, rule_name: str, close: str) -> P:
        """A value of ``schema`` up to and including its closing tag ``close``."""
        p = self.p
        close_tag = p.tool_arg_close(p.literal(close))
        # a string takes any text, so a union with a string alternative is a string
        if schema.may_be_string():
            return p.ac(p.tool_arg_string_value(p.until(close)) + close_tag, close)
        if isinstance(schema, AnyOfSchema):
            # (a risk to streaming deltas that upstream accepts, for argument streaming)
            return p.choice([self.value(alternative, f"{rule_name}-{i}", close)
                             for i, alternative in enumerate(schema.children)])
        if isinstance(schema, ObjectSchema) and schema.properties:
            space = p.space()
            return p.tag(TOOL_ARG_OBJECT, self.members(schema, rule_name)) + space + close_tag
        if isinstance(schema, ArraySchema):
            item_value = self.value(schema.items, rule_name + "-item", NS + "</item>")
            item = p.rule(rule_name + "-item", p.tag(TOOL_ARG_ITEM, p.literal(NS + "<item>") + item_value))
            space = p.space()
            items = p.tag(TOOL_ARG_ARRAY, p.repeat(p.space() + item, 0, -1))
            return items + space + close_tag
        return p.tool_arg_json_value(p.schema(p.json(), rule_name + "-schema", schema)) + close_tag

    def members(self, schema: ObjectSchema, rule_prefix: str) -> P:
        """Required members in schema order, then any number of optional ones in any order."""
        p = self.p
        required: list[P] = []
        optional: list[P] = []
        for prop in schema.properties:
            element = self.element(prop.name, prop.schema, f"{rule_prefix}-{prop.name}")
            (required if prop.required else optional).append(element)
        return p.required_then_optional(required, optional)


def build(tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
    data = ChatParams()
    data.prompt = direct_apply(tmpl, inputs)
    data.generation_prompt = generation_prompt(tmpl, inputs)
    data.format = FORMAT_PEG_MINIMAX_M3
    data.supports_thinking = True
    data.thinking_start_tag = THINK_START
    data.thinking_end_tags = [THINK_END]
    data.preserved_tokens = [NS, "<tool_call>", "</tool_call>", THINK_START, THINK_END]
    data.delimiters(
        ("assistant", "]~b]ai"),
        ("user", "]~b]user"),
        ("tool", "]~b]tool"),
        ("system", "]~b]developer"),
        ("system", "]~b]system"),
    )

    has_tools = inputs.has_tools
    # any object, even an empty one (unlike most builders)
    has_response_format = isinstance(inputs.json_schema, dict)
    extract_reasoning = inputs.reasoning_format != "none"
    with_tools = has_tools and inputs.tool_choice != TOOL_CHOICE_NONE
    gen_prompt = data.generation_prompt  # the template's, before any continuation

    if inputs.has_continuation():
        msg = inputs.continue_msg
        data.generation_prompt = gen_prompt + THINK_START + msg.reasoning_content
        if inputs.continue_final_message == CONTINUATION_CONTENT:
            data.generation_prompt += THINK_END + render_content(msg)
        data.prompt += data.generation_prompt

    def root(p: ChatPegBuilder) -> P:
        gen = p.prefix(gen_prompt, THINK_START)
        end = p.end()
        reasoning = p.eps()
        if extract_reasoning:
            if inputs.enable_thinking:
                block = p.seq_rtl(lambda: p.literal(THINK_START), p.space, lambda: p.ac(
                    p.seq_rtl(lambda: p.reasoning(p.until(THINK_END)), lambda: p.literal(THINK_END)), THINK_END))
            else:
                block = p.seq_rtl(lambda: p.literal(THINK_START), lambda: p.ac(
                    p.seq_rtl(lambda: p.until(THINK_END), lambda: p.literal(THINK_END)), THINK_END))
            # a turn without reasoning starts with a bare </mm:think>, from the generation prompt
            # (thinking disabled) or from the model
            reasoning = p.optional(p.choice([block, p.literal(THINK_END)]))
        if has_response_format:
            response_format = p.rule("response-format", p.seq_rtl(
                lambda: p.literal("```json"), p.space,
                lambda: p.content(p.schema(p.json(), "response-format-schema", inputs.json_schema)),
                p.space, lambda: p.literal("```")))
            return gen + reasoning + response_format + end
        if not with_tools:
            return p.seq_rtl(gen, reasoning, lambda: p.content(p.rest()), end)
        tool_calls = _tool_calls(p)
        content_before_tools = p.content(p.until(FC_START))
        return gen + reasoning + content_before_tools + tool_calls + end

    def _tool_calls(p: ChatPegBuilder) -> P:
        arguments = _ArgumentsBuilder(p)
        tool_choice = p.choice()
        for tool in foreach_function(inputs.tools):
            function = tool["function"]
            name = function["name"]
            doc = schema_from_json(chat_tool_parameters(function))
            invoke_body = p.eps()
            if isinstance(doc.root, ObjectSchema):
                invoke_body = arguments.members(doc.root, f"tool-{name}-arg")
            # `tool_open(...) + space() + invoke_body + space() + tool_close(...)`, right operands first
            close = p.tool_close(p.literal(INVOKE_END))
            trailing = p.space()
            leading = p.space()
            name_close = p.literal('">')
            tool_name = p.tool_name(p.literal(name))
            open_ = p.tool_open(p.literal(NS + '<invoke name="') + tool_name + name_close)
            tool_choice |= p.rule(f"tool-{name}", p.tool(open_ + leading + invoke_body + trailing + close))
        tool_calls = p.eps()  # upstream declares it first: the node id is taken
        if inputs.parallel_tool_calls:
            body = p.seq_rtl(lambda: p.literal(FC_START), p.space, tool_choice,
                             lambda: p.zero_or_more(p.space() + tool_choice), p.space, lambda: p.literal(FC_END))
        else:
            body = p.seq_rtl(lambda: p.literal(FC_START), p.space, tool_choice, p.space, lambda: p.literal(FC_END))
        tool_calls = p.trigger_rule("tool-call", body)
        return tool_calls if inputs.tool_choice == TOOL_CHOICE_REQUIRED else p.optional(tool_calls)

    parser = build_chat_peg_parser(root)
    data.parser = parser
    if has_response_format or with_tools:
        data.grammar_lazy = not (has_response_format or (has_tools and inputs.tool_choice == TOOL_CHOICE_REQUIRED))
        data.grammar = build_grammar(parser, data.grammar_lazy)
        data.grammar_triggers = [GrammarTrigger("word", FC_START)]
    return data
