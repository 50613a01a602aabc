"""``GET /slots``: each slot's state in llama-server's shape (``server_slot::to_json`` with its
``only_metrics`` default, and ``task_params::to_json``), from what the server remembers of the last
request each slot ran.

    tasks = SlotTasks()
    tasks.begin(stream, params, stream=True, chat=result)    # in a route, once the stream exists
    slots_json(tasks, states, n_ctx_slot)                   # states: (is_processing, n_cached) per slot

A slot that never ran a request has only ``id``, ``n_ctx``, ``speculative`` and ``is_processing``;
one that did also has its last task (``id_task``, ``params``, ``next_token``, ...). llama-server
resets a slot's counters when the request leaves, so an idle slot reports 0 processed / cached and
no next token; ``n_prompt_tokens`` is what its KV cache holds. Floats are llama.cpp's ``float``
fields, so they are written as the double of their float32 value (0.95 is 0.949999988079071).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..engine.params import GenerationParams

__all__ = ["SlotTasks", "TaskRecord", "f32", "params_json", "slots_json"]

Json = Any
DEFAULT_SEED = 0xFFFFFFFF   # LLAMA_DEFAULT_SEED: llama-server's seed when a request gives none
# common_params_sampling's default sampler chain, by common_sampler_type_to_str's names
SAMPLERS = ("penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature")


def f32(value: float) -> float:
    """A C float's value, as nlohmann writes it (the double of its float32)."""
    return float(np.float32(value))


def params_json(params: GenerationParams, *, stream: bool, chat_format: str, generation_prompt: str,
                reasoning_format: str, lora: Sequence[tuple[int, float]] = (), speculative_types: str = "none") -> Json:
    """``task_params::to_json(only_metrics=true)`` for a request run with ``params``."""
    p = params
    return {
        "seed": DEFAULT_SEED if p.seed is None else p.seed & 0xFFFFFFFF,
        "temperature": f32(0.0 if p.greedy else p.temperature),
        "dynatemp_range": f32(p.dynatemp_range),
        "dynatemp_exponent": f32(p.dynatemp_exponent),
        "top_k": p.top_k,
        "top_p": f32(p.top_p),
        "min_p": f32(p.min_p),
        "top_n_sigma": f32(p.top_n_sigma),
        "xtc_probability": f32(p.xtc_probability),
        "xtc_threshold": f32(p.xtc_threshold),
        "typical_p": f32(p.typical_p),
        "repeat_last_n": p.repeat_last_n,
        "repeat_penalty": f32(p.repeat_penalty),
        "presence_penalty": f32(p.presence_penalty),
        "frequency_penalty": f32(p.frequency_penalty),
        "dry_multiplier": f32(p.dry_multiplier),
        "dry_base": f32(p.dry_base),
        "dry_allowed_length": p.dry_allowed_length,
        "dry_penalty_last_n": p.dry_penalty_last_n,
        "mirostat": p.mirostat,
        "mirostat_tau": f32(p.mirostat_tau),
        "mirostat_eta": f32(p.mirostat_eta),
        "adaptive_target": f32(-1.0),   # llamact has no adaptive-p sampler: llama.cpp's "off"
        "adaptive_decay": f32(0.9),
        "max_tokens": p.max_tokens,
        "n_predict": p.max_tokens,
        "n_keep": 0,
        "n_discard": 0,
        "ignore_eos": False,
        "stream": stream,
        "n_probs": p.top_logprobs if p.logprobs else 0,
        "min_keep": p.min_keep,
        "chat_format": chat_format,
        "reasoning_format": reasoning_format,
        "reasoning_in_content": False,
        "generation_prompt": generation_prompt,
        "samplers": list(SAMPLERS),
        "speculative.types": speculative_types,
        "timings_per_token": False,
        "post_sampling_probs": False,
        "backend_sampling": False,
        "lora": [{"id": i, "scale": f32(s)} for i, s in lora],
    }


@dataclass
class TaskRecord:
    """One request as ``/slots`` reports it: its task id, its parameters, and the stream that tells
    which slot it ran in (a batched stream knows once it holds one; the engine has one slot, 0)."""

    id_task: int
    params: Json
    stream: Any = field(repr=False)

    @property
    def slot_id(self) -> int:
        generation = getattr(self.stream, "generation", self.stream)   # a ChatStream's SequenceStream
        return int(getattr(generation, "slot_id", 0))


class SlotTasks:
    """The last request each slot ran (see the module docstring); used from the event loop and the
    workers' threads."""

    def __init__(self, keep: int = 256) -> None:
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._records: list[TaskRecord] = []   # newest last; a slot's is the newest that ran in it
        self._keep = keep
        self.speculative_types = "none"   # the server's speculative decoding (set at load), as a request reports it

    def begin(self, stream: Any, params: GenerationParams, *, stream_mode: bool, reasoning_format: str,
              chat: Any = None, lora: Sequence[tuple[int, float]] = ()) -> None:
        """Remember a request that starts on ``stream`` (``chat``: its ChatTemplateResult; None for
        a raw completion, llama-server's "Content-only" format)."""
        record = TaskRecord(next(self._ids), params_json(
            params, stream=stream_mode, reasoning_format=reasoning_format, lora=lora,
            chat_format=chat.format if chat is not None else "Content-only",
            generation_prompt=chat.generation_prompt if chat is not None else "",
            speculative_types=self.speculative_types), stream)
        with self._lock:
            self._records.append(record)
            del self._records[:-self._keep]

    def last(self, slot_id: int) -> TaskRecord | None:
        with self._lock:
            for record in reversed(self._records):
                if record.slot_id == slot_id:
                    return record
        return None


def slots_json(tasks: SlotTasks, states: Sequence[tuple[bool, int]], n_ctx_slot: int) -> Json:
    """``GET /slots``' answer: ``states`` holds (is_processing, tokens in its KV cache) per slot."""
    out = []
    for slot_id, (processing, n_cached) in enumerate(states):
        entry: Json = {"id": slot_id, "n_ctx": n_ctx_slot, "speculative": tasks.speculative_types != "none",
                       "is_processing": processing}
        record = tasks.last(slot_id)
        if record is not None:
            entry.update({
                "id_task": record.id_task, "n_prompt_tokens": n_cached,
                "n_prompt_tokens_processed": 0, "n_prompt_tokens_cache": 0, "params": record.params,
                "next_token": [{"has_next_token": processing, "has_new_line": False,
                                "n_remain": -1, "n_decoded": 0}],
            })
        out.append(entry)
    return out
