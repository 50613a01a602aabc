"""The chat verbs every runtime offers the same way, written once over ``ChatBackend``.

    params, options = chat_keywords(params, options)     # create()'s keywords: sampling vs request
    complete_chat(backend, messages, params, options)     # create() run to its end
    create_structured(backend, messages, output, params, options)
    takes_tools(backend, custom_template=None) -> bool    the template has a tool-call format
    refuse_uncallable(request, result, templates)          "required" without one: LlamaUnsupportedException

What enters: a runtime (``LlamaEngine``, ``LitertEngine``, ``BatchScheduler``) and a chat call's
arguments. What leaves: what the runtime's ``create()`` gives, collected or validated. Each runtime's
method of the same name is one line over these (composition: no runtime inherits another's).
Raises ``ChatRequestError`` for a keyword that is neither a request option nor a sampling setting,
and for ``GenerationParams.grammar`` in a chat request (the request's ``grammar`` is its channel).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from ..chat.oai import ChatRequestError
from ..chat.request import REQUEST_OPTIONS, ChatRequest, as_chat_request
from ..chat.result import ChatTemplateResult
from ..chat.templates import ChatTemplates
from ..chat.tool_format import LIBRARY_REMEDY, cannot_call
from ..errors import LlamaException, LlamaUnsupportedException
from .backend import ChatBackend
from .chat_types import ChatCompletion
from .params import (
    CHAT_REQUEST_OWNED,
    GENERATION_FIELDS,
    GenerationParams,
    split_sampling_keywords,
    with_sampling_keywords,
)

__all__ = ["chat_keywords", "check_chat_params", "complete_chat", "create_structured", "refuse_uncallable",
           "takes_tools"]

_PROBE_TOOL = {"type": "function", "function": {"name": "probe", "parameters": {"type": "object", "properties": {}}}}


def chat_keywords(params: GenerationParams | None, options: dict[str, Any]) -> tuple[GenerationParams | None,
                                                                                  dict[str, Any]]:
    """A chat call's keywords as (its generation settings, the request's options): the sampling
    shortcut (``GenerationParams`` fields the request does not own) set over ``params``."""
    sampling, rest = split_sampling_keywords(options, CHAT_REQUEST_OWNED)
    unknown = [name for name in rest if name not in REQUEST_OPTIONS]
    if "stream" in unknown:
        raise ChatRequestError("create() always streams and complete_chat() returns the whole reply: drop stream= "
                               "(llamact.compat.Llama.create_chat_completion takes it, as llama-cpp-python)",
                               {"option": "stream"})
    if unknown:   # the nearest name among both kinds of keyword
        close = difflib.get_close_matches(unknown[0], sorted(REQUEST_OPTIONS | GENERATION_FIELDS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else " (see ChatRequest's and GenerationParams' fields)"
        raise ChatRequestError(f"{unknown[0]!r} is not an option of a chat request nor a sampling setting{hint}",
                               {"option": unknown[0]})
    params = with_sampling_keywords(params, sampling) if sampling else params
    check_chat_params(params)
    return params, rest


def check_chat_params(params: GenerationParams | None) -> None:
    """A chat request's grammar is its own option; ``GenerationParams.grammar`` is for raw prompts
    (``generate`` / ``complete``) and would otherwise be dropped without a word."""
    if params is not None and params.grammar:
        raise ChatRequestError("a chat request's grammar is its own option: create(messages, grammar=...); "
                               "GenerationParams.grammar is for raw prompts (generate, complete)",
                               {"option": "grammar"})


def complete_chat(backend: ChatBackend, messages: Any, params: GenerationParams | None,
                  options: dict[str, Any]) -> ChatCompletion:
    """``backend.create()`` run to its end: the whole reply (message, finish reason, usage, timings)."""
    with backend.create(messages, params=params, **options) as stream:
        return stream.completion()


def create_structured(backend: ChatBackend, messages: Any, output: Any, params: GenerationParams | None,
                      options: dict[str, Any]) -> Any:
    """The reply constrained to ``output``'s schema, returned as an ``output`` value (see
    ``llamact.engine.structured``)."""
    from .structured import response_format_for, validate_output

    params, options = chat_keywords(params, options)
    request = as_chat_request(messages, {**options, "response_format": response_format_for(output)})
    reply = complete_chat(backend, request, params, {})
    return validate_output(output, reply.content, reply.finish_reason)


def takes_tools(backend: ChatBackend, custom_template: str | None = None) -> bool:
    """Whether a request's tools reach the model as something it can call: the template renders a
    tool-call format (a grammar for one tool). Templates without one render the conversation and drop
    the tools (SmolLM2's, Gemma 3's); every entry point refuses a demanded call through them
    (``chat/tool_format.py``). A template that fails on tools answers True: its requests say how."""
    options = {"custom_template": custom_template} if custom_template is not None else {}
    try:
        result = backend.chat_template([{"role": "user", "content": "Hi"}], tools=[_PROBE_TOOL], tool_choice="auto",
                                       **options)
    except LlamaException:
        return True
    return bool(result.grammar)


def refuse_uncallable(request: ChatRequest, result: ChatTemplateResult,
                      templates: Callable[[], ChatTemplates]) -> None:
    """Raise ``LlamaUnsupportedException`` when ``request`` demands a call (``"required"``) that
    ``result`` cannot constrain: its template has no tool-call format, so upstream rendered no grammar.
    (A named function is refused where it is forced, ``deviations/named_tool.py``.) ``templates``
    gives the request's template set, asked only to name it."""
    inputs = request.inputs
    if not inputs.tools or inputs.tool_choice != "required" or inputs.named_tool is not None:
        return
    if not result.grammar and not request.grammar:
        origin = templates().for_request(True).origin
        raise LlamaUnsupportedException(
            cannot_call(f"the chat template from {origin}", 'is "required"', LIBRARY_REMEDY),
            {"origin": origin, "family": result.family, "tool_choice": "required"})
