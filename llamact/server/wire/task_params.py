"""A request's settings as llama-server reports them (``task_params::to_json``): the one writer of
the sampling JSON that ``/props`` (a fresh request's defaults), ``/slots`` (each slot's last request)
and the native completion's ``generation_settings`` all show.

    task_params_json(params, n_predict=..., stream=..., ...) -> {"seed", "temperature", ..., "lora"}
    f32(0.95) -> 0.949999988079071          a C float as nlohmann writes it
    f32_or_null(-inf) -> None               and one that is not finite (nlohmann's null)

Floats are llama.cpp's ``float`` fields, so they are written as the double of their float32 value;
the seed is llama.cpp's ``uint32_t`` (``--seed -5`` reads 4294967291 there too); the sampler chain is
``common_params_sampling``'s default, by ``common_sampler_type_to_str``'s names.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...engine.params import SAMPLER_NAMES, GenerationParams

__all__ = ["DEFAULT_SEED", "f32", "f32_or_null", "task_params_json"]

DEFAULT_SEED = 0xFFFFFFFF   # LLAMA_DEFAULT_SEED: a random seed for each request


def f32(value: float) -> float:
    """A C float's value, as nlohmann writes it (the double of its float32: 0.95 -> 0.949999988079071)."""
    return float(np.float32(value))


def f32_or_null(value: float) -> float | None:
    """``f32``, or None where nlohmann writes ``null``: a float that is not finite (a ban's ``-inf``
    bias). JSON has no infinity: Python's ``-Infinity`` is invalid for strict parsers, and
    Starlette's JSONResponse refuses it (a 500)."""
    return f32(value) if math.isfinite(value) else None


def task_params_json(p: GenerationParams, *, n_predict: int, stream: bool = False, n_probs: int = 0,
                     chat_format: str = "Content-only", reasoning_format: str = "none", generation_prompt: str = "",
                     speculative_types: str = "none", lora: Sequence[tuple[int, float]] = ()) -> dict[str, Any]:
    """``task_params::to_json(only_metrics=true)`` for a request run with ``p``; the keyword arguments
    are the task's own fields (their defaults: a fresh task's, as ``/props`` shows them)."""
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
        # upstream's adaptive-p sampler, which llamact does not have: its "off" values
        "adaptive_target": f32(-1.0),
        "adaptive_decay": f32(0.9),
        "max_tokens": n_predict,
        "n_predict": n_predict,
        "n_keep": 0,
        "n_discard": 0,
        "ignore_eos": False,
        "stream": stream,
        "n_probs": n_probs,
        "min_keep": p.min_keep,
        "chat_format": chat_format,
        "reasoning_format": reasoning_format,
        "reasoning_in_content": False,
        "generation_prompt": generation_prompt,
        "samplers": list(SAMPLER_NAMES),
        "speculative.types": speculative_types,
        "timings_per_token": False,
        "post_sampling_probs": False,
        "backend_sampling": False,
        "lora": [{"id": i, "scale": f32(s)} for i, s in lora],
    }
