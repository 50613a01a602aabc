"""Text completions in llama-cpp-python's shapes: ``Llama.create_completion`` / ``__call__``.

    {"id": "cmpl-...", "object": "text_completion", "created", "model",
     "choices": [{"text", "index": 0, "logprobs": None | {...}, "finish_reason": "stop" | "length"}],
     "usage": {"prompt_tokens", "completion_tokens", "total_tokens"}}

Streamed: one such dict per piece of text (``finish_reason`` None, no usage), then one with ``text``
"" and the finish reason. ``logprobs`` (an int) gives llama-cpp-python's legacy shape (``tokens``,
``text_offset``, ``token_logprobs``, ``top_logprobs`` as {token text: logprob}), from the softmax of
the raw logits, as there; unlike there it needs no ``logits_all=True``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..engine import GenerationParams, LitertEngine, LlamaEngine
from ..engine.logprobs import TokenLogprob
from ..errors import LlamaUnsupportedException
from ..json_types import JsonObject
from .processors import StoppingCriteriaList


@dataclass
class TextCall:
    """One completion call's settings, as the Llama class resolved them."""

    prompt: str | Sequence[int]
    params: GenerationParams
    model: str
    echo: bool = False
    logprobs: int | None = None
    stopping_criteria: StoppingCriteriaList | None = None


class _Criteria:
    """Stopping criteria asked where llama-cpp-python asks them: before each sampling, with the
    tokens so far and the raw logits the next token is sampled from; True drops that token and stops."""

    def __init__(self, criteria: StoppingCriteriaList) -> None:
        self.criteria = criteria
        self.stopped = False

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> None:
        if not self.stopped and self.criteria(np.asarray(input_ids, dtype=np.intc), np.array(scores, copy=True)):
            self.stopped = True


def completion(engine: LlamaEngine | LitertEngine, call: TextCall, stream: bool) -> JsonObject | Iterator[JsonObject]:
    if call.echo and call.logprobs is not None:
        raise LlamaUnsupportedException("echo=True with logprobs (the prompt's own logprobs) is not supported: "
                                        "ask for one of them", {"option": "echo"})
    chunks = _pieces(engine, call)
    if stream:
        return _streamed(chunks)
    return _collect(chunks, call)


def _streamed(chunks: Iterator[JsonObject]) -> Iterator[JsonObject]:
    # llama-cpp-python's stream carries no usage; closing this generator closes the generation
    for chunk in chunks:
        chunk.pop("usage", None)
        yield chunk


def _pieces(engine: LlamaEngine | LitertEngine, call: TextCall) -> Iterator[JsonObject]:
    """The streamed dicts (the collected form is built from them)."""
    tokens = (engine.tokenize(call.prompt, add_special=True, parse_special=True) if isinstance(call.prompt, str)
              else list(call.prompt))
    params = call.params
    criteria = _Criteria(call.stopping_criteria) if call.stopping_criteria else None
    if criteria is not None:
        params = replace(params, logits_processors=(criteria, *params.logits_processors))
    if call.logprobs is not None:
        params = replace(params, logprobs=True, top_logprobs=call.logprobs)
    head = {"id": f"cmpl-{uuid.uuid4()}", "object": "text_completion", "created": int(time.time()),
            "model": call.model}
    prompt_text = call.prompt if isinstance(call.prompt, str) else engine.detokenize(tokens, render_special=False)
    offset = len(prompt_text)
    n_generated, finish = 0, "length"

    def piece(text: str, logprob: TokenLogprob | None, finish_reason: str | None) -> JsonObject:
        return {**head, "choices": [{"text": text, "index": 0, "logprobs": _legacy_logprobs(logprob, offset)
                                     if logprob is not None else None, "finish_reason": finish_reason}]}

    if call.echo:
        yield piece(prompt_text, None, None)
    with engine.generate(tokens, params) as generation:
        for chunk in generation:
            if criteria is not None and criteria.stopped:
                finish = "stop"
                break
            if chunk.token is not None:
                n_generated += 1
            if chunk.text or (chunk.logprob is not None and chunk.stop_reason is None):
                yield piece(chunk.text, chunk.logprob if chunk.stop_reason is None else None, None)
                offset += len(chunk.text)
            if chunk.stop_reason is not None:
                finish = chunk.stop_reason.finish_reason
    yield {**piece("", None, finish), "usage": {"prompt_tokens": len(tokens), "completion_tokens": n_generated,
                                                "total_tokens": len(tokens) + n_generated}}


def _legacy_logprobs(entry: TokenLogprob, text_offset: int) -> JsonObject:
    top = {alt.token: alt.logprob for alt in entry.top_logprobs}
    top[entry.token] = entry.logprob   # llama-cpp-python lists the chosen token among the top ones
    return {"tokens": [entry.token], "text_offset": [text_offset], "token_logprobs": [entry.logprob],
            "top_logprobs": [top]}


def _collect(chunks: Iterator[JsonObject], call: TextCall) -> JsonObject:
    texts: list[str] = []
    entries: list[JsonObject] = []
    last: JsonObject = {}
    for chunk in chunks:
        choice = chunk["choices"][0]
        texts.append(choice["text"])
        if choice["logprobs"] is not None:
            entries.append(choice["logprobs"])
        last = chunk
    logprobs = None
    if call.logprobs is not None:
        logprobs = {key: [v for e in entries for v in e[key]]
                    for key in ("tokens", "text_offset", "token_logprobs", "top_logprobs")}
    choice = {"text": "".join(texts), "index": 0, "logprobs": logprobs,
              "finish_reason": last["choices"][0]["finish_reason"]}
    return {key: last[key] for key in ("id", "object", "created", "model")} | {"choices": [choice],
                                                                                "usage": last["usage"]}
