"""The autoparser's generator: a template's analysis -> its prompt, parser and grammar
(upstream's ``peg_generator::generate_parser`` and ``autoparser::build_parser``,
common/chat-auto-parser-generator.cpp).

    generate_parser(tmpl, inputs, analysis) -> ChatParams

The parser is assembled from the analysis's parts, in upstream's shape::

    generation prompt (up to the reasoning start)
    [reasoning: optional(START reasoning END)]          only when extracting reasoning
    then one of
      response format: ```json? + schema-checked JSON content
      tool calls:      content up to the tool-call marker + the calls (tool_parsers.py)
      content:         the rest (or the content between the analysis's content markers)

The grammar is built when there is a response format, or tools with ``tool_choice`` "required", or
"auto" with a marker to trigger on (then lazy, triggered by the section or per-call start, plus the
OpenAI wrapper ``{"type": "function",`` when the analysis saw the model emit it). A continued
message rebuilds the generation prompt by hand: the reasoning start, the reasoning so far, and for a
content continuation the reasoning end and the content so far.

Nodes are allocated in the order of upstream's GCC build (``seq_rtl`` for ``+`` chains, see
llamact/peg/builder.py), so the arena's JSON equals upstream's. Raises what rendering raises
(``JinjaException``), ``SchemaError`` for a tool or response schema outside the supported subset,
``LlamaUnsupportedException`` for an analysis that is not complete; the caller (``apply_autoparser``)
wraps them as upstream does.
"""

from __future__ import annotations

from ...errors import LlamaUnsupportedException
from ...peg.arena import Arena
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
from ..specialized._common import build_grammar, render_content
from ..templates import ChatTemplate
from .build_context import BuildContext, is_always_wrapped
from .helpers import trim_whitespace
from .model import AutoparserAnalysis, ReasoningMode, ToolFormat
from .tool_parsers import build_tools_parser

__all__ = ["OPENAI_WRAPPER_TRIGGER", "BuildContext", "build_parser", "generate_parser"]

# what a model that writes OpenAI's function wrapper starts a call with (a second lazy trigger)
OPENAI_WRAPPER_TRIGGER = '{"type": "function",'

def generate_parser(tmpl: ChatTemplate, inputs: TemplateInputs, analysis: AutoparserAnalysis) -> ChatParams:
    """``peg_generator::generate_parser`` (see the module docstring)."""
    data = ChatParams()
    data.prompt = direct_apply(tmpl, inputs)
    data.generation_prompt = generation_prompt(tmpl, inputs)
    data.format = FORMAT_PEG_NATIVE
    data.preserved_tokens = list(analysis.preserved_tokens)
    data.additional_stops = list(analysis.additional_stops)

    # the parser always starts from the template's own generation prompt, even when continuing
    parser_generation_prompt = data.generation_prompt
    if inputs.has_continuation():
        _continue_generation_prompt(data, inputs, analysis)

    parser = build_parser(analysis, inputs, parser_generation_prompt)
    data.parser = parser

    tools = analysis.tools.format
    has_tools = tools.mode != ToolFormat.NONE and inputs.has_tools
    trigger_marker = tools.section_start or tools.per_call_start
    has_response_format = inputs.has_response_format
    include_grammar = has_response_format or (has_tools and (
        (inputs.tool_choice == TOOL_CHOICE_AUTO and bool(trigger_marker))
        or inputs.tool_choice == TOOL_CHOICE_REQUIRED))
    if include_grammar:
        data.grammar_lazy = not has_response_format and inputs.tool_choice == TOOL_CHOICE_AUTO
        data.grammar = build_grammar(parser, data.grammar_lazy)
        if data.grammar_lazy:
            data.grammar_triggers = [GrammarTrigger("word", trigger_marker)]
            if tools.openai_wrapper_trigger:
                data.grammar_triggers.append(GrammarTrigger("word", OPENAI_WRAPPER_TRIGGER))
    return data


def _continue_generation_prompt(data: ChatParams, inputs: TemplateInputs, analysis: AutoparserAnalysis) -> None:
    """The generation prompt of a continued message, built by hand and appended to the prompt:
    up to the reasoning start, the reasoning so far, then (continuing content) the reasoning end
    and the content so far."""
    msg = inputs.continue_msg
    start = analysis.reasoning.start
    if start:
        index = data.generation_prompt.find(start)
        if index >= 0:
            data.generation_prompt = data.generation_prompt[:index]
        data.generation_prompt += start + msg.reasoning_content
        if inputs.continue_final_message == CONTINUATION_CONTENT:
            data.generation_prompt += analysis.reasoning.end
    if inputs.continue_final_message == CONTINUATION_CONTENT:
        data.generation_prompt += render_content(msg)
    data.prompt += data.generation_prompt


def build_parser(analysis: AutoparserAnalysis, inputs: TemplateInputs, gen_prompt: str) -> Arena:
    """``autoparser::build_parser``: the parser arena for ``inputs`` (see the module docstring)."""
    if not analysis.analysis_complete:
        raise LlamaUnsupportedException("Cannot call build_parser on autoparser without performing analysis first, "
                            "call analyze_template(...)")

    def root(p: ChatPegBuilder) -> P:
        # upstream's context starts its reasoning parser as eps(): that node is allocated first
        ctx = BuildContext(p, inputs, analysis, p.eps())
        extract_reasoning = inputs.reasoning_format != "none"
        ctx.extracting_reasoning = extract_reasoning and analysis.reasoning.mode != ReasoningMode.NONE
        ctx.reasoning_parser = _reasoning_parser(ctx)

        parser = p.eps()
        pure_content = analysis.reasoning.mode == ReasoningMode.NONE
        if inputs.has_response_format:
            parser = _response_format_parser(ctx)
            pure_content = False
        elif (inputs.has_tools and inputs.tool_choice != TOOL_CHOICE_NONE
              and analysis.jinja_caps.get("supports_tool_calls", False)):
            parser = build_tools_parser(ctx)
            pure_content = False
        else:
            parser = _content_parser(ctx)
        prefix = p.prefix(gen_prompt, trim_whitespace(analysis.reasoning.start))
        return prefix + parser if pure_content else prefix << parser

    return build_chat_peg_parser(root)


def _reasoning_parser(ctx: BuildContext) -> P:
    """``analyze_reasoning::build_parser``: an optional thought, when reasoning is extracted."""
    p, reasoning = ctx.p, ctx.analysis.reasoning
    if not ctx.extracting_reasoning:
        return p.eps()
    if reasoning.mode in (ReasoningMode.TAG_BASED, ReasoningMode.TOOLS_ONLY) and reasoning.end:
        end = reasoning.end
        body = lambda: p.reasoning(p.until(trim_whitespace(end)))  # noqa: E731 - an operand, made in GCC's order
        if reasoning.start:
            start = reasoning.start
            return p.optional(p.seq_rtl(lambda: p.optspace(start), body, lambda: p.optspace(end)))
        # delimiter style: no start tag, the thought runs from the start of the output
        return p.optional(p.seq_rtl(body, lambda: p.optspace(end)))
    return p.eps()


def _content_parser(ctx: BuildContext) -> P:
    """``analyze_content::build_parser``: the whole output as content (between the markers when wrapped)."""
    p, content = ctx.p, ctx.analysis.content
    if is_always_wrapped(content):
        start, end = content.start, content.end
        if ctx.extracting_reasoning:
            return p.seq_rtl(ctx.reasoning_parser, start, lambda: p.content(p.until(end)), end, p.end)
        return p.seq_rtl(lambda: p.content(p.until(start)), start, lambda: p.content(p.until(end)), end, p.end)
    return p.seq_rtl(ctx.reasoning_parser, lambda: p.content(p.rest()), p.end)


def _response_format_parser(ctx: BuildContext) -> P:
    """The reply as schema-checked JSON content, bare or in a ```json fence."""
    p = ctx.p
    response_format = p.rule("response-format", p.content(
        p.schema(p.json(), "response-format-schema", ctx.inputs.json_schema)))

    def alternatives() -> P:
        # a braced list: its elements are built left to right
        fenced = p.seq_rtl(lambda: p.literal("```json"), p.space, response_format, p.space,
                           lambda: p.literal("```"))
        bare = p.seq_rtl(p.space, response_format, p.space)
        return p.choice([fenced, bare])

    return p.seq_rtl(ctx.reasoning_parser, p.space, alternatives, p.end)
