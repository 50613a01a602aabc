"""The reasoning budget: a native sampler (src/shim/reasoning_budget.cpp) that ends a thought after
a number of tokens, with upstream's semantics (common/reasoning-budget.cpp).

``ReasoningBudgetSpec`` describes one as token sequences: any ``start`` sequence opens a thought,
any ``end`` sequence closes it, and when ``budget`` tokens of the thought are used up the sampler
forces ``forced`` (an optional message, then the first end tag) one token at a time. The guided
sampler (``guided.py``) builds it beside its chain; ``ReasoningBudget`` wraps one on its own, as
upstream's unit tests drive it (feed tokens, see which token it forces).
"""

from __future__ import annotations

import ctypes
import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import LlamaInferenceException
from . import llama_h
from ._handle import NativeHandle
from ._library import native
from .model import Model
from .shim import ErrorBuffer

UNLIMITED = 2**31 - 1  # upstream's INT_MAX for "no budget" (-1 in the request)


class BudgetState(enum.IntEnum):
    """The sampler's state, numbered as upstream's ``common_reasoning_budget_state``."""

    IDLE = 0          # waiting for a start sequence
    COUNTING = 1      # inside the thought, counting its tokens
    FORCING = 2       # the budget ran out: forcing the end sequence
    WAITING_UTF8 = 3  # the budget ran out inside a UTF-8 character: letting it complete first
    DONE = 4          # the thought ended (a new start sequence opens a new budget)


def _bad(name: str, value: object, rule: str) -> LlamaInferenceException:
    return LlamaInferenceException(f"invalid reasoning budget {name}={value!r}: {rule}", {name: repr(value)})


@dataclass(frozen=True)
class ReasoningBudgetSpec:
    """A reasoning budget: token sequences that open (``start``) and close (``end``) a thought, the
    tokens forced when ``budget`` tokens are used up, and the state it starts in."""

    start: tuple[tuple[int, ...], ...]
    end: tuple[tuple[int, ...], ...]
    forced: tuple[int, ...]
    budget: int = UNLIMITED
    initial_state: BudgetState = BudgetState.IDLE

    def validate(self, n_vocab: int | None) -> None:
        """Raise LlamaInferenceException on a malformed spec (``n_vocab`` None: any id >= 0)."""
        if isinstance(self.budget, bool) or not isinstance(self.budget, int) or not 0 <= self.budget <= UNLIMITED:
            raise _bad("budget", self.budget, f"must be an integer in [0, {UNLIMITED}] ({UNLIMITED}: unlimited)")
        if not isinstance(self.initial_state, int) or self.initial_state not in set(BudgetState):
            raise _bad("initial_state", self.initial_state, "must be a BudgetState")
        limit = n_vocab if n_vocab is not None else 2**31 - 1
        for name, seqs in (("start", self.start), ("end", self.end), ("forced", (self.forced,))):
            for seq in seqs:
                for token in seq:
                    if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < limit:
                        raise _bad(name, seq, f"token ids must be integers in [0, {limit})")

    def build(self, vocab_ptr: int | None) -> int:
        """The native sampler (the caller owns it), or LlamaInferenceException."""
        def flat(seqs: Sequence[Sequence[int]]) -> tuple[ctypes.Array[ctypes.c_int32], ctypes.Array[ctypes.c_int32]]:
            tokens = [t for seq in seqs for t in seq]
            return (llama_h.llama_token * max(1, len(tokens)))(*tokens), (ctypes.c_int32 * max(1, len(seqs)))(
                *(len(seq) for seq in seqs))

        start_tokens, start_lens = flat(self.start)
        end_tokens, end_lens = flat(self.end)
        forced = (llama_h.llama_token * max(1, len(self.forced)))(*self.forced)
        err = ErrorBuffer()
        ptr = native().shim.llamact_reasoning_budget_init(
            vocab_ptr, start_tokens, start_lens, len(self.start), end_tokens, end_lens, len(self.end),
            forced, len(self.forced), self.budget, int(self.initial_state), *err.args,
        )
        if not ptr:
            raise LlamaInferenceException(f"could not create the reasoning budget sampler: {err.message}",
                                          {"native_error": err.message})
        return int(ptr)


class ReasoningBudget(NativeHandle):
    """A reasoning-budget sampler on its own. With a ``model``, token ids are checked against its
    vocabulary and a budget that runs out inside a UTF-8 character waits for it to complete; without
    one (as upstream's unit tests), every token counts as a whole character."""

    _kind = "reasoning budget"

    def __init__(self, spec: ReasoningBudgetSpec, model: Model | None = None) -> None:
        spec.validate(model.vocab.n_tokens if model is not None else None)
        self.spec = spec
        self._shim = native().shim
        self._lib = native().llama
        self._err = ErrorBuffer()
        if model is None:
            super().__init__(spec.build(None), self._lib.llama_sampler_free)
            return
        with model.pinned():
            super().__init__(spec.build(model._vocab_ptr), self._lib.llama_sampler_free)
            model._adopt(self)

    @property
    def state(self) -> BudgetState:
        with self.pinned() as ptr:
            return BudgetState(self._shim.llamact_reasoning_budget_state(ptr))

    @property
    def end_match(self) -> tuple[int, ...] | None:
        """The end sequence that closed the thought, or None."""
        with self.pinned() as ptr:
            out = (llama_h.llama_token * 64)()
            n = int(self._shim.llamact_reasoning_budget_end_match(ptr, out, 64))
            if n > 64:
                out = (llama_h.llama_token * n)()
                n = int(self._shim.llamact_reasoning_budget_end_match(ptr, out, n))
        return tuple(out[:n]) if n >= 0 else None

    def accept(self, token: int) -> None:
        if isinstance(token, bool) or not isinstance(token, int) or token < 0:
            raise LlamaInferenceException(f"token ids are non-negative integers, got {token!r}")
        with self.pinned() as ptr:
            if self._shim.llamact_sampler_accept(ptr, token, *self._err.args) != 0:
                raise LlamaInferenceException(f"the reasoning budget failed to accept token {token}: "
                                              f"{self._err.message}")

    def apply(self, logits: Sequence[float]) -> list[float]:
        """The logits after the sampler (candidate i is token i): unchanged, or all -inf but the
        token it forces."""
        n = len(logits)
        data = (llama_h.llama_token_data * max(1, n))()
        for i, logit in enumerate(logits):
            data[i] = llama_h.llama_token_data(i, float(logit), 0.0)
        array = llama_h.llama_token_data_array(data, n, -1, False)
        with self.pinned() as ptr:
            self._lib.llama_sampler_apply(ptr, ctypes.byref(array))
        return [data[i].logit for i in range(n)]

    def forced_token(self, n_vocab: int) -> int | None:
        """The one token the sampler lets through now among ``n_vocab`` candidates, or None when it
        forces nothing (upstream's ``get_forced_token`` in its tests)."""
        finite = [i for i, x in enumerate(self.apply([math.log(i + 1) for i in range(n_vocab)])) if x != -math.inf]
        return finite[0] if len(finite) == 1 else None

    def force(self) -> bool:
        """End the thought now (COUNTING -> FORCING); False, changing nothing, in any other state."""
        with self.pinned() as ptr:
            return bool(self._shim.llamact_reasoning_budget_force(ptr))

    def clone(self) -> ReasoningBudget:
        """An independent copy with the same state."""
        with self.pinned() as ptr:
            copy = int(self._lib.llama_sampler_clone(ptr) or 0)
        if not copy:
            raise LlamaInferenceException("llama.cpp could not clone the reasoning budget sampler")
        other = ReasoningBudget.__new__(ReasoningBudget)
        other.spec = self.spec
        other._shim, other._lib, other._err = self._shim, self._lib, ErrorBuffer()
        NativeHandle.__init__(other, copy, self._lib.llama_sampler_free)
        owner = self._owner
        if owner is not None:
            with owner.pinned():
                owner._adopt(other)
        return other
