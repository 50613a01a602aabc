"""OpenAI request bodies read as llama-server reads them (``oaicompat_chat_params_parse`` in
tools/server/server-common.cpp, and ``params_from_json_cmpl`` for the sampling fields).

    chat_request(body, defaults) -> ChatRequest         create() arguments, stream flags
    completion_request(body, defaults) -> CompletionRequest

What enters: the decoded JSON body and the server's defaults (``ServerSettings``). What leaves: the
keyword arguments of ``LlamaEngine.create()`` / ``generate()`` with a ``GenerationParams``. Bad
fields raise ``RequestError`` (HTTP 400, ``invalid_request_error``), with upstream's message where
upstream has one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from ..engine import GenerationParams
from ..engine.logprobs import MAX_TOP_LOGPROBS, check_top_logprobs
from ..errors import LlamaException
from ..grammar.builder import json_schema_to_grammar

Json = Any

__all__ = ["ChatRequest", "CompletionRequest", "RequestDefaults", "RequestError", "chat_request", "completion_request",
           "generation_params"]


class RequestError(LlamaException):
    """A request the server refuses as it stands (HTTP 400)."""


# llama-server's sampling fields (params_from_json_cmpl) and the GenerationParams field each sets
_FLOAT_FIELDS = {
    "temperature": "temperature", "top_p": "top_p", "min_p": "min_p", "typical_p": "typical_p",
    "top_n_sigma": "top_n_sigma", "xtc_probability": "xtc_probability", "xtc_threshold": "xtc_threshold",
    "dynatemp_range": "dynatemp_range", "dynatemp_exponent": "dynatemp_exponent",
    "repeat_penalty": "repeat_penalty", "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty", "dry_multiplier": "dry_multiplier", "dry_base": "dry_base",
    "mirostat_tau": "mirostat_tau", "mirostat_eta": "mirostat_eta",
}
_INT_FIELDS = {
    "top_k": "top_k", "repeat_last_n": "repeat_last_n", "dry_allowed_length": "dry_allowed_length",
    "dry_penalty_last_n": "dry_penalty_last_n", "mirostat": "mirostat", "min_keep": "min_keep",
}


@dataclass(frozen=True)
class RequestDefaults:
    """What a request gets for the fields it leaves out (the server's command line)."""

    model_name: str = ""
    n_predict: int = -1
    reasoning_format: str = "deepseek"
    enable_thinking: bool = True
    # upstream's default for a request without the field: the template's caps
    parallel_tool_calls: bool = False


@dataclass
class ChatRequest:
    stream: bool
    include_usage: bool
    create_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class CompletionRequest:
    stream: bool   # the usage rides on the last event whatever stream_options says (llama-server's to_json_oaicompat)
    prompt: str | list[int]
    params: GenerationParams


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


def _logit_bias(value: Json) -> dict[int, float]:
    """OpenAI's ``{"token id": bias}`` or llama-server's ``[[id, bias], ...]`` (``false`` bans)."""
    pairs = value.items() if isinstance(value, dict) else value if isinstance(value, list) else None
    if pairs is None:
        raise RequestError("'logit_bias' must be an object of token ids to biases, or a list of [id, bias] pairs")
    bias: dict[int, float] = {}
    for pair in pairs:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise RequestError(f"'logit_bias' entry {pair!r} is not a [token id, bias] pair")
        token, weight = pair
        try:
            token_id = int(token)
        except (TypeError, ValueError):
            raise RequestError(f"'logit_bias' key {token!r} is not a token id") from None
        if weight is False:
            bias[token_id] = float("-inf")
        elif isinstance(weight, (int, float)) and not isinstance(weight, bool):
            bias[token_id] = float(weight)
        else:
            raise RequestError(f"'logit_bias' value for token {token_id} must be a number or false")
    return bias


def _stop(body: Json) -> list[str]:
    stop = body.get("stop")
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return stop
    raise RequestError("'stop' must be a string or a list of strings")


def generation_params(body: Json, defaults: RequestDefaults) -> GenerationParams:
    """The sampling and stopping fields of a chat or completion request."""
    values: dict[str, Any] = {}
    for name, target in _FLOAT_FIELDS.items():
        if body.get(name) is not None:
            values[target] = _number(body, name, float)
    for name, target in _INT_FIELDS.items():
        if body.get(name) is not None:
            values[target] = _number(body, name, int)
    # llama-server: n_predict, else max_tokens, else max_completion_tokens (OpenAI's newer name)
    n_predict = defaults.n_predict
    for name in ("max_completion_tokens", "max_tokens", "n_predict"):
        if body.get(name) is not None:
            n_predict = _number(body, name, int)
    values["max_tokens"] = n_predict if n_predict >= 0 else -1
    if body.get("seed") is not None:
        seed = _number(body, "seed", int)
        values["seed"] = None if seed < 0 else seed   # -1: a random seed, as upstream's LLAMA_DEFAULT_SEED
    if body.get("logit_bias") is not None:
        values["logit_bias"] = _logit_bias(body["logit_bias"])
    if "cache_prompt" in body:
        if not isinstance(body["cache_prompt"], bool):
            raise RequestError("'cache_prompt' must be a boolean")
        values["cache_prompt"] = body["cache_prompt"]
    values["stop"] = _stop(body)
    if body.get("post_sampling_probs") is True:   # probabilities after the sampler chain: not computed here
        raise RequestError("'post_sampling_probs' is not supported: llamact's logprobs are those of the raw "
                           "logits (llama-server's default)")
    if body.get("n_probs") is not None:   # llama-server's own field: each token's top n_probs alternatives
        n_probs = _number(body, "n_probs", int)
        if n_probs > MAX_TOP_LOGPROBS:
            raise RequestError(f"'n_probs' above {MAX_TOP_LOGPROBS} is not supported")
        if n_probs > 0:
            values["logprobs"], values["top_logprobs"] = True, n_probs
    n = body.get("n", 1)
    if n != 1:
        raise RequestError("Only one completion choice is allowed")
    try:
        return GenerationParams(**values)
    except LlamaException as exc:
        raise RequestError(str(exc)) from exc


def _include_usage(body: Json) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise RequestError("'stream_options' must be an object")
    return bool(options.get("include_usage", False))


def _enable_thinking(kwargs: Json, default: bool) -> bool:
    """upstream: ``chat_template_kwargs.enable_thinking`` (a JSON boolean) overrides the server's."""
    value = kwargs.get("enable_thinking")
    if value is None:
        return default
    if not isinstance(value, bool):
        raise RequestError(f'invalid type for "enable_thinking" (expected boolean, got {type(value).__name__})')
    return value


def chat_request(body: Json, defaults: RequestDefaults) -> ChatRequest:
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    if "messages" not in body:
        raise RequestError("'messages' is required")
    if not isinstance(body["messages"], list):
        raise RequestError("Expected 'messages' to be an array")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError("'stream' must be a boolean")
    tools = body.get("tools")
    tool_choice = body.get("tool_choice", "auto")
    if body.get("grammar") is not None and tools and tool_choice != "none":
        raise RequestError("Cannot use custom grammar constraints with tools.")
    response_format = body.get("response_format")
    json_schema = body.get("json_schema")
    if json_schema is not None:
        if body.get("grammar"):
            raise RequestError("Cannot use both json_schema and grammar")
        response_format = {"type": "json_schema", "json_schema": {"schema": json_schema}}
    template_kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(template_kwargs, dict):
        raise RequestError("'chat_template_kwargs' must be an object")
    enable_thinking = _enable_thinking(template_kwargs, defaults.enable_thinking)
    reasoning_effort = body.get("reasoning_effort")
    if reasoning_effort == "none":
        enable_thinking, reasoning_effort = False, None
    budget = body.get("reasoning_budget_tokens", body.get("thinking_budget_tokens"))
    params = generation_params(body, defaults)
    if body.get("grammar"):
        if not isinstance(body["grammar"], str):
            raise RequestError("'grammar' must be a string")
        params = GenerationParams(**{**params.__dict__, "grammar": body["grammar"]})
    params = _with_logprobs(body, params, bool(tools) and stream)
    kwargs: dict[str, Any] = {
        "messages": body["messages"],
        "tools": tools,
        "tool_choice": tool_choice,
        "parallel_tool_calls": body.get("parallel_tool_calls", defaults.parallel_tool_calls),
        "enable_thinking": enable_thinking,
        "reasoning_format": body.get("reasoning_format", defaults.reasoning_format),
        "response_format": response_format,
        "chat_template_kwargs": template_kwargs or None,
        "reasoning_effort": reasoning_effort or None,
        "continue_final_message": body.get("continue_final_message", False),
        "params": params,
        "thinking_budget_tokens": budget,
        "reasoning_budget_message": _string(body, "reasoning_budget_message"),
        "upstream_compat": True,
    }
    return ChatRequest(stream, _include_usage(body), kwargs)


def completion_request(body: Json, defaults: RequestDefaults) -> CompletionRequest:
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        pass
    elif not isinstance(prompt, str) or not prompt:
        raise RequestError("'prompt' must be a non-empty string or a list of token ids")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError("'stream' must be a boolean")
    return CompletionRequest(stream, prompt, replace(generation_params(body, defaults), grammar=_raw_grammar(body)))


def _raw_grammar(body: Json) -> str | None:
    """A raw completion's constraint as llama-server reads it: ``json_schema`` (converted; an empty
    object means any object) unless ``grammar`` is given, else the ``grammar`` string."""
    if "json_schema" in body and "grammar" not in body:
        schema = body["json_schema"]
        if isinstance(schema, dict) and not schema:
            schema = {"type": "object"}
        try:
            return json_schema_to_grammar(schema)
        except LlamaException as exc:
            raise RequestError(f'"json_schema": {exc}') from None
    grammar = body.get("grammar")
    if grammar is not None and not isinstance(grammar, str):
        raise RequestError("'grammar' must be a string")
    return grammar or None


def _with_logprobs(body: Json, params: GenerationParams, tools_and_stream: bool) -> GenerationParams:
    """OpenAI's ``logprobs`` / ``top_logprobs`` as oaicompat_chat_params_parse reads them: ``logprobs:
    true`` asks for ``top_logprobs`` alternatives (20 when absent); not with tools and stream at once."""
    if body.get("logprobs") is True:
        if tools_and_stream:
            raise RequestError("logprobs is not supported with tools + stream")
        top = body.get("top_logprobs")
        top = top if isinstance(top, int) and not isinstance(top, bool) else 20
        try:
            check_top_logprobs(top)
        except LlamaException as exc:
            raise RequestError(str(exc)) from None
        return replace(params, logprobs=True, top_logprobs=top)
    if body.get("top_logprobs") is not None:
        raise RequestError("top_logprobs requires logprobs to be set to true")
    return params


def _string(body: Json, name: str) -> str:
    """json_value(body, name, ""): a string field, "" when absent or not a string."""
    value = body.get(name)
    return value if isinstance(value, str) else ""
