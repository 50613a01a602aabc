"""Sampler chains: upstream's samplers described as small validated values, built natively.

Each sampler spec is a frozen dataclass; ``SamplerChain(model, specs)`` validates every spec in
Python first (llama.cpp asserts, i.e. aborts the process, on some bad values) and then builds the
native chain, which owns and frees its samplers. Sampling itself (``sample``) stays in C.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import (
    LlamaException,
    LlamaGrammarDeadEndException,
    LlamaInferenceException,
    LlamaSamplerParameterException,
)
from ..grammar.limits import check_grammar_limits
from . import llama_h, log
from ._handle import NativeHandle
from ._library import native
from .context import Context
from .model import Model, _token_id
from .shim import ErrorBuffer
from .text import c_string

_U32 = 2**32 - 1


def _bad(spec: object, name: str, value: object, rule: str) -> LlamaInferenceException:
    kind = type(spec).__name__
    return LlamaSamplerParameterException(
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


def _text(spec: object, name: str, value: str) -> bytes:
    """A string parameter as the C string llama.cpp takes (no NUL, no lone surrogate)."""
    try:
        return c_string(value, f"{type(spec).__name__}.{name}")
    except LlamaException as exc:
        raise _bad(spec, name, value, f"must be Unicode text without NUL characters ({exc.message})") from None


def _integer(spec: object, name: str, lo: int, hi: int = 2**31 - 1) -> None:
    value = getattr(spec, name)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise _bad(spec, name, value, f"must be an integer in [{lo}, {hi}]")


class SamplerSpec:
    """Base of the sampler descriptions."""

    native_name: ClassVar[str]
    is_grammar: ClassVar[bool] = False   # a grammar (llama.cpp's or a matcher's): checked apart from the chain
    is_matcher: ClassVar[bool] = False   # a Python matcher behind llama.cpp's sampler interface (its failures
                                         # are read after each step: a callback cannot raise into C)

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
class _ProbabilityCut(SamplerSpec):
    """A cut with a probability ``p`` in [0, 1] that keeps at least ``min_keep`` tokens."""

    p: float
    min_keep: int = 1

    def validate(self, vocab_size: int) -> None:
        _finite(self, "p", 0.0, 1.0)
        _integer(self, "min_keep", 0)


@dataclass(frozen=True)
class TopP(_ProbabilityCut):
    def build(self, lib: Any, vocab: int) -> int:
        return lib.llama_sampler_init_top_p(self.p, self.min_keep)


@dataclass(frozen=True)
class MinP(_ProbabilityCut):
    def build(self, lib: Any, vocab: int) -> int:
        return lib.llama_sampler_init_min_p(self.p, self.min_keep)


@dataclass(frozen=True)
class Typical(_ProbabilityCut):
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
        if isinstance(self.seq_breakers, str) or any(not isinstance(s, str) or not s for s in self.seq_breakers):
            raise _bad(self, "seq_breakers", self.seq_breakers, "must be a sequence of non-empty strings")
        for breaker in self.seq_breakers:
            _text(self, "seq_breakers", breaker)

    def build(self, lib: Any, vocab: int) -> int:
        # each breaker costs llama.cpp a scan of the vocabulary; a repeated one adds nothing it matches
        raw = [_text(self, "seq_breakers", s) for s in dict.fromkeys(self.seq_breakers)]
        arr = (ctypes.c_char_p * len(raw))(*raw)
        return lib.llama_sampler_init_dry(
            vocab, self.multiplier, self.base, self.allowed_length, self.penalty_last_n, arr, len(raw)
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
    is_grammar: ClassVar[bool] = True
    # False hands the text to llama.cpp unchecked: only for asking llama.cpp's own verdict (the
    # parity tests); a grammar from anyone else must pass the bounded check
    front_end_check: bool = True

    @property
    def lazy(self) -> bool:
        return bool(self.trigger_patterns or self.trigger_tokens)

    def validate(self, vocab_size: int) -> None:
        if not isinstance(self.grammar, str) or not self.grammar.strip():
            raise _bad(self, "grammar", self.grammar, "must be non-empty GBNF text")
        if not isinstance(self.root, str) or not self.root:
            raise _bad(self, "root", self.root, "must be the name of a rule")
        _text(self, "grammar", self.grammar)
        _text(self, "root", self.root)
        # every grammar passes the bounded check before llama.cpp parses it (grammar.limits: its
        # parser recurses per group, its per-token cost grows with the alternatives)
        if self.front_end_check:
            check_grammar_limits(self.grammar, root=self.root)
        for pattern in self.trigger_patterns:
            _text(self, "trigger_patterns", pattern)
        for tok in self.trigger_tokens:
            try:
                _token_id(tok, vocab_size)
            except LlamaException:
                raise _bad(self, "trigger_tokens", tok, f"token ids must be integers in [0, {vocab_size})") from None

    def build(self, lib: Any, vocab: int) -> int:
        # Through the shim: llama.cpp throws C++ exceptions here (std::regex_error for a trigger
        # pattern libstdc++ rejects), which would otherwise terminate the process.
        shim_lib = native().shim
        err = ErrorBuffer()
        grammar, root = _text(self, "grammar", self.grammar), _text(self, "root", self.root)
        if not self.lazy:
            ptr = shim_lib.llamact_sampler_init_grammar(vocab, grammar, root, *err.args)
        else:
            raw_patterns = [_text(self, "trigger_patterns", p) for p in self.trigger_patterns]
            patterns = (ctypes.c_char_p * len(raw_patterns))(*raw_patterns)
            tokens = (llama_h.llama_token * len(self.trigger_tokens))(*(int(t) for t in self.trigger_tokens))
            ptr = shim_lib.llamact_sampler_init_grammar_lazy_patterns(
                vocab, grammar, root, patterns, len(raw_patterns), tokens, len(self.trigger_tokens), *err.args,
            )
        if not ptr and err.message:
            raise LlamaSamplerParameterException(
                f"llama.cpp rejected the Grammar sampler: {err.message}"
                + (" (check the trigger patterns: they are ECMAScript regular expressions)" if self.lazy else ""),
                {"sampler": "Grammar", "native_error": err.message},
            )
        return int(ptr or 0)


GRAMMAR_DEAD_END = "the grammar admits no token at this point of the output"   # the shim's words
# llama.cpp's words for a grammar already complete when the next token arrives
_GRAMMAR_ENDED = "Unexpected empty grammar stack"


def native_failure(what: str, message: str, closed: str) -> LlamaInferenceException:
    """The exception for a C++ exception that escaped sampling; a grammar that admits no token is the
    request's constraint failing, not llama.cpp's."""
    text = f"{what} failed inside llama.cpp: {message or 'unknown error'}; {closed}"
    # a token the caller passed to accept() that the grammar refuses is the caller's mistake, not a
    # dead end; one the sampler itself produced means the grammar had nowhere to go
    sampled = not what.startswith("accepting")
    if GRAMMAR_DEAD_END in (message or "") or (sampled and _GRAMMAR_ENDED in (message or "")):
        return LlamaGrammarDeadEndException(
            f"{GRAMMAR_DEAD_END}: no token of this model can continue the output the grammar requires (check the "
            f"grammar or schema: e.g. a minimum above its maximum, or a token the model never produces); {closed}",
            {"native_error": message})
    return LlamaInferenceException(text, {"native_error": message})


# fd 2 is process-wide: swapping it is serialised, and only done on the failure path below.
_STDERR_SWAP = threading.Lock()
_PARSE_ERROR = b"error parsing grammar: "


def _grammar_parse_error(vocab: int, grammar: bytes, root: bytes) -> str | None:
    """Why llama.cpp's GBNF parser rejects ``grammar``, or None if it does not.

    The parser prints its reason with ``fprintf(stderr)`` (``"parse: error parsing grammar:
    <why>\n\n<grammar>\n"``), not through the log callback, so the only way to read it is to
    parse again with file descriptor 2 sent to a file. That is process-wide: it happens only here,
    after a grammar was already rejected (the first attempt printed the reason where the user
    sees stderr), one thread at a time, and whatever else reached fd 2 meanwhile (other threads)
    is passed on afterwards, unchanged.
    """
    shim_lib = native().shim
    err = ErrorBuffer()
    with _STDERR_SWAP, tempfile.TemporaryFile() as sink:
        with contextlib.suppress(AttributeError, ValueError, OSError):
            sys.stderr.flush()
        try:
            saved = os.dup(2)
        except OSError:  # no stderr at all: nothing to read the reason from
            return None
        try:
            os.dup2(sink.fileno(), 2)
            try:
                ptr = shim_lib.llamact_sampler_init_grammar(vocab, grammar, root, *err.args)
            finally:
                os.dup2(saved, 2)
        finally:
            os.close(saved)
        if ptr:  # it parses after all: not a parse error
            native().llama.llama_sampler_free(ptr)
        sink.seek(0)
        data = sink.read()
    # other threads' first attempts may have printed their own reports meanwhile (each one
    # fprintf, so whole): ours is the report that ends with our grammar, read back from there
    end = data.find(b"\n\n" + grammar + b"\n")
    start = data.rfind(_PARSE_ERROR, 0, end) if end != -1 else -1
    if start == -1:
        others, reason = data, None
    else:
        line_start = data.rfind(b"\n", 0, start) + 1
        why = data[start + len(_PARSE_ERROR) : end].decode("utf-8", errors="replace")
        reason = "error parsing grammar: " + (why.splitlines() or [""])[0].strip()
        others = data[:line_start] + data[end + len(grammar) + 3 :]
    with contextlib.suppress(OSError):
        while others:
            others = others[os.write(2, others) :]
    return reason


def validate_specs(specs: Sequence[SamplerSpec], n_vocab: int) -> tuple[SamplerSpec, ...]:
    """Check every spec in Python (llama.cpp asserts, i.e. aborts, on some bad values)."""
    if not specs:
        raise LlamaInferenceException("a sampler chain needs at least one sampler (e.g. Greedy())")
    for spec in specs:
        if not isinstance(spec, SamplerSpec):
            raise LlamaInferenceException(f"not a sampler spec: {spec!r}")
        spec.validate(n_vocab)
    return tuple(specs)


def build_sampler(spec: SamplerSpec, lib: Any, vocab_ptr: int) -> int:
    """One native sampler from a validated ``spec`` (the caller owns and frees it; the model must be
    pinned). Raises LlamaInferenceException with llama.cpp's reason when it refuses."""
    position = log.mark()
    smpl = spec.build(lib, vocab_ptr)
    if not smpl:
        reasons = log.problems_since(position)
        if isinstance(spec, Grammar) and any("failed to parse grammar" in r for r in reasons):
            why = _grammar_parse_error(vocab_ptr, spec.grammar.encode(), spec.root.encode())
            reasons = [why, *reasons] if why else reasons
        # a grammar llama.cpp refuses ("a"**: left recursion) is the request's; any other spec was checked
        # in Python first, so its refusal is llama.cpp's failure
        error = LlamaSamplerParameterException if isinstance(spec, Grammar) else LlamaInferenceException
        raise error(
            f"llama.cpp rejected the {type(spec).__name__} sampler: "
            f"{'; '.join(reasons) if reasons else 'no reason given'}",
            {"sampler": type(spec).__name__, "native_log": reasons},
        )
    return smpl


class SamplerChain(NativeHandle):
    """A native sampler chain built from specs, applied in order."""

    _kind = "sampler chain"

    def __init__(self, model: Model, specs: Sequence[SamplerSpec], no_perf: bool = True) -> None:
        n_vocab = model.vocab.n_tokens
        self.specs = validate_specs(specs, n_vocab)
        lib = model._lib
        params = lib.llama_sampler_chain_default_params()
        params.no_perf = no_perf
        self.model = model
        # Exactly one greedy sampler: the token loop may take the argmax itself (src/shim).
        self.greedy_only = len(self.specs) == 1 and isinstance(self.specs[0], Greedy)
        self._n_vocab = n_vocab
        self._shim = native().shim
        self._err = ErrorBuffer()
        self._grammars: list[int] = []  # the chain's grammar samplers, checked by accept()
        self.matchers: list[int] = []   # those run by a Python matcher (native.matcher_grammar)
        with model.pinned():  # grammar samplers point into the vocabulary: the model outlives the chain
            chain = lib.llama_sampler_chain_init(params)
            super().__init__(chain, lib.llama_sampler_free)
            self._lib = lib
            model._adopt(self)
            vocab_ptr = model._vocab_ptr
            for spec in self.specs:
                try:
                    smpl = build_sampler(spec, lib, vocab_ptr)
                except BaseException:
                    self.close()
                    raise
                lib.llama_sampler_chain_add(chain, smpl)
                if spec.is_grammar:
                    self._grammars.append(smpl)
                if spec.is_matcher:
                    self.matchers.append(smpl)

    def sample(self, context: Context, index: int = -1) -> int:
        """Sample (and accept) the next token from ``context``'s logits at output ``index``."""
        position = log.mark()
        with context.pinned() as ctx, self.pinned() as chain:  # context first, as TokenStepper does
            if not self._lib.llama_get_logits_ith(ctx, index):  # llama.cpp asserts (aborts) on this
                reasons = log.problems_since(position)
                raise LlamaInferenceException(
                    f"no logits to sample from at output {index}: decode a batch that requests logits "
                    f"for that token first ({'; '.join(reasons) or 'no reason given'})",
                    {"index": index, "native_log": reasons},
                )
            token = int(self._shim.llamact_sampler_sample(chain, ctx, index, *self._err.args))
        if token == llama_h.LLAMA_TOKEN_NULL:
            raise self.abandon("sampling", self._err.message)
        return token

    def abandon(self, what: str, message: str) -> LlamaInferenceException:
        """A C++ exception escaped the sampler: its state is undefined now, so close the chain and
        return the exception to raise."""
        self.close()
        return native_failure(what, message, "the sampler chain was closed")

    def accept(self, token: int) -> None:
        """Record ``token`` as generated (``sample`` already does for the tokens it returns).

        llama.cpp aborts the process on a token outside the vocabulary, or one a grammar does not
        allow at this point; both raise LlamaInferenceException here instead. A C++ exception inside
        llama.cpp (a lazy grammar's trigger token whose text goes on past the trigger with what the
        grammar rejects) also raises it, and closes the chain, whose state is then undefined.
        """
        self.check_open()
        token = _token_id(token, self._n_vocab)
        with self.pinned() as chain:
            for grammar in self._grammars:
                candidate = llama_h.llama_token_data(token, 0.0, 0.0)
                array = llama_h.llama_token_data_array(ctypes.pointer(candidate), 1, -1, False)
                self._lib.llama_sampler_apply(grammar, ctypes.byref(array))
                if candidate.logit == -math.inf:
                    raise LlamaInferenceException(
                        f"token {token} is not allowed by the grammar at this point; "
                        "accept only tokens the chain could have sampled",
                        {"token": token},
                    )
            failed = self._shim.llamact_sampler_accept(chain, token, *self._err.args) != 0
        if failed:
            raise self.abandon(f"accepting token {token}", self._err.message)

    def reset(self) -> None:
        with self.pinned() as chain:
            self._lib.llama_sampler_reset(chain)

    def perf(self) -> dict[str, float]:
        with self.pinned() as chain:
            data = self._lib.llama_perf_sampler(chain)
        return {name: float(getattr(data, name)) for name, _ in data._fields_}
