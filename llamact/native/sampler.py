"""Sampler chains: upstream's samplers described as small validated values, built natively.

Each sampler spec is a frozen dataclass; ``SamplerChain(model, specs)`` validates every spec in
Python first (llama.cpp asserts, i.e. aborts the process, on some bad values) and then builds the
native chain, which owns and frees its samplers. Sampling itself (``sample``) stays in C.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import LlamaInferenceException
from . import llama_h, log
from ._handle import NativeHandle
from .context import Context
from .model import Model

_U32 = 2**32 - 1


def _bad(spec: object, name: str, value: object, rule: str) -> LlamaInferenceException:
    kind = type(spec).__name__
    return LlamaInferenceException(
        f"invalid sampler parameter {kind}.{name}={value!r}: {rule}", {"sampler": kind, name: value}
    )


def _finite(spec: object, name: str, lo: float | None = None, hi: float | None = None) -> None:
    value = getattr(spec, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _bad(spec, name, value, "must be a finite number")
    if lo is not None and value < lo:
        raise _bad(spec, name, value, f"must be >= {lo}")
    if hi is not None and value > hi:
        raise _bad(spec, name, value, f"must be <= {hi}")


def _integer(spec: object, name: str, lo: int, hi: int = 2**31 - 1) -> None:
    value = getattr(spec, name)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise _bad(spec, name, value, f"must be an integer in [{lo}, {hi}]")


class SamplerSpec:
    """Base of the sampler descriptions."""

    native_name: ClassVar[str]

    def validate(self, vocab_size: int) -> None:  # pragma: no cover - overridden
        pass

    def build(self, lib: Any, vocab: int) -> int:  # pragma: no cover - overridden
        raise NotImplementedError


@dataclass(frozen=True)
class Greedy(SamplerSpec):
    def validate(self, vocab_size: int) -> None:
        pass

    def build(self, lib: Any, vocab: int) -> int:
        return lib.llama_sampler_init_greedy()


@dataclass(frozen=True)
class Dist(SamplerSpec):
    """Draw from the distribution; ``seed`` None = a random seed each time."""

    seed: int | None = None

    def validate(self, vocab_size: int) -> None:
        if self.seed is not None:
            _integer(self, "seed", 0, _U32 - 1)

    def build(self, lib: Any, vocab: int) -> int:
        return lib.llama_sampler_init_dist(_U32 if self.seed is None else self.seed)


@dataclass(frozen=True)
class TopK(SamplerSpec):
    k: int

    def validate(self, vocab_size: int) -> None:
        _integer(self, "k", 0)

    def build(self, lib: Any, vocab: int) -> int:
        return lib.llama_sampler_init_top_k(self.k)


@dataclass(frozen=True)
class TopP(SamplerSpec):
    p: float
    min_keep: int = 1

    def validate(self, vocab_size: int) -> None:
        _finite(self, "p", 0.0, 1.0)
        _integer(self, "min_keep", 0)

    def build(self, lib: Any, vocab: int) -> int:
        return lib.llama_sampler_init_top_p(self.p, self.min_keep)


@dataclass(frozen=True)
class MinP(SamplerSpec):
    p: float
    min_keep: int = 1

    def validate(self, vocab_size: int) -> None:
        _finite(self, "p", 0.0, 1.0)
        _integer(self, "min_keep", 0)

    def build(self, lib: Any, vocab: int) -> int:
        return lib.llama_sampler_init_min_p(self.p, self.min_keep)


@dataclass(frozen=True)
class Typical(SamplerSpec):
    p: float
    min_keep: int = 1

    def validate(self, vocab_size: int) -> None:
        _finite(self, "p", 0.0, 1.0)
        _integer(self, "min_keep", 0)

    def build(self, lib: Any, vocab: int) -> int:
        return lib.llama_sampler_init_typical(self.p, self.min_keep)


@dataclass(frozen=True)
class Temp(SamplerSpec):
    """Temperature; <= 0 keeps only the most likely token (upstream's rule)."""

    t: float

    def validate(self, vocab_size: int) -> None:
        _finite(self, "t")

    def build(self, lib: Any, vocab: int) -> int:
        return lib.llama_sampler_init_temp(self.t)


@dataclass(frozen=True)
class TempExt(SamplerSpec):
    """Dynamic temperature (entropy based): t +/- delta, shaped by exponent."""

    t: float
    delta: float
    exponent: float = 1.0

    def validate(self, vocab_size: int) -> None:
        _finite(self, "t")
        _finite(self, "delta", 0.0)
        _finite(self, "exponent", 0.0)

    def build(self, lib: Any, vocab: int) -> int:
        return lib.llama_sampler_init_temp_ext(self.t, self.delta, self.exponent)


@dataclass(frozen=True)
class Xtc(SamplerSpec):
    """Exclude Top Choices: with probability p, drop tokens above threshold t except the last."""

    p: float
    t: float
    min_keep: int = 1
    seed: int | None = None

    def validate(self, vocab_size: int) -> None:
        _finite(self, "p", 0.0, 1.0)
        _finite(self, "t", 0.0, 1.0)
        _integer(self, "min_keep", 0)
        if self.seed is not None:
            _integer(self, "seed", 0, _U32 - 1)

    def build(self, lib: Any, vocab: int) -> int:
        return lib.llama_sampler_init_xtc(self.p, self.t, self.min_keep, _U32 if self.seed is None else self.seed)


@dataclass(frozen=True)
class TopNSigma(SamplerSpec):
    n: float

    def validate(self, vocab_size: int) -> None:
        _finite(self, "n")

    def build(self, lib: Any, vocab: int) -> int:
        return lib.llama_sampler_init_top_n_sigma(self.n)


@dataclass(frozen=True)
class Mirostat(SamplerSpec):
    """Mirostat v1; a final sampler (it selects the token)."""

    tau: float = 5.0
    eta: float = 0.1
    m: int = 100
    seed: int | None = None

    def validate(self, vocab_size: int) -> None:
        _finite(self, "tau", 0.0)
        _finite(self, "eta", 0.0)
        _integer(self, "m", 1)
        if self.seed is not None:
            _integer(self, "seed", 0, _U32 - 1)

    def build(self, lib: Any, vocab: int) -> int:
        n_vocab = lib.llama_vocab_n_tokens(vocab)
        seed = _U32 if self.seed is None else self.seed
        return lib.llama_sampler_init_mirostat(n_vocab, seed, self.tau, self.eta, self.m)


@dataclass(frozen=True)
class MirostatV2(SamplerSpec):
    tau: float = 5.0
    eta: float = 0.1
    seed: int | None = None

    def validate(self, vocab_size: int) -> None:
        _finite(self, "tau", 0.0)
        _finite(self, "eta", 0.0)
        if self.seed is not None:
            _integer(self, "seed", 0, _U32 - 1)

    def build(self, lib: Any, vocab: int) -> int:
        return lib.llama_sampler_init_mirostat_v2(_U32 if self.seed is None else self.seed, self.tau, self.eta)


@dataclass(frozen=True)
class Penalties(SamplerSpec):
    """Repetition / frequency / presence penalties over the last ``last_n`` tokens (-1 = context)."""

    last_n: int = 64
    repeat: float = 1.0
    frequency: float = 0.0
    presence: float = 0.0

    def validate(self, vocab_size: int) -> None:
        _integer(self, "last_n", -1)
        _finite(self, "repeat", 0.0)
        _finite(self, "frequency")
        _finite(self, "presence")
        if self.repeat == 0:
            raise _bad(self, "repeat", self.repeat, "must be > 0 (1.0 disables it)")

    def build(self, lib: Any, vocab: int) -> int:
        n_vocab = lib.llama_vocab_n_tokens(vocab)
        return lib.llama_sampler_init_penalties(n_vocab, self.last_n, self.repeat, self.frequency, self.presence)


@dataclass(frozen=True)
class Dry(SamplerSpec):
    """DRY ("don't repeat yourself") n-gram penalty."""

    multiplier: float = 0.0
    base: float = 1.75
    allowed_length: int = 2
    penalty_last_n: int = -1
    seq_breakers: tuple[str, ...] = ("\n", ":", '"', "*")

    def validate(self, vocab_size: int) -> None:
        _finite(self, "multiplier", 0.0)
        _finite(self, "base", 1.0)
        _integer(self, "allowed_length", 0)
        _integer(self, "penalty_last_n", -1)
        if any(not isinstance(s, str) or not s for s in self.seq_breakers):
            raise _bad(self, "seq_breakers", self.seq_breakers, "must be non-empty strings")

    def build(self, lib: Any, vocab: int) -> int:
        arr = (ctypes.c_char_p * len(self.seq_breakers))(*(s.encode() for s in self.seq_breakers))
        return lib.llama_sampler_init_dry(
            vocab, self.multiplier, self.base, self.allowed_length, self.penalty_last_n, arr, len(self.seq_breakers)
        )


@dataclass(frozen=True)
class LogitBias(SamplerSpec):
    """Add ``bias`` to token logits (-inf bans a token)."""

    biases: Mapping[int, float] = field(default_factory=dict)

    def validate(self, vocab_size: int) -> None:
        for tok, bias in self.biases.items():
            if isinstance(tok, bool) or not isinstance(tok, int) or not 0 <= tok < vocab_size:
                raise _bad(self, "biases", tok, f"token ids must be in [0, {vocab_size})")
            if not isinstance(bias, (int, float)) or math.isnan(bias):
                raise _bad(self, "biases", bias, "bias must be a number")

    def build(self, lib: Any, vocab: int) -> int:
        items = list(self.biases.items())
        arr = (llama_h.llama_logit_bias * len(items))()
        for i, (tok, bias) in enumerate(items):
            arr[i].token = tok
            arr[i].bias = bias
        n_vocab = lib.llama_vocab_n_tokens(vocab)
        return lib.llama_sampler_init_logit_bias(n_vocab, len(items), arr)


@dataclass(frozen=True)
class Grammar(SamplerSpec):
    """Constrain to a GBNF grammar. With ``trigger_patterns`` / ``trigger_tokens`` it is lazy:
    unconstrained until a pattern matches the output (or a trigger token is sampled)."""

    grammar: str
    root: str = "root"
    trigger_patterns: tuple[str, ...] = ()
    trigger_tokens: tuple[int, ...] = ()

    @property
    def lazy(self) -> bool:
        return bool(self.trigger_patterns or self.trigger_tokens)

    def validate(self, vocab_size: int) -> None:
        if not isinstance(self.grammar, str) or not self.grammar.strip():
            raise _bad(self, "grammar", self.grammar, "must be non-empty GBNF text")
        if "\x00" in self.grammar or "\x00" in self.root:
            raise _bad(self, "grammar", "...", "must not contain NUL characters")
        for tok in self.trigger_tokens:
            if not 0 <= tok < vocab_size:
                raise _bad(self, "trigger_tokens", tok, f"token ids must be in [0, {vocab_size})")

    def build(self, lib: Any, vocab: int) -> int:
        if not self.lazy:
            return lib.llama_sampler_init_grammar(vocab, self.grammar.encode(), self.root.encode())
        patterns = (ctypes.c_char_p * len(self.trigger_patterns))(*(p.encode() for p in self.trigger_patterns))
        tokens = (llama_h.llama_token * len(self.trigger_tokens))(*self.trigger_tokens)
        return lib.llama_sampler_init_grammar_lazy_patterns(
            vocab, self.grammar.encode(), self.root.encode(),
            patterns, len(self.trigger_patterns), tokens, len(self.trigger_tokens),
        )


class SamplerChain(NativeHandle):
    """A native sampler chain built from specs, applied in order."""

    _kind = "sampler chain"

    def __init__(self, model: Model, specs: Sequence[SamplerSpec], no_perf: bool = True) -> None:
        if not specs:
            raise LlamaInferenceException("a sampler chain needs at least one sampler (e.g. Greedy())")
        vocab = model.vocab
        n_vocab = vocab.n_tokens
        for spec in specs:
            if not isinstance(spec, SamplerSpec):
                raise LlamaInferenceException(f"not a sampler spec: {spec!r}")
            spec.validate(n_vocab)
        lib = model._lib
        params = lib.llama_sampler_chain_default_params()
        params.no_perf = no_perf
        chain = lib.llama_sampler_chain_init(params)
        super().__init__(chain, lib.llama_sampler_free)
        self._lib = lib
        self.model = model
        self.specs = tuple(specs)
        model._adopt(self)  # grammar samplers point into the vocabulary
        for spec in specs:
            position = log.mark()
            smpl = spec.build(lib, vocab.ptr)
            if not smpl:
                self.close()
                reasons = log.problems_since(position)
                raise LlamaInferenceException(
                    f"llama.cpp rejected the {type(spec).__name__} sampler: "
                    f"{'; '.join(reasons) if reasons else 'no reason given'}",
                    {"sampler": type(spec).__name__, "native_log": reasons},
                )
            lib.llama_sampler_chain_add(chain, smpl)

    def sample(self, context: Context, index: int = -1) -> int:
        """Sample (and accept) the next token from ``context``'s logits at output ``index``."""
        return int(self._lib.llama_sampler_sample(self.ptr, context.ptr, index))

    def accept(self, token: int) -> None:
        self._lib.llama_sampler_accept(self.ptr, token)

    def reset(self) -> None:
        self._lib.llama_sampler_reset(self.ptr)

    def perf(self) -> dict[str, float]:
        data = self._lib.llama_perf_sampler(self.ptr)
        return {name: float(getattr(data, name)) for name, _ in data._fields_}
