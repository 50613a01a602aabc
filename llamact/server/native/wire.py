"""A raw completion in llama-server's own shape (``/completion``, ``/completions``, ``/infill``), as
``to_json_non_oaicompat`` of tools/server/server-task.cpp writes it.

    answer = NativeCompletion(index, model, prompt_text, n_prompt, settings)
    answer.events(chunk)            streamed: one object per token, then the final object
    answer.whole(chunks, tokenize)  not streamed: the final object with the text, tokens, probabilities
    settings = generation_settings(call, defaults)    the request's ``task_params::to_json()``

A token's object has ``content``, ``tokens`` (its id, always), ``stop: false``, ``id_slot: -1``
(upstream never sets it on a partial result), the counts, and ``completion_probabilities`` with
``n_probs``; a token that ends inside a UTF-8 character has none. The final object has
``stop: true``, the slot, the model, ``generation_settings``, the prompt as text (special tokens
rendered), ``stop_type`` / ``stopping_word``, ``tokens_cached`` (what the slot's KV cache holds: the
prompt and every generated token but the last, which is sampled and never evaluated) and the
timings; streamed, its ``content`` and ``tokens`` are empty (they went in the token objects).
``tokens`` lists the generated ids, the end token included, only with ``return_tokens``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..engine import GenerationParams
from ..engine.decode import GenerationChunk, StopReason, Timings
from .completion_body import CompletionCall
from .props import default_params, f32
from .protocol import RequestDefaults, released_entry, without_stop_entries

Json = Any

__all__ = ["NativeCompletion", "generation_settings", "timings_json"]

STOP_TYPES = {StopReason.EOG: "eos", StopReason.STOP_STRING: "word", StopReason.MAX_TOKENS: "limit",
              StopReason.CONTEXT_FULL: "limit", StopReason.CANCELLED: "none"}
DRY_SEQUENCE_BREAKERS = ["\n", ":", '"', "*"]   # common_params_sampling's


def generation_settings(call: CompletionCall, defaults: RequestDefaults) -> Json:
    """``task_params::to_json()`` for this request: the sampling values it runs with, the stop strings,
    the bias, the grammar and the chat parser fields a raw completion keeps (the server's reasoning
    format unless the body names one)."""
    p: GenerationParams = call.params
    body = call.body
    n_predict = p.max_tokens   # the request's n_predict / max_tokens, else the server's (-1: no limit)
    settings = default_params(p, n_predict)
    reasoning = body.get("reasoning_format")
    settings.update({
        "max_tokens": n_predict, "n_predict": n_predict,
        "stream": call.stream, "n_probs": call.n_probs, "timings_per_token": call.timings_per_token,
        "dry_sequence_breakers": DRY_SEQUENCE_BREAKERS,
        "stop": [s for s in ([p.stop] if isinstance(p.stop, str) else p.stop) if s],
        "logit_bias": [{"bias": f32(bias), "token": token} for token, bias in p.logit_bias.items()],
        "grammar": p.grammar or "", "grammar_lazy": False, "grammar_triggers": [], "preserved_tokens": [],
        "reasoning_format": reasoning if isinstance(reasoning, str) else defaults.reasoning_format,
        "speculative.types": defaults.speculative_types,
    })
    for name in ("n_keep", "n_discard"):
        if isinstance(body.get(name), int):
            settings[name] = body[name]
    return settings


def timings_json(t: Timings, n_decoded: int) -> Json:
    """``server_slot_stats::to_json``: the first generated token is free (the prompt's last logits)."""
    steps = max(0, n_decoded - 1)
    out = {
        "cache_n": t.n_cached,
        "prompt_n": t.n_prompt, "prompt_ms": t.prompt_ms,
        "prompt_per_token_ms": t.prompt_ms / t.n_prompt if t.n_prompt else 0.0,
        "prompt_per_second": 1e3 / t.prompt_ms * t.n_prompt if t.prompt_ms > 0 else 0.0,
        "predicted_n": n_decoded, "predicted_ms": t.decode_ms,
        "predicted_per_token_ms": t.decode_ms / steps if steps else 0.0,
        "predicted_per_second": 1e3 / t.decode_ms * steps if t.decode_ms > 0 else 0.0,
    }
    if t.n_draft > 0:   # speculative decoding, as server_slot_stats::to_json adds them
        out.update(draft_n=t.n_draft, draft_n_accepted=t.n_draft_accepted)
    return out


class NativeCompletion:
    """One prompt's objects (see the module docstring); ``events`` counts the tokens it has seen."""

    def __init__(self, index: int, model: str, prompt_text: Callable[[], str], n_prompt: Callable[[], int],
                 settings: Json, *, return_tokens: bool = False, timings_per_token: bool = False) -> None:
        self.index = index
        self.model = model
        self.prompt_text = prompt_text     # known once the worker has tokenized the prompt
        self.n_prompt = n_prompt
        self.settings = settings
        self.return_tokens = return_tokens
        self.timings_per_token = timings_per_token
        self.n_decoded = 0
        self._has_new_line = False

    def _token(self, text: str, tokens: list[int], entry: Json | None, chunk: GenerationChunk) -> Json:
        out: Json = {"index": self.index, "content": text, "tokens": tokens, "stop": False, "id_slot": -1,
                     "tokens_predicted": self.n_decoded, "tokens_evaluated": self.n_prompt()}
        if self.timings_per_token and chunk.timings is not None:
            out["timings"] = timings_json(chunk.timings, self.n_decoded)
        if entry is not None:
            out["completion_probabilities"] = [entry]
        return out

    def final(self, last: GenerationChunk, text: str, tokens: list[int], n_decoded: int) -> Json:
        t = last.timings
        assert t is not None and last.stop_reason is not None
        n_prompt = self.n_prompt()
        return {
            "index": self.index, "content": text, "tokens": tokens, "id_slot": 0, "stop": True, "model": self.model,
            "tokens_predicted": n_decoded, "tokens_evaluated": n_prompt, "generation_settings": self.settings,
            "prompt": self.prompt_text(), "has_new_line": self._has_new_line,
            "truncated": last.stop_reason is StopReason.CONTEXT_FULL, "stop_type": STOP_TYPES[last.stop_reason],
            "stopping_word": last.stop_string or "", "tokens_cached": n_prompt + max(0, n_decoded - 1),
            "timings": timings_json(t, n_decoded),
        }

    def events(self, chunk: GenerationChunk) -> list[Json]:
        """Streamed: the objects of one chunk."""
        entry = released_entry(chunk) if chunk.logprob is not None else None
        self._has_new_line = self._has_new_line or "\n" in chunk.text
        if chunk.stop_reason is None:
            self.n_decoded += 1
            return [] if chunk.incomplete else [self._token(chunk.text, [chunk.token or 0], entry, chunk)]
        out = []
        if chunk.end_token is not None:
            self.n_decoded += 1
            out.append(self._token(chunk.text, [chunk.end_token], entry, chunk))
        elif chunk.text:   # held text a limit released (docs/design.md, deviation 11): no token of its own
            out.append(self._token(chunk.text, [], None, chunk))
        out.append(self.final(chunk, "", [], self.n_decoded))
        return out

    def whole(self, chunks: list[GenerationChunk], tokenize: Callable[..., list[int]]) -> Json:
        """Not streamed: the final object of all the chunks of the generation."""
        last = chunks[-1]
        ids = [c.token for c in chunks if c.token is not None]
        if last.end_token is not None:
            ids.append(last.end_token)
        text = "".join(c.text for c in chunks)
        self._has_new_line = "\n" in text
        out = self.final(last, text, ids if self.return_tokens else [], len(ids))
        entries = without_stop_entries(
            [released_entry(c) for c in chunks if c.logprob is not None and not c.incomplete], last.stop_string,
            tokenize)
        if entries:
            out["completion_probabilities"] = entries
        return out
