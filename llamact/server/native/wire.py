"""The native family's wire format: a raw completion in llama-server's own shape (``/completion``,
``/completions``, ``/infill``), as ``to_json_non_oaicompat`` of tools/server/server-task.cpp writes
it, and ``/infill``'s body and prompt. (The raw completion body itself is read as every raw route
reads it: ``completions.wire.read_completion``.)

    answer = NativeCompletion(index, model, prompt_text, n_prompt, settings)
    answer.events(chunk)            streamed: one object per token, then the final object
    answer.whole(chunks, tokenize)  not streamed: the final object with the text, tokens, probabilities
    settings = generation_settings(call, defaults)    the request's ``task_params::to_json()``
    missing = missing_fim_tokens(engine)      # "" when the model can fill in the middle (else 501)
    body = read_infill(body)                  # RequestError with upstream's messages
    ids = infill_tokens(engine, body, n_batch=..., n_predict=..., n_ctx=..., prompt_ids=...)

A token's object has ``content``, ``tokens`` (its id, always), ``stop: false``, ``id_slot: -1``
(upstream never sets it on a partial result), the counts, and ``completion_probabilities`` with
``n_probs``; a token that ends inside a UTF-8 character has none. The final object has
``stop: true``, the slot, the model, ``generation_settings``, the prompt as text (special tokens
rendered), ``stop_type`` / ``stopping_word``, ``tokens_cached`` (what the slot's KV cache holds: the
prompt and every generated token but the last, which is sampled and never evaluated) and the
timings; streamed, its ``content`` and ``tokens`` are empty (they went in the token objects).
``tokens`` lists the generated ids, the end token included, only with ``return_tokens``.

``/infill``: fill in the middle, its body checked and its prompt made as llama-server makes them
(``post_infill`` in server-context.cpp, ``format_prompt_infill`` in server-common.cpp). The prompt
is the repository-level FIM pattern: ``[FIM_REP]myproject\\n``, each ``input_extra`` chunk after
``[FIM_SEP]filename\\n`` (or a "--- snippet ---" line without a separator token),
``[FIM_SEP]filename\\n``, then ``[FIM_PRE]prefix[FIM_SUF]suffix[FIM_MID]`` with the request's
``prompt`` after the prefix; the prefix keeps its last 3/4 of a batch, the suffix what is left of
the quarter, the extra chunks what the context has left after a batch and twice ``n_predict``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...engine import GenerationParams
from ...engine.decode import GenerationChunk, StopReason, Timings
from ...json_types import Json
from ..completions.wire import CompletionCall
from ..http.errors import RequestError
from ..wire.logprobs import released_entry, without_stop_entries
from ..wire.request import RequestDefaults
from ..wire.task_params import f32_or_null, task_params_json

__all__ = ["NativeCompletion", "generation_settings", "infill_tokens", "missing_fim_tokens", "read_infill",
           "timings_json"]

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
    reasoning = body.get("reasoning_format")
    settings = task_params_json(
        p, n_predict=n_predict, stream=call.stream, n_probs=call.n_probs,
        reasoning_format=reasoning if isinstance(reasoning, str) else defaults.reasoning_format,
        speculative_types=defaults.speculative_types)
    settings.update({   # the fields task_params::to_json() writes beside the metrics' ones
        "ignore_eos": body.get("ignore_eos") is True,   # (its bans are in logit_bias)
        "timings_per_token": call.timings_per_token,
        "dry_sequence_breakers": DRY_SEQUENCE_BREAKERS,
        "stop": [s for s in ([p.stop] if isinstance(p.stop, str) else p.stop) if s],
        "logit_bias": [{"bias": f32_or_null(bias), "token": token} for token, bias in p.logit_bias.items()],
        "grammar": p.grammar or "", "grammar_lazy": False, "grammar_triggers": [], "preserved_tokens": [],
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
                 settings: Json, *, return_tokens: bool = False, timings_per_token: bool = False,
                 slot_id: Callable[[], int] = lambda: 0) -> None:
        self.index = index
        self.slot_id = slot_id             # the slot it ran in, known once it holds one
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
            "index": self.index, "content": text, "tokens": tokens, "id_slot": self.slot_id(), "stop": True,
            "model": self.model,
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


# -- /infill ------------------------------------------------------------------------------------------


SNIPPET = "\n\n--- snippet ---\n\n"   # k_chunk_prefix_str: a chunk's separator without a FIM_SEP token


def missing_fim_tokens(engine: Any) -> str:
    """What upstream's capability check says is missing ("" when nothing is)."""
    return "".join(f"{name} token is missing. " for kind, name in (("pre", "prefix"), ("suf", "suffix"),
                                                                    ("mid", "middle"))
                   if engine.fim_token(kind) is None)


def read_infill(body: Json) -> Json:
    """The body's fields checked as upstream checks them; ``input_extra`` defaults to []."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    if "prompt" in body and not isinstance(body["prompt"], str):
        raise RequestError('"prompt" must be a string')
    for name in ("input_prefix", "input_suffix"):
        if name not in body:
            raise RequestError(f'"{name}" is required')
        if not isinstance(body[name], str) and not (
                isinstance(body[name], list) and all(isinstance(v, (str, int)) and not isinstance(v, bool)
                                                     for v in body[name])):
            raise RequestError(f'"{name}" must be a string or a list of tokens and strings')
    extra = body.get("input_extra", [])
    if extra is None:
        extra = []
    if not isinstance(extra, list):
        raise RequestError('"input_extra" must be an array of {"filename": string, "text": string}')
    for chunk in extra:
        if not isinstance(chunk, dict) or not isinstance(chunk.get("text"), str):
            raise RequestError('extra_context chunk must contain a "text" field with a string value')
        if "filename" in chunk and not isinstance(chunk["filename"], str):
            raise RequestError("extra_context chunk's \"filename\" field must be a string")
    return {**body, "input_extra": extra}


def _mixed(engine: Any, value: Any) -> list[int]:
    """``tokenize_mixed`` without BOS or special tokens."""
    if isinstance(value, str):
        return list(engine.tokenize(value, add_special=False, parse_special=False))
    ids: list[int] = []
    for part in value:
        ids += engine.tokenize(part, add_special=False, parse_special=False) if isinstance(part, str) else [part]
    return ids


def infill_tokens(engine: Any, body: Json, *, n_batch: int, n_predict: int, n_ctx: int,
                  prompt_ids: list[int]) -> list[int]:
    """The FIM prompt's token ids (see the module docstring; ``spm_infill`` off, upstream's default)."""
    def tokens(text: str) -> list[int]:
        return list(engine.tokenize(text, add_special=False, parse_special=False))

    pre, suf, mid = engine.fim_token("pre"), engine.fim_token("suf"), engine.fim_token("mid")
    rep, sep = engine.fim_token("rep"), engine.fim_token("sep")
    extra: list[int] = []
    if rep is not None:
        extra += [rep, *tokens("myproject\n")]
    for chunk in body["input_extra"]:
        filename = chunk.get("filename")
        if sep is not None:
            extra += [sep, *tokens((filename if isinstance(filename, str) else "tmp") + "\n")]
        else:
            extra += tokens(SNIPPET)
        extra += tokens(chunk["text"])
    if sep is not None:
        extra += [sep, *tokens("filename\n")]

    prefix, suffix = _mixed(engine, body["input_prefix"]), _mixed(engine, body["input_suffix"])
    n_prefix = min(len(prefix), 3 * (n_batch // 4))
    n_suffix = min(len(suffix), max(0, n_batch // 4 - (2 + len(prompt_ids))))
    n_extra = min(max(0, n_ctx - n_batch - 2 * n_predict), len(extra))
    prefix = [pre, *prefix[len(prefix) - n_prefix:], *prompt_ids]
    suffix = [suf, *suffix[:n_suffix]]
    bos = engine.bos_id
    head = [bos] if bos is not None else []
    return [*extra[len(extra) - n_extra:], *head, *prefix, *suffix, mid]
