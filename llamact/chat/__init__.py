"""``llamact.chat``: llama.cpp's chat stack (``common/chat``) -- templates in, prompt + grammar + parser out.

    apply_chat_template(template, messages, *, tools=None, tool_choice="auto", ...) -> ChatTemplateResult
    apply_request(templates, ChatRequest(messages, ...)) -> ChatTemplateResult

Enters: a chat template (Jinja source, untrusted: always sandboxed) and an OpenAI-style request, a
:class:`ChatRequest` (messages and tools as dicts, or ``ChatMessage`` / ``ChatTool`` values; the
request's checks run once, when it is made). Leaves: a frozen
:class:`ChatTemplateResult`: the prompt, the detected ``family``, upstream's ``format``, the
grammar and its triggers, preserved tokens, stops, thinking tags and the output parser (its
``output_parser()`` parses the model's reply, whole or as it streams). :class:`ChatStreamParser`
turns the reply, token by token, into content / thinking / tool-call deltas (llama-server's, or
with the deviations 2-5 and 17 of docs/design.md). What llama.cpp v0.5.0's
``common_chat_templates_init`` + ``common_chat_templates_apply`` produce for the same request,
as the parity scoreboard measures; one deliberate extension: a ``tool_choice`` naming a function
(``{"type": "function", "function": {"name": ...}}``) forces an immediate call of it
(``deviations/named_tool.py``, deviation 9), and ``"required"`` is answered with calls alone unless
``upstream_compat`` (``deviations/required_tool.py``, deviation 19). Everything that depends only on
the template (compiled source, caps, format detection, the autoparser's analysis) is computed once
and cached.

Raises ``ChatRequestError`` (a malformed request, upstream's reason), ``JinjaException`` (the
template does not compile or fails to render; names where it came from), ``SchemaError`` /
``LlamaUnsupportedException`` (a response format or template that cannot be supported).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..jinja.caps import TemplateCaps
from .apply import ChatTemplateInputs
from .deltas import ChatDelta, ToolCallDelta, finish_reason
from .messages import ChatMessage, ContentPart, ToolCall
from .oai import ChatRequestError, ChatTool
from .output_parser import ChatOutputParser, ChatParseError
from .pipeline import apply_request, apply_templates
from .request import ChatRequest, as_chat_request, chat_inputs
from .result import ChatTemplateResult, GrammarTrigger, MessageDelimiter
from .streaming import ChatStreamParser
from .templates import ORIGIN_PER_CALL, ChatTemplates, load_chat_templates

__all__ = [
    "ChatDelta", "ChatMessage", "ChatOutputParser", "ChatParseError", "ChatRequest", "ChatRequestError",
    "ChatStreamParser", "apply_request", "as_chat_request",
    "ChatTemplateInputs", "ChatTemplateResult", "ChatTemplates", "ChatTool", "ContentPart", "GrammarTrigger",
    "MessageDelimiter", "ToolCall", "ToolCallDelta", "apply_chat_template", "apply_templates", "chat_inputs",
    "TemplateCaps", "finish_reason", "load_chat_templates", "supports_enable_thinking", "template_capabilities",
]


def apply_chat_template(template: str | ChatTemplates, messages: Any, *, bos_token: str = "", eos_token: str = "",
                        add_bos: bool = False, add_eos: bool = False, **options: Any) -> ChatTemplateResult:
    """Apply ``template`` (Jinja source, or a template set from ``load_chat_templates``) to a request:
    ``messages`` is a :class:`ChatRequest`, or its messages with the request's options as keywords
    (``tools``, ``tool_choice``, ``response_format``, ``template_now``, ...; see ``ChatRequest``).

    No model is needed: ``bos_token`` / ``eos_token`` are what the template sees, ``add_bos`` /
    ``add_eos`` whether the tokenizer adds them (then the rendered prompt drops its own).
    """
    request = as_chat_request(messages, options)
    if request.custom_template:   # a per-call template wins, as everywhere
        template = request.custom_template
    templates = template if isinstance(template, ChatTemplates) else load_chat_templates(
        template, bos_token=bos_token, eos_token=eos_token, add_bos=add_bos, add_eos=add_eos, origin=ORIGIN_PER_CALL)
    return apply_request(templates, request)


def supports_enable_thinking(template: str | ChatTemplates, *, bos_token: str = "", eos_token: str = "") -> bool:
    """Whether ``template`` thinks, and ``enable_thinking`` switches it: upstream's
    ``common_chat_templates_support_enable_thinking``, which asks the apply pipeline (the family's
    builder, or the autoparser's reasoning analysis) with one user message ``"test"``. llama-server
    turns thinking on by default only where this is true.

    Raises what applying the template raises (a template that fails to render).
    """
    result = apply_chat_template(template, [{"role": "user", "content": "test"}], enable_thinking=True,
                                 add_generation_prompt=True, reasoning_format="deepseek",
                                 bos_token=bos_token, eos_token=eos_token)
    return result.supports_thinking


def template_capabilities(template: str | ChatTemplates, *, bos_token: str = "", eos_token: str = "") -> TemplateCaps:
    """What ``template`` supports (the default template of a set): upstream's probed caps (system role,
    tools, tool calls, parallel calls, string and typed content, object arguments, preserved
    reasoning, reasoning effort) and ``supports_thinking``, whether it has thinking channels that
    ``enable_thinking`` switches (:func:`supports_enable_thinking`, the apply pipeline's answer, as
    llama-server's).

    Raises what compiling or applying the template raises.
    """
    templates = template if isinstance(template, ChatTemplates) else load_chat_templates(
        template, bos_token=bos_token, eos_token=eos_token, origin=ORIGIN_PER_CALL)
    return replace(templates.default.caps, supports_thinking=supports_enable_thinking(templates))
