"""The chat family's wire format: a ``/v1/chat/completions`` body read into a ``ChatCall``; the
Responses and Messages bodies are read through it too (``responses.wire``, ``messages.wire``).

    read_chat(body, defaults) -> ChatCall              a ChatRequest, its GenerationParams, stream flags
    check_messages(messages)                           llama-server's checks of the messages, with its words

What enters: the decoded JSON body and the server's defaults (``wire.request.RequestDefaults``), read
as llama-server reads them (``oaicompat_chat_params_parse`` in tools/server/server-common.cpp,
``params_from_json_cmpl`` for the sampling fields). The chat fields are one table of (body field ->
``ChatRequest`` option, reader); the request's own checks (tools with a grammar, json_schema with a
grammar, the ``enable_thinking`` kwarg, ``reasoning_effort: "none"``, ...) run once, in ``ChatRequest``.
The answer is the engine's (``ChatCompletion.to_openai``, ``ChatChunk.to_openai``).

Before the chat parser, the messages get llama-server's own checks (``check_messages``): a
non-assistant message needs ``content``, an assistant one ``content`` or ``tool_calls``, content is a
string, null or a list of parts, and a part is text or a media part the model must be able to take.
Those errors reach a client with llama-server's words ("All non-assistant messages must contain
'content'", "unsupported content[].type"); llamact's parser (``chat.oai``) words the same refusals
its own way, so the server says them first. A media part the model cannot take (no projector, or one
without that modality; video always: mtmd is built without it) is refused with its words, as a 400
where it answers 500 (docs/design.md deviation 12).

Errors: a field the server refuses raises ``RequestError`` (a ``LlamaRequestException``, upstream's
message where upstream has one), answered 400 by ``http.errors``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...chat.request import ChatRequest
from ...engine.logprobs import MAX_TOP_LOGPROBS, check_top_logprobs
from ...errors import LlamaException, LlamaRequestException
from ...json_types import Json
from ..http.errors import RequestError
from ..wire.fields import read_bool
from ..wire.request import ChatCall, RequestDefaults, check_grammar, generation_params, read_id_slot

__all__ = ["MEDIA_REFUSALS", "check_messages", "read_chat"]


# -- the messages' checks ---------------------------------------------------------------------------

_HINT = " input is not supported - hint: if this is unexpected, you may need to provide the mmproj"
MEDIA_REFUSALS = {"image_url": "image" + _HINT, "input_audio": "audio" + _HINT,
                  "input_video": "video" + _HINT, "video_url": "video" + _HINT}


def _role(message: Json) -> str:
    role = message.get("role") if isinstance(message, dict) else None
    return role if isinstance(role, str) else ""


def check_messages(messages: list[Json], *, allow_image: bool = False, allow_audio: bool = False) -> None:
    """Raise ``LlamaRequestException`` (400 on the server) for the first message llama-server refuses;
    ``allow_image`` / ``allow_audio``: the server's projector takes that kind of media part."""
    allowed = {kind for kind, ok in (("image_url", allow_image), ("input_audio", allow_audio)) if ok}
    for message in messages:
        keys = message.keys() if isinstance(message, dict) else ()
        role = _role(message)
        if role != "assistant" and "content" not in keys:
            raise LlamaRequestException("All non-assistant messages must contain 'content'")
        if role == "assistant":
            if "content" not in keys and "tool_calls" not in keys:
                raise LlamaRequestException("Assistant message must contain either 'content' or 'tool_calls'!")
            if "content" not in keys:
                continue
        content = message["content"]
        if content is None or isinstance(content, str):
            continue
        if not isinstance(content, list):
            raise LlamaRequestException("Expected 'content' to be a string or an array")
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            kind = kind if isinstance(kind, str) else ""
            if kind in allowed:
                continue
            if kind in MEDIA_REFUSALS:
                raise LlamaRequestException(MEDIA_REFUSALS[kind])
            if kind != "text":
                raise LlamaRequestException("unsupported content[].type")


# -- field readers ----------------------------------------------------------------------------------


def _number(body: Json, name: str, kind: type) -> Any:
    value = body[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RequestError(f"'{name}' must be a number, got {type(value).__name__}")
    if kind is int:
        if isinstance(value, float) and not value.is_integer():
            raise RequestError(f"'{name}' must be an integer, got {value}")
        return int(value)
    if not math.isfinite(value):
        raise RequestError(f"'{name}' must be a finite number, got {value}")
    return float(value)


def _bool(body: Json, name: str) -> bool:
    if not isinstance(body[name], bool):
        raise RequestError(f"'{name}' must be a boolean")
    return bool(body[name])


def _object(body: Json, name: str) -> Json:
    value = body[name]
    if not isinstance(value, dict):
        raise RequestError(f"'{name}' must be an object")
    return value or None


def _string(body: Json, name: str) -> str:
    if not isinstance(body[name], str):
        raise RequestError(f"'{name}' must be a string")
    return str(body[name])


def _lenient_string(body: Json, name: str) -> str:
    """``json_value(body, name, "")``: a string field, "" when it is not a string."""
    value = body[name]
    return value if isinstance(value, str) else ""


def _as_is(body: Json, name: str) -> Json:
    return body[name]


_DEFAULT = object()   # a reader's answer for a value upstream's json_value() replaces by the default


def _lenient_bool(body: Json, name: str) -> Any:
    """``json_value(body, name, default)`` for a boolean: the default when it is not one."""
    value = body[name]
    return value if isinstance(value, bool) else _DEFAULT


# A chat body's fields that are ChatRequest options: (body field, option, reader). Absent or null
# fields keep the option's default (or the server's, below).
_CHAT_FIELDS: tuple[tuple[str, str, Callable[[Json, str], Any]], ...] = (
    ("tools", "tools", _as_is),
    ("tool_choice", "tool_choice", _as_is),
    ("parallel_tool_calls", "parallel_tool_calls", _lenient_bool),
    ("reasoning_format", "reasoning_format", _string),
    ("response_format", "response_format", _as_is),
    ("chat_template_kwargs", "chat_template_kwargs", _object),
    ("reasoning_effort", "reasoning_effort", _lenient_string),
    ("continue_final_message", "continue_final_message", _as_is),
    ("add_generation_prompt", "add_generation_prompt", _lenient_bool),
    ("grammar", "grammar", _string),
    ("reasoning_budget_message", "reasoning_budget_message", _lenient_string),
    ("thinking_budget_tokens", "thinking_budget_tokens", lambda body, name: _number(body, name, int)),
    ("reasoning_budget_tokens", "thinking_budget_tokens", lambda body, name: _number(body, name, int)),
    # llamact's own: true gives llama-server's exact answer (docs/design.md deviations 2-5 and 17 off)
    ("upstream_compat", "upstream_compat", read_bool),
)


def _stream(body: Json) -> bool:
    return read_bool(body, "stream") if body.get("stream") is not None else False


def _include_usage(body: Json) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise RequestError("'stream_options' must be an object")
    return bool(options.get("include_usage", False))


def _chat_logprobs(body: Json, tools_and_stream: bool) -> dict[str, Any]:
    """OpenAI's ``logprobs`` / ``top_logprobs`` as oaicompat_chat_params_parse reads them: ``logprobs:
    true`` asks for ``top_logprobs`` alternatives (20 when absent); not with tools and stream at once."""
    if body.get("logprobs") is True:
        if tools_and_stream:
            raise RequestError("logprobs is not supported with tools + stream")
        top = body.get("top_logprobs")
        top = top if isinstance(top, int) and not isinstance(top, bool) else MAX_TOP_LOGPROBS
        try:
            check_top_logprobs(top)
        except LlamaException as exc:
            raise RequestError(str(exc)) from None
        return {"logprobs": True, "top_logprobs": top}
    if body.get("top_logprobs") is not None:
        raise RequestError("top_logprobs requires logprobs to be set to true")
    return {}


def _names_a_schema(response_format: Any) -> bool:
    """Whether ``response_format`` carries a schema of its own, which wins over the body's
    ``json_schema`` in llama-server (``oaicompat_chat_params_parse``: a ``json_schema`` format, or a
    ``json_object`` with a ``schema``); a ``text`` format or a bare ``json_object`` leaves it to the body's."""
    return isinstance(response_format, dict) and (
        response_format.get("type") == "json_schema"
        or (response_format.get("type") == "json_object" and "schema" in response_format))


def read_chat(body: Json, defaults: RequestDefaults) -> ChatCall:
    """A ``/v1/chat/completions`` (or ``/apply-template``) body."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    if "messages" not in body:
        raise RequestError("'messages' is required")
    if not isinstance(body["messages"], list):
        raise RequestError("Expected 'messages' to be an array")
    check_messages(body["messages"], allow_image=defaults.allow_image, allow_audio=defaults.allow_audio)
    stream = _stream(body)
    options: dict[str, Any] = {"parallel_tool_calls": defaults.parallel_tool_calls,
                               "reasoning_format": defaults.reasoning_format,
                               "enable_thinking": defaults.enable_thinking,
                               # --upstream-compat: llama-server's events, deltas and errors (the
                               # default: create()'s, deviations 2-5 and 17)
                               "upstream_compat": defaults.upstream_compat,
                               # --lenient-schemas: the server checked the schema its way (wire/request.py)
                               "lenient_schema": defaults.lenient_schemas}
    for name, option, read in _CHAT_FIELDS:
        if body.get(name) is not None:
            value = read(body, name)
            if value is not _DEFAULT:
                options[option] = value
    if defaults.template_kwargs:
        options["chat_template_kwargs"] = {**defaults.template_kwargs, **(options.get("chat_template_kwargs") or {})}
    if body.get("json_schema") is not None and not _names_a_schema(body.get("response_format")):
        # llama-server's own field: a schema for the reply, unless response_format names one itself
        options["response_format"] = {"type": "json_schema", "json_schema": {"schema": body["json_schema"]}}
    params = generation_params(body, defaults)
    if options.get("grammar"):
        check_grammar(options["grammar"], engine=params.grammar_engine)
    options.update(_chat_logprobs(body, bool(body.get("tools")) and stream))
    return ChatCall(ChatRequest(body["messages"], **options), params, stream, _include_usage(body),
                    read_id_slot(body))
