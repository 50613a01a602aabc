"""The completions family's wire format: a raw completion body read as llama-server reads it, and
the answer in OpenAI's shape (``/v1/completions``).

    call = read_completion(body, defaults)      # CompletionCall; RequestError for a field refused
    body = CompletionBody(id, created, model, fingerprint)
    body.whole(chunks, tokenize, index) / body.events(chunk, index)
    merged(objects)        several prompts not streamed: the first object, every prompt's choice

The body (``/completion``, ``/completions``, ``/v1/completions``, ``/infill``: the native family reads
it here too): the prompts (``wire.prompts``), the sampling fields (``generation_params``), the
constraint (``json_schema`` over ``grammar``) and the native route's own switches. Both shapes read
the same fields at the pin (``eval_llama_cmpl_schema`` serves every route): ``n_probs`` falls back on
``logprobs`` (an integer, or a boolean read as 0 / 1), ``echo``, ``best_of`` and ``suffix`` are taken
and ignored, several prompts give several completions.

The answer, as llama-server writes it (``to_json_oaicompat`` of server-task.cpp): per prompt, one
``text_completion`` object not streamed, or one event per token and a last one with the finish
reason and the usage, from the engine's ``GenerationChunk`` s of each prompt. Several prompts, as
upstream answers them: the choices in prompt order, everything else (the usage too) the first
prompt's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ...engine import GenerationParams
from ...errors import LlamaException
from ...grammar.builder import json_schema_to_grammar
from ...grammar.enforcement import refuse_unenforced
from ...json_types import Json
from ..http.errors import RequestError
from ..wire.logprobs import released_entry, without_stop_entries
from ..wire.prompts import Prompt, read_prompts
from ..wire.request import LENIENT_REMEDY, RequestDefaults, check_grammar, generation_params, read_id_slot

__all__ = ["CompletionBody", "CompletionCall", "completion_usage", "merged", "read_completion"]


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
    id_slot: int = -1           # the slot it asks for (-1: any)


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
                          _flag(body, "timings_per_token"), params.top_logprobs if params.logprobs else 0,
                          read_id_slot(body))


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


# -- the answer, in OpenAI's shape --------------------------------------------------------------------


def completion_usage(last: Any) -> Json:
    """A raw completion's usage from its final chunk (llama-server counts the end token as decoded)."""
    t = last.timings
    n_decoded = t.n_generated + int(last.end_token is not None)
    n_prompt = t.n_prompt + t.n_cached
    return {"completion_tokens": n_decoded, "prompt_tokens": n_prompt, "total_tokens": n_decoded + n_prompt,
            "prompt_tokens_details": {"cached_tokens": t.n_cached}}


class CompletionBody:
    """The JSON objects of one raw completion: ``choice(text, finish, entries)`` with the id, model and
    fingerprint every object repeats."""

    def __init__(self, completion_id: str, created: int, model: str, fingerprint: str) -> None:
        self.base = {"created": created, "model": model, "system_fingerprint": fingerprint,
                     "object": "text_completion", "id": completion_id}

    def choice(self, text: str, finish: str | None, entries: list[Any] | None = None, index: int = 0) -> Json:
        logprobs = {"content": entries} if entries else None
        return {"choices": [{"text": text, "index": index, "logprobs": logprobs, "finish_reason": finish}], **self.base}

    def whole(self, chunks: list[Any], tokenize: Callable[..., list[int]], index: int = 0) -> Json:
        """The answer not streamed, from all the chunks of the generation."""
        last = chunks[-1]
        entries = without_stop_entries(
            [released_entry(c) for c in chunks if c.logprob is not None and not c.incomplete], last.stop_string,
            tokenize)
        body = self.choice("".join(c.text for c in chunks), last.finish_reason, entries, index)
        body["usage"] = completion_usage(last)
        return body

    def events(self, chunk: Any, index: int = 0) -> list[Json]:
        """llama-server's events for one chunk: one per token (its text may be "" while a stop string may
        be starting; none for a token that ends inside a UTF-8 character), one for the end token, then
        the finish reason with the usage."""
        entry = [released_entry(chunk)] if chunk.logprob is not None else None
        if chunk.stop_reason is None:
            return [] if chunk.incomplete else [self.choice(chunk.text, None, entry, index)]
        out = []
        if chunk.end_token is not None or chunk.text:
            out.append(self.choice(chunk.text, None, entry, index))   # the final chunk's entry is the end token's
        final = self.choice("", chunk.finish_reason, None, index)
        final["usage"] = completion_usage(chunk)
        out.append(final)
        return out


def merged(objects: list[Json]) -> Json:
    """Several prompts' objects not streamed, as upstream merges them: the first, with every choice."""
    first = objects[0]
    first["choices"] = [o["choices"][0] for o in objects]
    return first
