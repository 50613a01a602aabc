"""A grammar sampler whose verdicts come from a Python token matcher (the llguidance engine's).

llama.cpp lets a program define its own sampler (``llama_sampler_init`` with a table of functions).
``MatcherGrammar(factory, lazy=...)`` is a sampler spec whose native sampler calls back into a
``TokenMatcher`` made by ``factory`` for each sampler built: the guided sampler (src/shim) then
treats it exactly as it treats llama.cpp's grammar sampler -- the chain picks from the raw logits,
the grammar checks that one token (``apply`` on one candidate: ``allows``), a refusal masks every
candidate (``apply`` on many: ``allowed`` as a bitmask over the vocabulary, applied with numpy on
the candidates in place, no Python loop over the vocabulary) and the chain picks again; ``accept``
advances it. The reasoning budget, the lazy flag, prefill, speculative runs and the batched slots
need nothing new.

A callback cannot raise into C: an exception inside one is recorded (``failure``) and the matcher
refuses every token from then on, which the guide reports as a grammar that admits no token.

``GrammarProbe(model, spec)`` holds one grammar sampler of either kind and answers, for the
differential test of the two engines, which tokens of the whole vocabulary it allows now.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from ..errors import LlamaInferenceException
from . import llama_h
from ._handle import NativeHandle
from .model import Model
from .sampler import SamplerSpec

__all__ = ["GrammarProbe", "MatcherGrammar", "TokenMatcher"]


class TokenMatcher(Protocol):
    """What a grammar engine's matcher answers for the sampler (one generation's state)."""

    def allows(self, token: int) -> bool:
        """Whether ``token`` may come next (an end-of-generation token: whether the output may end)."""

    def allowed(self) -> np.ndarray:
        """The tokens that may come next: a bool array over the vocabulary."""

    def accept(self, token: int) -> None:
        """``token`` was generated: advance (a token ``allows`` refused raises)."""

    def reset(self) -> None:
        """Back to the start (no token generated)."""

    def copy(self) -> TokenMatcher:
        """An independent matcher in the same state."""


_TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
assert _TOKEN_DATA.itemsize == ctypes.sizeof(llama_h.llama_token_data)


class _Entry:
    __slots__ = ("failure", "matcher")

    def __init__(self, matcher: TokenMatcher) -> None:
        self.matcher = matcher
        self.failure: str | None = None


# one callback table for every matcher sampler; a sampler's ctx is the key of its entry here
_ENTRIES: dict[int, _Entry] = {}
_KEYS = itertools.count(1)
_LOCK = threading.Lock()


def _entry(smpl: int) -> _Entry | None:
    key = llama_h.llama_sampler.from_address(smpl).ctx
    return _ENTRIES.get(int(key or 0))


def _register(matcher: TokenMatcher) -> int:
    with _LOCK:
        key = next(_KEYS)
        _ENTRIES[key] = _Entry(matcher)
    return key


def _fail(entry: _Entry, what: str, exc: BaseException) -> None:
    if entry.failure is None:
        entry.failure = f"{what}: {type(exc).__name__}: {exc}"


def _apply(smpl: int, cur_p: Any) -> None:
    array = cur_p.contents
    size = int(array.size)
    entry = _entry(smpl)
    if size == 0:
        return
    try:
        if entry is None or entry.failure is not None:
            raise LlamaInferenceException(entry.failure or "" if entry is not None else "the grammar sampler is gone")
        if size == 1:   # the guide's check of the chain's choice
            if not entry.matcher.allows(int(array.data[0].id)):
                array.data[0].logit = -math.inf
            return
        raw = (ctypes.c_char * (size * _TOKEN_DATA.itemsize)).from_address(ctypes.addressof(array.data.contents))
        view = np.frombuffer(memoryview(raw), dtype=_TOKEN_DATA)
        allowed = entry.matcher.allowed()
        logits = view["logit"]
        logits[~allowed[view["id"]]] = -np.inf
    except BaseException as exc:   # never into C: refuse everything, the guide reports a dead end
        if entry is not None:
            _fail(entry, "computing the allowed tokens", exc)
        data = (llama_h.llama_token_data * size).from_address(ctypes.addressof(array.data.contents))
        for i in range(size):
            data[i].logit = -math.inf


def _accept(smpl: int, token: int) -> None:
    entry = _entry(smpl)
    if entry is None or entry.failure is not None:
        return
    try:
        entry.matcher.accept(int(token))
    except BaseException as exc:
        _fail(entry, f"accepting token {token}", exc)


def _reset(smpl: int) -> None:
    entry = _entry(smpl)
    if entry is None:
        return
    try:
        entry.matcher.reset()
        entry.failure = None
    except BaseException as exc:
        _fail(entry, "resetting", exc)


def _clone(smpl: int) -> int:
    entry = _entry(smpl)
    if entry is None:
        return 0
    try:
        return _init(entry.matcher.copy())
    except BaseException as exc:
        _fail(entry, "cloning", exc)
        return 0


def _free(smpl: int) -> None:
    key = llama_h.llama_sampler.from_address(smpl).ctx
    with _LOCK:
        _ENTRIES.pop(int(key or 0), None)


_NAME = ctypes.create_string_buffer(b"llamact-matcher-grammar")
_CALLBACKS = (
    llama_h.llama_sampler_i_name(lambda smpl: ctypes.addressof(_NAME)),
    llama_h.llama_sampler_i_accept(_accept),
    llama_h.llama_sampler_i_apply(_apply),
    llama_h.llama_sampler_i_reset(_reset),
    llama_h.llama_sampler_i_clone(_clone),
    llama_h.llama_sampler_i_free(_free),
)
_IFACE = llama_h.llama_sampler_i(*_CALLBACKS)


def _init(matcher: TokenMatcher) -> int:
    from ._library import native

    key = _register(matcher)
    ptr = native().llama.llama_sampler_init(ctypes.byref(_IFACE), key)
    if not ptr:
        with _LOCK:
            _ENTRIES.pop(key, None)
        raise LlamaInferenceException("llama.cpp could not create the grammar sampler")
    return int(ptr)


def failure_of(smpl: int) -> str | None:
    """What went wrong inside a matcher sampler's callbacks (None: nothing, or not such a sampler)."""
    entry = _entry(smpl)
    return entry.failure if entry is not None else None


@dataclass(frozen=True)
class MatcherGrammar(SamplerSpec):
    """A grammar run by a ``TokenMatcher`` (``factory()`` makes one per sampler built). ``lazy``: the
    matcher waits for a trigger (a lazy grammar stays out of thoughts, as llama.cpp's does);
    ``label`` names the grammar engine in messages; ``grammar`` / ``root``: the GBNF it runs, as
    ``sampler.Grammar`` has them (the speculator's grammar drafts read it)."""

    factory: Callable[[], TokenMatcher]
    lazy: bool = False
    label: str = "matcher"
    grammar: str = ""
    root: str = "root"
    is_grammar: ClassVar[bool] = True   # a chain's grammar (SamplerChain checks accepted tokens against it)
    is_matcher: ClassVar[bool] = True

    def validate(self, vocab_size: int) -> None:
        if not callable(self.factory):
            raise LlamaInferenceException("MatcherGrammar.factory must make a token matcher")

    def build(self, lib: Any, vocab: int) -> int:
        return _init(self.factory())


class GrammarProbe(NativeHandle):
    """One grammar sampler (``spec``: a ``sampler.Grammar`` or a ``MatcherGrammar``) asked directly:
    which tokens it allows now over the whole vocabulary, and accepting tokens -- the differential
    test of the grammar engines reads both engines through the same native sampler interface."""

    _kind = "grammar probe"

    def __init__(self, model: Model, spec: Any) -> None:
        from ._library import native
        from .sampler import build_sampler

        n_vocab = model.vocab.n_tokens
        spec.validate(n_vocab)
        self._n_vocab = n_vocab
        self._lib = native().llama
        with model.pinned():
            ptr = build_sampler(spec, self._lib, model._vocab_ptr)
            super().__init__(ptr, self._lib.llama_sampler_free)
            model._adopt(self)
        self._cur = (llama_h.llama_token_data * n_vocab)()
        self._view = np.frombuffer(memoryview(self._cur), dtype=_TOKEN_DATA)

    def allowed(self) -> np.ndarray:
        """A bool array over the vocabulary: the tokens the grammar lets through now."""
        self._view["id"] = np.arange(self._n_vocab, dtype=np.int32)
        self._view["logit"] = 0.0
        self._view["p"] = 0.0
        array = llama_h.llama_token_data_array(self._cur, self._n_vocab, -1, False)
        with self.pinned() as ptr:
            self._lib.llama_sampler_apply(ptr, ctypes.byref(array))
            failure = failure_of(ptr)
        if failure:
            raise LlamaInferenceException(failure)
        return np.asarray(np.isfinite(self._view["logit"]))

    def allows(self, token: int) -> bool:
        one = llama_h.llama_token_data(int(token), 0.0, 0.0)
        array = llama_h.llama_token_data_array(ctypes.pointer(one), 1, -1, False)
        with self.pinned() as ptr:
            self._lib.llama_sampler_apply(ptr, ctypes.byref(array))
        return bool(one.logit != -math.inf)

    def accept(self, token: int) -> None:
        """Advance by ``token``; the caller checks ``allows`` first (llama.cpp aborts on an end token
        its grammar refuses, and throws on other refused tokens)."""
        from ._library import native
        from .shim import ErrorBuffer

        err = ErrorBuffer()
        with self.pinned() as ptr:
            rc = native().shim.llamact_sampler_accept(ptr, int(token), *err.args)
            failure = failure_of(ptr)
        if rc != 0 or failure:
            raise LlamaInferenceException(f"the grammar refused token {token}: {failure or err.message}")
