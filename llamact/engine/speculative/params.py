"""``SpeculativeParams``: how an engine drafts, with llama-server's names, defaults and bounds.

One field per ``--spec-*`` option of llama-server at the pin (common/arg.cpp), plus llamact's own
``grammar`` source. ``types`` lists the draft sources by upstream's names; whatever order they are
given in, they are tried in upstream's order of preference (ngram-simple, ngram-map-k,
ngram-map-k4v, ngram-mod, draft-simple), llamact's grammar drafts first. A ``draft_model`` without a
type turns ``draft-simple`` on (llama-server at the pin ignores the model then).

Raised: ``LlamaModelException`` for an unknown type, a value out of upstream's bounds, a
``draft-simple`` without a draft model or the reverse.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from ...errors import LlamaModelException

__all__ = ["DRAFT_TYPES", "NGRAM_TYPES", "OPTION_FIELDS", "SPEC_TYPES", "SpeculativeParams", "speculative_params"]

# upstream's names, in its order of preference (common_speculative_init); "grammar" is llamact's own
NGRAM_TYPES = ("ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod")
DRAFT_TYPES = ("draft-simple",)
SPEC_TYPES = ("grammar", *NGRAM_TYPES, *DRAFT_TYPES)
# upstream's other types: known by name, refused with the reason
_UNSUPPORTED = {
    "ngram-cache": "it needs upstream's lookup-cache files",
    "draft-eagle3": "it needs an EAGLE-3 head and llama.cpp's staging API",
    "draft-mtp": "it needs a model's multi-token-prediction head and llama.cpp's staging API",
    "draft-dflash": "it needs a DFlash draft and llama.cpp's staging API",
    "draft-dspark": "it needs a DSpark draft and llama.cpp's staging API",
}


@dataclass(frozen=True)
class SpeculativeParams:
    """Speculative decoding for an engine (``ModelParams.speculative``). The target model samples
    every position itself and keeps a drafted token only while it equals its own choice, so the
    output is the target's; drafts only save decodes.

    ``types``: the draft sources (``--spec-type``): ``ngram-simple`` / ``ngram-map-k`` /
    ``ngram-map-k4v`` (the last ``size_n`` tokens looked up in the history, the ``size_m`` after
    them drafted), ``ngram-mod`` (a hash table of ``n_match``-grams shared by the sequences,
    ``n_min`` .. ``n_max`` tokens), ``draft-simple`` (``draft_model`` drafts ``draft_n_min`` ..
    ``draft_n_max`` tokens greedily, stopping below ``draft_p_min``), and llamact's ``grammar``
    (the text the request's grammar forces next: a named tool call's envelope, a schema's keys).
    ``draft_n_ctx`` 0 gives the draft the target's context size; ``draft_n_threads`` /
    ``draft_n_threads_batch`` None take the target's. ``SpeculativeParams.default()`` is llama-server's
    ``--spec-default``.

    Raises:
        LlamaModelException: an unknown or unsupported type, a value out of upstream's bounds, a
            ``draft-simple`` type without a draft model or a draft model without it.

    Example:
        ```python
        spec = SpeculativeParams(types=("ngram-map-k",))
        engine = LlamaEngine.load("model.gguf", ModelParams(speculative=spec))
        ```
    """

    types: tuple[str, ...] = ()
    ngram_simple_size_n: int = 12
    ngram_simple_size_m: int = 48
    ngram_simple_min_hits: int = 1
    ngram_map_k_size_n: int = 12
    ngram_map_k_size_m: int = 48
    ngram_map_k_min_hits: int = 1
    ngram_map_k4v_size_n: int = 12
    ngram_map_k4v_size_m: int = 48
    ngram_map_k4v_min_hits: int = 1
    ngram_mod_n_match: int = 24
    ngram_mod_n_min: int = 48
    ngram_mod_n_max: int = 64
    draft_model: str | os.PathLike[str] | None = None
    draft_n_max: int = 3
    draft_n_min: int = 0
    draft_p_min: float = 0.0
    draft_n_ctx: int = 0
    draft_n_threads: int | None = None
    draft_n_threads_batch: int | None = None
    draft_n_gpu_layers: int = -1
    grammar_n_max: int = 64   # tokens of forced text drafted at once

    def __post_init__(self) -> None:
        types = self.types
        if isinstance(types, str):
            types = tuple(t.strip() for t in types.split(",") if t.strip())
        types = tuple(types)
        if "none" in types:   # upstream: "none" anywhere turns speculation off
            types = ()
        for name in types:
            if name in _UNSUPPORTED:
                raise LlamaModelException(f"speculative type {name!r} is not supported by llamact: "
                                          f"{_UNSUPPORTED[name]}", {"type": name})
            if name not in SPEC_TYPES:
                raise LlamaModelException(f"unknown speculative type: {name} (known: {', '.join(SPEC_TYPES)})",
                                          {"type": name})
        if self.draft_model is not None and not types:
            types = DRAFT_TYPES
        if "draft-simple" in types and self.draft_model is None:
            raise LlamaModelException("speculative type draft-simple needs a draft model (draft_model, "
                                      "--spec-draft-model)", {"types": list(types)})
        if self.draft_model is not None and "draft-simple" not in types:
            raise LlamaModelException("a draft model is given but the speculative types do not include "
                                      "draft-simple", {"types": list(types)})
        object.__setattr__(self, "types", tuple(dict.fromkeys(types)))
        for prefix in ("ngram_simple", "ngram_map_k", "ngram_map_k4v"):
            _check(self, f"{prefix}_size_n", 1, 1024)
            _check(self, f"{prefix}_size_m", 1, 1024)
            _check(self, f"{prefix}_min_hits", 1, 65535)
        _check(self, "ngram_mod_n_match", 1, 1024)
        _check(self, "ngram_mod_n_min", 0, 1024)
        _check(self, "ngram_mod_n_max", 0, 1024)
        _check(self, "draft_n_max", 0, 2**31 - 1)
        _check(self, "draft_n_min", 0, 2**31 - 1)
        _check(self, "draft_n_ctx", 0, 2**31 - 1)
        _check(self, "grammar_n_max", 0, 4096)
        for name in ("draft_n_threads", "draft_n_threads_batch"):
            if getattr(self, name) is not None:
                _check(self, name, 1, 1024)
        if not isinstance(self.draft_p_min, (int, float)) or not 0.0 <= self.draft_p_min <= 1.0:
            raise LlamaModelException(f"draft_p_min must be a probability in [0, 1], got {self.draft_p_min!r}",
                                      {"draft_p_min": self.draft_p_min})

    @classmethod
    def default(cls, **changes: Any) -> SpeculativeParams:
        """llama-server's ``--spec-default``: ngram-mod with n_match 24, n_min 48, n_max 64."""
        return replace(cls(types=("ngram-mod",), ngram_mod_n_match=24, ngram_mod_n_min=48, ngram_mod_n_max=64),
                       **changes)

    @property
    def enabled(self) -> bool:
        return bool(self.types)

    def types_name(self) -> str:
        """What llama-server reports as a request's ``speculative.types``: its type list starts with
        "none" and the ``--spec-type`` / ``--spec-default`` types are appended, in the order given
        (``common_speculative_type_name_str``)."""
        return ",".join(("none", *self.types))

    def n_max(self) -> int:
        """The longest draft any source makes (``common_speculative_n_max``)."""
        sizes = {"ngram-simple": self.ngram_simple_size_m, "ngram-map-k": self.ngram_map_k_size_m,
                 "ngram-map-k4v": self.ngram_map_k4v_size_m, "ngram-mod": self.ngram_mod_n_max,
                 "draft-simple": self.draft_n_max, "grammar": self.grammar_n_max}
        return max((sizes[t] for t in self.types), default=0)


def _check(params: SpeculativeParams, name: str, lo: int, hi: int) -> None:
    value = getattr(params, name)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise LlamaModelException(f"{name} must be an integer in [{lo}, {hi}], got {value!r}", {name: value})


# llama-server's --spec-* options (their names with "_" for "-", as ``llamact serve``'s settings and
# the CLI's flags hold them) -> SpeculativeParams fields
OPTION_FIELDS = {
    "spec_draft_model": "draft_model",
    "spec_draft_n_max": "draft_n_max",
    "spec_draft_n_min": "draft_n_min",
    "spec_draft_p_min": "draft_p_min",
    "spec_draft_ctx_size": "draft_n_ctx",
    "spec_draft_threads": "draft_n_threads",
    "spec_draft_threads_batch": "draft_n_threads_batch",
    "spec_draft_ngl": "draft_n_gpu_layers",
    "spec_ngram_simple_size_n": "ngram_simple_size_n",
    "spec_ngram_simple_size_m": "ngram_simple_size_m",
    "spec_ngram_simple_min_hits": "ngram_simple_min_hits",
    "spec_ngram_map_k_size_n": "ngram_map_k_size_n",
    "spec_ngram_map_k_size_m": "ngram_map_k_size_m",
    "spec_ngram_map_k_min_hits": "ngram_map_k_min_hits",
    "spec_ngram_map_k4v_size_n": "ngram_map_k4v_size_n",
    "spec_ngram_map_k4v_size_m": "ngram_map_k4v_size_m",
    "spec_ngram_map_k4v_min_hits": "ngram_map_k4v_min_hits",
    "spec_ngram_mod_n_match": "ngram_mod_n_match",
    "spec_ngram_mod_n_min": "ngram_mod_n_min",
    "spec_ngram_mod_n_max": "ngram_mod_n_max",
    "spec_grammar_n_max": "grammar_n_max",
}


def speculative_params(options: dict[str, Any]) -> SpeculativeParams | None:
    """SpeculativeParams from llama-server's options (``spec_type``: comma-separated types,
    ``spec_default``, and the names of ``OPTION_FIELDS``; None or absent: the default), or None when
    they turn nothing on. ``--spec-default`` adds ngram-mod with its preset; explicit values win."""
    types = [t.strip() for t in str(options.get("spec_type") or "").split(",") if t.strip()]
    preset: dict[str, Any] = {}
    if options.get("spec_default"):
        types.append("ngram-mod")
        preset = {"ngram_mod_n_match": 24, "ngram_mod_n_min": 48, "ngram_mod_n_max": 64}
    values = {field: options[name] for name, field in OPTION_FIELDS.items() if options.get(name) is not None}
    if not types and values.get("draft_model") is None:
        return None
    return SpeculativeParams(types=tuple(types), **{**preset, **values})
