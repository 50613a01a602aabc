"""llamact's sampling settings as the LiteRT-LM runtime takes them, or a refusal naming the field.

    settings = runtime_sampling(values, defaults)   -> RuntimeSampling
    settings.sampler, settings.max_output_tokens, settings.stop, settings.suppress

What enters: ``GenerationParams``' fields as a mapping (``values``) and the defaults of the same
fields (``defaults``), so that only what a caller changed is judged. What leaves: the runtime's
sampler (top-k, top-p, temperature, seed: all it has), the output limit, the stop strings llamact
applies to the text itself, and the repetition penalties, which the runtime applies per message.

Raises ``LlamaUnsupportedException`` naming each field set away from its default that the
runtime cannot honour (min-p, typical-p, mirostat, DRY, XTC, logit biases other than a ban,
logprobs, a GBNF grammar, logits processors, a changed sampler order, ...), with what to do: the
same request on a GGUF model has them. A field at its default is not refused even where the
runtime has no such sampler (``min_p``'s default 0.05, for one): the README lists them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...errors import LlamaUnsupportedException

__all__ = ["RuntimeSampling", "runtime_sampling"]

# fields the runtime honours (or llamact honours on the runtime's text), and those without effect there
_HONOURED = frozenset({"max_tokens", "temperature", "top_k", "top_p", "seed", "greedy", "stop", "repeat_penalty",
                       "repeat_last_n", "frequency_penalty", "presence_penalty", "logit_bias", "cache_prompt"})
_ALL_TOKENS = 1 << 20    # more than any vocabulary: top-k off
_WHY = {
    "grammar": "a GBNF grammar (use response_format with a JSON schema: the runtime constrains to those)",
    "logprobs": "logprobs (the runtime gives no token probabilities)",
    "top_logprobs": "logprobs (the runtime gives no token probabilities)",
    "logits_processors": "logits processors (the runtime's logits stay inside it)",
    "render_special": "render_special (the runtime decides how special tokens are shown)",
}


@dataclass(frozen=True)
class RuntimeSampling:
    sampler: dict[str, Any]
    max_output_tokens: int | None          # None: until the context is full
    stop: tuple[str, ...]
    repetition: dict[str, Any] | None      # litert_lm.RepetitionPenaltyConfig's fields, or None
    suppress: tuple[int, ...] = field(default=())   # token ids a logit bias of -inf bans


def runtime_sampling(values: Mapping[str, Any], defaults: Mapping[str, Any]) -> RuntimeSampling:
    """See the module docstring."""
    changed = [name for name, value in values.items() if name in defaults and value != defaults[name]]
    refused = [name for name in changed if name not in _HONOURED]
    bias = values.get("logit_bias") or {}
    if any(not (isinstance(v, (int, float)) and math.isinf(v) and v < 0) for v in bias.values()):
        refused.append("logit_bias")
    if refused:
        name = refused[0]
        what = _WHY.get(name, f"{name} (the runtime samples with top-k, top-p, temperature and a seed only)")
        raise LlamaUnsupportedException(
            f"the LiteRT-LM runtime has no {what}: leave {', '.join(sorted(set(refused)))} at the default for a "
            ".litertlm model, or use a GGUF model", {"fields": sorted(set(refused))})
    greedy = bool(values.get("greedy")) or float(values.get("temperature", 1.0)) <= 0
    seed = values.get("seed")
    top_k = int(values.get("top_k") or 0)
    sampler = {
        # llama.cpp's top-k <= 0 is "off"; the runtime's sampler always has one: the whole vocabulary
        "top_k": 1 if greedy else top_k if top_k > 0 else _ALL_TOKENS,
        "top_p": 1.0 if greedy else float(values.get("top_p", 1.0)),
        "temperature": 0.0 if greedy else float(values.get("temperature", 1.0)),
        # llama.cpp draws a seed when none is given; the runtime would use 0 every time
        "seed": int(seed) if seed is not None and int(seed) >= 0 else random.getrandbits(31),
    }
    max_tokens = int(values.get("max_tokens", -1))
    repetition = None
    if any(name in changed for name in ("repeat_penalty", "frequency_penalty", "presence_penalty")):
        last_n = int(values.get("repeat_last_n", 64))
        repetition = {"repetition_penalty": float(values.get("repeat_penalty", 1.0)),
                      "frequency_penalty": float(values.get("frequency_penalty", 0.0)),
                      "presence_penalty": float(values.get("presence_penalty", 0.0)),
                      # llama.cpp: -1 the whole context, 0 none; the runtime: 0 the whole history
                      "window_size": 0 if last_n < 0 else last_n}
        if last_n == 0:
            repetition = None
    stop = values.get("stop") or ()
    return RuntimeSampling(sampler, None if max_tokens < 0 else max_tokens, tuple(stop), repetition,
                           tuple(int(t) for t in bias))
