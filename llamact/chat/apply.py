"""The apply pipeline (upstream's ``common_chat_templates_apply`` on its Jinja path, chat.cpp).

    ChatTemplateInputs                      one request, upstream's ``common_chat_templates_inputs``
    upstream_apply(templates, inputs) -> ChatTemplateResult

(``llamact.chat.pipeline.apply_templates`` is the entry point: this, or the named tool choice of
deviation 9 on top of it.)

Upstream's order: tools to OpenAI JSON and the template chosen (tool_use variant when there are
tools); StepFun's content trimming; messages to OpenAI JSON with the content normalised for the
template's caps; continuation (the last message taken out and continued); the workarounds
(developer -> system except GPT-OSS, system merge, ``content: ""``, object arguments); the extra
context (date variables, ``chat_template_kwargs``); the tools + grammar conflict; then the format:
``force_pure_content``, else the first specialized family that matches the source, else the
differential autoparser.

Raises ``ChatRequestError`` (malformed request, upstream's reason), ``JinjaException`` (the
template failed; names its origin), ``SchemaError`` (a response schema outside the subset),
``LlamaUnsupportedException`` (no parser can be built for the template).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..grammar.json_value import normalize
from ..json_types import Json
from . import specialized
from .deviations.translate_gemma import add_language_codes, reads_language_codes
from .json_text import JsonParseError, parse_json
from .messages import ChatMessage
from .oai import ChatRequestError, ChatTool, messages_to_json, tools_to_json
from .peg_builder import build_chat_peg_parser
from .render import (
    CONTINUATION_AUTO,
    CONTINUATION_CONTENT,
    CONTINUATION_NONE,
    CONTINUATION_REASONING,
    REASONING_FORMATS,
    TOOL_CHOICE_NONE,
    TemplateInputs,
    direct_apply,
    extra_context,
    generation_prompt,
)
from .result import FORMAT_PEG_NATIVE, ChatParams, ChatTemplateResult
from .templates import ChatTemplates
from .workarounds import (
    map_developer_role_to_system,
    parse_string_arguments,
    require_non_null_content,
    system_message_not_supported,
    trim_all_content,
)

__all__ = ["FAMILY_AUTOPARSER", "FAMILY_PURE_CONTENT", "ChatTemplateInputs", "upstream_apply"]

FAMILY_AUTOPARSER = "autoparser"
FAMILY_PURE_CONTENT = "pure_content"

_STEPFUN_SIGNATURE = "You have access to the following functions in JSONSchema format"


@dataclass(frozen=True)
class ChatTemplateInputs:
    """One request (upstream's ``common_chat_templates_inputs``).

    ``messages`` / ``tools`` are already typed (see ``oai.parse_messages`` / ``parse_tools``);
    ``json_schema`` is a JSON value or JSON text (None: no response format);
    ``chat_template_kwargs`` maps names to JSON values; ``continue_final_message`` is "none",
    "auto", "content" or "reasoning_content"; ``now`` fixes the template clock (None: wall clock).
    ``named_tool`` is the function a named ``tool_choice`` forces (docs/design.md deviation 9; it replaces
    ``tool_choice``); None keeps upstream's behaviour. ``required_calls_only``: a ``"required"`` choice
    gets a grammar of calls alone (deviation 19; ``ChatRequest`` sets it unless ``upstream_compat``).
    """

    messages: tuple[ChatMessage, ...] = ()
    tools: tuple[ChatTool, ...] = ()
    tool_choice: str = "auto"
    parallel_tool_calls: bool = False
    reasoning_format: str = "none"
    enable_thinking: bool = True
    add_generation_prompt: bool = True
    json_schema: Json = None
    grammar: str = ""
    chat_template_kwargs: Mapping[str, Json] = field(default_factory=dict)
    continue_final_message: str = CONTINUATION_NONE
    force_pure_content: bool = False
    now: float | None = None
    named_tool: str | None = None
    required_calls_only: bool = False


def _schema(value: Json) -> Json:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            return parse_json(value)
        except JsonParseError as exc:
            raise ChatRequestError("json_schema is not valid JSON: " + exc.message) from None
    return normalize(value)


def _kwargs(kwargs: Mapping[str, Json]) -> dict[str, Json]:
    try:
        return {str(k): normalize(v) for k, v in sorted(kwargs.items())}
    except Exception as exc:  # noqa: BLE001 - a non-JSON kwarg value is the caller's error
        raise ChatRequestError(f"chat_template_kwargs values must be JSON values: {exc}") from None


def _check(inputs: ChatTemplateInputs) -> None:
    if inputs.reasoning_format not in REASONING_FORMATS:
        raise ChatRequestError(f"Unknown reasoning format: {inputs.reasoning_format}")
    if inputs.tool_choice not in ("auto", "required", "none"):
        raise ChatRequestError(f"Invalid tool_choice: {inputs.tool_choice}")
    if inputs.continue_final_message not in (CONTINUATION_NONE, CONTINUATION_AUTO, CONTINUATION_CONTENT,
                                             CONTINUATION_REASONING):
        raise ChatRequestError(f"Invalid continue_final_message: {inputs.continue_final_message!r}")


def upstream_apply(templates: ChatTemplates, inputs: ChatTemplateInputs) -> ChatTemplateResult:
    """Upstream's ``common_chat_templates_apply`` (``named_tool`` and ``required_calls_only`` are not
    looked at: deviations 9 and 19 are ``chat.pipeline``'s, on top of this)."""
    _check(inputs)
    tools = tools_to_json(list(inputs.tools))
    tmpl = templates.for_request(tools is not None)
    src = tmpl.source
    caps = tmpl.caps
    to_render = list(inputs.messages)
    if _STEPFUN_SIGNATURE in src:
        to_render = trim_all_content(to_render)
    messages = messages_to_json(to_render, caps.supports_string_content, caps.supports_typed_content)

    params = TemplateInputs(
        messages=messages, tools=tools, tool_choice=inputs.tool_choice, reasoning_format=inputs.reasoning_format,
        enable_thinking=inputs.enable_thinking, grammar=inputs.grammar, now=inputs.now,
        add_generation_prompt=inputs.add_generation_prompt, add_bos=templates.add_bos, add_eos=templates.add_eos,
        continue_final_message=inputs.continue_final_message, parallel_tool_calls=inputs.parallel_tool_calls)

    if params.continue_final_message != CONTINUATION_NONE:
        params.add_generation_prompt = False
        if inputs.messages:
            params.continue_msg = inputs.messages[-1]
            del messages[-1]
        if params.continue_final_message == CONTINUATION_AUTO and inputs.messages:
            last = params.continue_msg
            only_reasoning = bool(last.reasoning_content) and not last.content and not last.content_parts
            params.continue_final_message = CONTINUATION_REASONING if only_reasoning else CONTINUATION_CONTENT

    if "<|channel|>" not in src:
        map_developer_role_to_system(messages)
    if not caps.supports_system_role:
        system_message_not_supported(messages)
    if caps.supports_tool_calls:
        require_non_null_content(messages)
    if caps.supports_object_arguments:
        parse_string_arguments(messages)

    params.extra_context = extra_context(inputs.now, _kwargs(inputs.chat_template_kwargs))
    if reads_language_codes(src):   # TranslateGemma: deviation 18 (upstream renders no languages)
        add_language_codes(messages, params.extra_context)
    params.json_schema = _schema(inputs.json_schema)

    if tools is not None and params.tool_choice != TOOL_CHOICE_NONE and params.grammar:
        raise ChatRequestError("Cannot specify grammar with tools")

    if inputs.force_pure_content:
        return ChatTemplateResult.from_params(_pure_content(tmpl, params), FAMILY_PURE_CONTENT)

    family = specialized.detect(src)
    if family is not None:
        return ChatTemplateResult.from_params(family.build(tmpl, params), family.family)

    from .autoparser import apply_autoparser

    return ChatTemplateResult.from_params(apply_autoparser(tmpl, params), FAMILY_AUTOPARSER)


def _pure_content(tmpl: Any, params: TemplateInputs) -> ChatParams:
    """``force_pure_content``: the prompt rendered without reasoning handling, the whole output as content."""
    data = ChatParams()
    data.prompt = direct_apply(tmpl, params.copy(reasoning_format="none"))
    data.generation_prompt = generation_prompt(tmpl, params)
    data.format = FORMAT_PEG_NATIVE
    gen = data.generation_prompt
    data.parser = build_chat_peg_parser(lambda p: p.literal(gen) << p.content(p.rest()))
    return data
