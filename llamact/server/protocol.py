"""The server's wire format: HTTP bodies read into requests, results written as llama-server's JSON.

    read_chat(body, defaults) -> ChatCall              a ChatRequest, its GenerationParams, stream flags
    (raw completion bodies: ``server.completion_body``; their answers: ``oai_completion``, ``native_completion``)
    error_body(message, kind, code) / exception_response(exc)     llama-server's error shape

What enters: the decoded JSON body and the server's defaults (``ServerSettings``), read as llama-server
reads them (``oaicompat_chat_params_parse`` in tools/server/server-common.cpp, ``params_from_json_cmpl``
for the sampling fields). The chat fields are one table of (body field -> ``ChatRequest`` option,
reader); the request's own checks (tools with a grammar, json_schema with a grammar, the
``enable_thinking`` kwarg, ``reasoning_effort: "none"``, ...) run once, in ``ChatRequest``.

What leaves: ``ChatCall``; responses in OpenAI's shape. Errors: a field the server
refuses raises ``RequestError`` (a ``LlamaRequestException``, upstream's message where upstream has
one); ``exception_response`` answers as llama-server does (``error_kind``): a request error or an
unsupported request 400 ``invalid_request_error``, a prompt that does not fit 400
``exceed_context_size_error``, anything else 500 ``server_error``. A grammar that does not parse or is
over a limit (``grammar.limits``) is the request's fault, wherever it was made: 400.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi.responses import JSONResponse

from ..chat.request import ChatRequest
from ..engine import GenerationParams
from ..engine.grammar_engines import grammar_limits_for
from ..engine.logprobs import MAX_TOP_LOGPROBS, check_top_logprobs
from ..errors import (
    LlamaContextException,
    LlamaException,
    LlamaInferenceException,
    LlamaRequestException,
    LlamaUnsupportedException,
)
from ..grammar.enforcement import refuse_unenforced
from ..grammar.gbnf import GbnfError
from ..grammar.limits import GrammarLimitError, check_grammar_limits
from .fields import Vocabulary, read_bool, read_number, sampling_fields
from .message_checks import check_messages

Json = Any
log = logging.getLogger("llamact.server")

__all__ = ["LENIENT_REMEDY", "ChatCall", "RequestDefaults", "RequestError", "check_grammar", "error_body",
           "error_response", "exception_response", "generation_params", "read_chat", "refuse_unenforced_schema",
           "released_entry", "without_stop_entries"]


class RequestError(LlamaRequestException):
    """A request the server refuses as it stands (HTTP 400, or ``status``: 413 too large, 415 not JSON)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class RequestDefaults:
    """What a request gets for the fields it leaves out (the server's command line)."""

    model_name: str = ""
    n_predict: int = -1
    reasoning_format: str = "deepseek"
    enable_thinking: bool = True
    # upstream's default for a request without the field: the template's caps
    parallel_tool_calls: bool = False
    # accept a response schema with keywords the grammar cannot enforce (llama-server's way)
    lenient_schemas: bool = False
    # the model's vocabulary, for the fields that need it (logit_bias text, ignore_eos); the slots
    # (llama-server's bound on a request's n)
    vocabulary: Vocabulary | None = None
    n_parallel: int = 1
    # the server's sampling defaults (``ServerSettings.sampling_defaults``: --temp, --top-k, ...) and
    # the variables every template sees (--chat-template-kwargs; a request's own win)
    sampling: Mapping[str, Any] = field(default_factory=dict)
    template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    # media content parts the model takes (its projector's: --mmproj)
    allow_image: bool = False
    allow_audio: bool = False
    # a request's "speculative.types" as llama-server reports it ("none" without speculation)
    speculative_types: str = "none"


LENIENT_REMEDY = "start the server with --lenient-schemas to ignore it as llama-server does"


@dataclass(frozen=True)
class ChatCall:
    """A chat completion body: the request, its generation settings, how to answer."""

    request: ChatRequest
    params: GenerationParams
    stream: bool
    include_usage: bool


# -- errors ---------------------------------------------------------------------------------------


def error_body(message: str, kind: str, code: int) -> Json:
    return {"error": {"code": code, "message": message, "type": kind}}


def error_response(message: str, kind: str = "invalid_request_error", code: int = 400) -> JSONResponse:
    return JSONResponse(error_body(message, kind, code), status_code=code)


def error_kind(exc: BaseException) -> tuple[str, int]:
    """llama-server's error type and status for a request that failed (``ex_wrapper``: its
    ``std::invalid_argument`` is 400, any other exception 500). A malformed request, and one asking for
    what the template or the schema converter cannot do (upstream's converter and autoparser throw
    ``invalid_argument`` there), are 400 ``invalid_request_error``; a prompt too long 400
    ``exceed_context_size_error``; everything else -- a template that fails to render in a family's
    handler, a failed decode, a bug -- 500 ``server_error``. A ``RecursionError`` (a body nested
    deeper than some code below can follow) is 400 too. (llama-server's 501 says a server lacks a
    route's capability; a route answers that itself.)"""
    if isinstance(exc, RequestError):
        return "unavailable_error" if exc.status == 503 else "invalid_request_error", exc.status
    if isinstance(exc, LlamaInferenceException) and exc.details.get("sampler") == "Grammar" \
            and exc.message.startswith("llama.cpp rejected"):   # a grammar it refuses ("a"**: left recursion)
        return "invalid_request_error", 400
    if isinstance(exc, (LlamaRequestException, LlamaUnsupportedException, GbnfError, RecursionError)):
        return "invalid_request_error", 400
    if isinstance(exc, LlamaContextException):
        return "exceed_context_size_error", 400
    return "server_error", 500


def exception_response(exc: BaseException) -> JSONResponse:
    """The answer to a request that failed before its first event (see the module docstring)."""
    kind, code = error_kind(exc)
    if isinstance(exc, RecursionError):   # the last line of defence behind the body's depth limit
        return error_response("the request is nested too deeply for the server to read it", kind, code)
    if not isinstance(exc, LlamaException):
        log.exception("request failed", exc_info=exc)
        return error_response(f"{type(exc).__name__}: {exc}", kind, code)
    return error_response(str(exc), kind, code)


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
)


def generation_params(body: Json, defaults: RequestDefaults) -> GenerationParams:
    """The sampling and stopping fields of a chat or completion body, through llama-server's field
    table (``server.fields``: types, clamps and hard limits as upstream has them)."""
    values = sampling_fields(body, defaults.vocabulary, defaults.n_parallel)
    n_predict = values.pop("max_tokens", defaults.n_predict)
    values["max_tokens"] = n_predict if n_predict >= 0 else -1
    if body.get("post_sampling_probs") is True:   # probabilities after the sampler chain: not computed here
        raise RequestError("'post_sampling_probs' is not supported: llamact's logprobs are those of the raw "
                           "logits (llama-server's default)")
    if body.get("n_probs") is not None:   # llama-server's own field: each token's top n_probs alternatives
        n_probs = int(read_number(body, "n_probs", "int"))
        if n_probs > MAX_TOP_LOGPROBS:
            raise RequestError(f"'n_probs' above {MAX_TOP_LOGPROBS} is not supported")
        if n_probs > 0:
            values["logprobs"], values["top_logprobs"] = True, n_probs
    try:
        return GenerationParams(**{**defaults.sampling, **values})
    except LlamaException as exc:
        raise RequestError(str(exc)) from exc


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


def check_grammar(text: str, field: str = "grammar", engine: str = "llama") -> str:
    """A grammar from a request, checked before any generation: llama-server answers one that does not
    parse with 400 ("Failed to parse grammar"); llamact's front end says where, and refuses one over
    the server's grammar limits (``grammar.limits``) with the limit's name -- those of the grammar
    engine the request's ``grammar_engine`` picks (``engine.grammar_engines.grammar_limits_for``)."""
    try:
        check_grammar_limits(text, grammar_limits_for(engine))
    except GrammarLimitError as exc:
        raise RequestError(f"'{field}': {exc}") from None
    except GbnfError as exc:
        raise RequestError(f"Failed to parse grammar ('{field}'): {exc}") from None
    return text


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
                               "upstream_compat": True}   # llama-server's events, deltas and all
    for name, option, read in _CHAT_FIELDS:
        if body.get(name) is not None:
            value = read(body, name)
            if value is not _DEFAULT:
                options[option] = value
    if defaults.template_kwargs:
        options["chat_template_kwargs"] = {**defaults.template_kwargs, **(options.get("chat_template_kwargs") or {})}
    if body.get("json_schema") is not None:   # llama-server's own field: a schema for the reply
        options["response_format"] = {"type": "json_schema", "json_schema": {"schema": body["json_schema"]}}
    params = generation_params(body, defaults)
    if options.get("grammar"):
        check_grammar(options["grammar"], engine=params.grammar_engine)
    options.update(_chat_logprobs(body, bool(body.get("tools")) and stream))
    return ChatCall(ChatRequest(body["messages"], **options), params, stream, _include_usage(body))


def refuse_unenforced_schema(request: ChatRequest, defaults: RequestDefaults) -> None:
    """Deviation 8 on the server: a generation whose response schema the grammar cannot hold is
    refused (400) unless the server was started lenient."""
    if not defaults.lenient_schemas:
        refuse_unenforced(request.inputs.json_schema, LENIENT_REMEDY)


# -- responses --------------------------------------------------------------------------------------


def without_stop_entries(entries: list[Any], stop_string: str | None,
                         tokenize: Callable[..., list[int]]) -> list[Any]:
    """A reply not streamed that a stop string ended: llama-server leaves out as many logprobs entries
    as the stop string has tokens, whatever tokens the model actually used."""
    if not entries or stop_string is None:
        return entries
    n_stop = len(tokenize(stop_string, add_special=False, parse_special=False))
    return entries[:max(0, len(entries) - n_stop)]


def released_entry(chunk: Any) -> Json:
    """A raw completion's logprobs entry as llama-server writes it: the sampled token's ``token`` and
    ``bytes`` are the text its event released (a whole character for a token that completed one, ""
    while a stop string may be starting), its alternatives their own pieces."""
    entry = chunk.logprob.to_openai()
    entry["token"], entry["bytes"] = chunk.text, list(chunk.text.encode("utf-8"))
    return entry
