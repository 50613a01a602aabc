"""A raw completion body (``/completion``, ``/completions``, ``/v1/completions``, ``/infill``) read as
llama-server reads it: the prompts (``server.prompts``), the sampling fields (``generation_params``),
the constraint (``json_schema`` over ``grammar``) and the native route's own switches.

    call = read_completion(body, defaults)      # CompletionCall; RequestError for a field refused

Both shapes read the same fields at the pin (``eval_llama_cmpl_schema`` serves every route): ``n_probs``
falls back on ``logprobs`` (an integer, or a boolean read as 0 / 1), ``echo``, ``best_of`` and
``suffix`` are taken and ignored, several prompts give several completions.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..engine import GenerationParams
from ..errors import LlamaException
from ..grammar.builder import json_schema_to_grammar
from ..grammar.enforcement import refuse_unenforced
from .prompts import Prompt, read_prompts
from .protocol import LENIENT_REMEDY, RequestDefaults, RequestError, check_grammar, generation_params

Json = Any

__all__ = ["CompletionCall", "read_completion"]


@dataclass(frozen=True)
class CompletionCall:
    """A raw completion body. In OpenAI's shape the usage rides on the last event whatever
    ``stream_options`` says (llama-server's ``to_json_oaicompat``)."""

    prompts: list[Prompt]
    params: GenerationParams
    stream: bool
    body: Json                  # the fields as sent: ``generation_settings`` echoes some of them
    return_tokens: bool = False
    timings_per_token: bool = False
    n_probs: int = 0


def _flag(body: Json, name: str) -> bool:
    """A boolean field (null: absent); another type is the request's error, as upstream's get<bool>."""
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise RequestError(f"'{name}' must be a boolean")
    return value


def read_completion(body: Json, defaults: RequestDefaults) -> CompletionCall:
    """A raw completion body (see the module docstring)."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    if "prompt" not in body:
        raise RequestError("'prompt' is required")
    prompts = read_prompts(body["prompt"])
    if body.get("n_probs") is None and body.get("logprobs") is not None:   # server-schema.cpp: an alias
        logprobs = body["logprobs"]
        body = {**body, "n_probs": int(logprobs) if isinstance(logprobs, bool) else logprobs}
    params = generation_params(body, defaults)
    params = replace(params, grammar=_raw_grammar(body, defaults, params.grammar_engine))
    return CompletionCall(prompts, params, _flag(body, "stream"), body, _flag(body, "return_tokens"),
                          _flag(body, "timings_per_token"), params.top_logprobs if params.logprobs else 0)


def _raw_grammar(body: Json, defaults: RequestDefaults, engine: str) -> str | None:
    """A raw completion's constraint as llama-server reads it: ``json_schema`` (converted; an empty
    object means any object) unless ``grammar`` is given, else the ``grammar`` string."""
    if "json_schema" in body and "grammar" not in body:
        schema = body["json_schema"]
        if isinstance(schema, dict) and not schema:
            schema = {"type": "object"}
        try:
            if not defaults.lenient_schemas:
                refuse_unenforced(schema, LENIENT_REMEDY)
            return json_schema_to_grammar(schema)
        except LlamaException as exc:
            raise RequestError(f'"json_schema": {exc}') from None
    grammar = body.get("grammar")
    if grammar is None:
        return None
    if not isinstance(grammar, str):
        raise RequestError("'grammar' must be a string")
    return check_grammar(grammar, engine=engine) if grammar else None
