"""The native side of one generation: decode the prompt, then one native call per token.

``TokenStepper(context, sampler)`` owns everything the per-token call takes, converted to ctypes
once. ``prefill(tokens)`` decodes the prompt in batches of ``n_batch``; each ``step()`` decodes the
previous token and samples the next (``llamact_step`` in src/shim), leaving its text in ``piece``.
``sampler`` is a plain ``SamplerChain`` or a ``GuidedSampler`` (grammar and reasoning budget beside
the chain), whose step is ``llamact_guided_step``.

Thread safety: every native call runs with the context and the chain pinned (their locks held
for the call only, never across calls). A ``close()`` from another thread (of the context, the
chain or the model) aborts the decode in progress through the context's abort flag, waits for the
call to return, then frees; the next call raises LlamaStateException. No call ever passes a
pointer that was freed. Pinning costs two uncontended lock round trips per token, nothing next
to a decode.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

from ..errors import LlamaInferenceException
from . import forks, llama_h
from ._library import native
from .batch import Batch
from .context import Context
from .guided import GuidedSampler
from .llama_h import LLAMA_TOKEN_NULL
from .sampler import SamplerChain
from .shim import ErrorBuffer

# What step() returns instead of a token when generation cannot go on.
STEP_EOG = -2  # the model produced an end-of-generation token
STEP_CANCELLED = -3  # an abort was requested (Context.request_abort) or the context is closing
STEP_CONTEXT_FULL = -4  # no room left in the context

_PIECE_CAP = 256
string_at = ctypes.string_at


class TokenStepper:
    """Prompt prefill and per-token steps of one generation over ``context`` and ``sampler``."""

    __slots__ = (
        "_context", "_sampler", "_ctx_lock", "_chain_lock", "_lib", "_decode", "_step", "_err", "_head",
        "_tail", "_piece_buf", "_piece_len", "_eog", "_decode_rc", "_render_special", "_vocab_ptr", "_prev",
        "_guided", "piece", "end_token", "_governor", "_perf", "_pos", "_matchers",
    )

    def __init__(self, context: Context, sampler: SamplerChain | GuidedSampler, render_special: bool = False) -> None:
        shim_lib = native().shim
        with context.pinned() as ctx_ptr, sampler.pinned() as chain_ptr:
            vocab_ptr = context.model._vocab_ptr  # alive while the context is open
        self._context, self._sampler = context, sampler
        self._ctx_lock, self._chain_lock = context._close_lock, sampler._close_lock
        self._lib = context._lib
        guided = self._guided = isinstance(sampler, GuidedSampler)
        # a guided sampler (grammar and reasoning budget beside the chain) has its own step, which
        # knows whether its chain is greedy; a plain chain's step is told
        self._decode = shim_lib.llamact_decode
        self._step = shim_lib.llamact_guided_step if guided else shim_lib.llamact_step
        self._err = ErrorBuffer()
        self._piece_buf = ctypes.create_string_buffer(_PIECE_CAP)
        self._piece_len, self._eog, self._decode_rc = ctypes.c_int32(0), ctypes.c_int32(0), ctypes.c_int32(0)
        self._vocab_ptr = vocab_ptr
        self._render_special = render_special
        abort = ctypes.c_void_p(context._abort_ptr)
        self._head = (ctypes.c_void_p(ctx_ptr), ctypes.c_void_p(chain_ptr), ctypes.c_void_p(vocab_ptr), abort)
        greedy = () if guided else (ctypes.c_int32(int(sampler.greedy_only)),)
        self._tail = (
            *greedy, ctypes.c_int32(int(render_special)), self._piece_buf,
            ctypes.c_int32(_PIECE_CAP), ctypes.byref(self._piece_len), ctypes.byref(self._eog),
            ctypes.byref(self._decode_rc), *self._err.args,
        )
        self._prev = LLAMA_TOKEN_NULL
        # a plain chain's Python grammar (llguidance's): a failure inside its callback refuses every
        # token, and the chain would then pick one anyway -- read after each step, raised
        self._matchers = () if guided else tuple(getattr(sampler, "matchers", ()))
        self.piece = b""
        self.end_token: int | None = None  # the end-of-generation token step() sampled, if any
        # the decode thread count follows the machine's load (context.governor; None: fixed)
        self._governor = context.governor
        self._perf = self._lib.llama_perf_context
        # None: each token goes to the position after the sequence's last (llama.cpp's default); an
        # int: the next token's explicit position (set_position: M-RoPE media shift the positions)
        self._pos: int | None = None

    @property
    def context(self) -> Context:
        return self._context

    @property
    def pending(self) -> int:
        """The last sampled token, which the next step decodes (LLAMA_TOKEN_NULL right after the
        prefill). A speculative verification decodes it with its draft and sets the next one."""
        return self._prev

    @pending.setter
    def pending(self, token: int) -> None:
        self._prev = token

    def prefill(self, tokens: Sequence[int], pos: int | None = None) -> bool:
        """Decode ``tokens`` (valid ids), in batches of at most n_batch (upstream requires it), from
        position ``pos`` (None: after the sequence's last). False when an abort request stopped it;
        raises LlamaException on a decode error."""
        forks.mark(self._context._threads_max)   # (the steps after it run on as many: marked once here)
        if pos is not None and pos != self._next_position():
            return self._prefill_at(tokens, pos)
        context = self._context
        n_batch = context.n_batch
        prompt = (llama_h.llama_token * len(tokens))(*tokens)
        token_size = ctypes.sizeof(llama_h.llama_token)
        base = ctypes.addressof(prompt)
        get_one = self._lib.llama_batch_get_one
        abort = self._head[3]
        for start in range(0, len(tokens), n_batch):
            count = min(n_batch, len(tokens) - start)
            chunk = ctypes.cast(base + start * token_size, ctypes.POINTER(llama_h.llama_token))
            with context.pinned() as ctx_ptr:
                rc = self._decode(ctx_ptr, get_one(chunk, count), abort, *self._err.args)
            if rc == 2:
                return False
            if rc != 0:
                context._raise_decode_error(rc, self._err.message)
        self._prev = LLAMA_TOKEN_NULL
        return True

    def _next_position(self) -> int:
        return self._context.memory_seq_pos_max(0) + 1

    def _prefill_at(self, tokens: Sequence[int], pos: int) -> bool:
        """``prefill`` at explicit positions (after an M-RoPE medium, text does not follow its cells)."""
        context = self._context
        batch = Batch(context, min(context.n_batch, max(1, len(tokens))))
        try:
            for start in range(0, len(tokens), batch.capacity):
                chunk = tokens[start:start + batch.capacity]
                batch.set_sequence(chunk, pos + start, 0, logits_last=start + len(chunk) == len(tokens))
                with context.pinned() as ctx_ptr, batch.pinned():
                    rc = self._decode(ctx_ptr, batch.struct, self._head[3], *self._err.args)
                if rc == 2:
                    return False
                if rc != 0:
                    context._raise_decode_error(rc, self._err.message)
        finally:
            batch.close()
        self._prev = LLAMA_TOKEN_NULL
        return True

    def set_position(self, pos: int) -> None:
        """The next token decodes at ``pos``: nothing changes when that is the position after the
        sequence's last (every model but M-RoPE ones after a medium); else each step decodes its token
        at an explicit position, one more each time."""
        self._pos = None if pos == self._next_position() else pos

    def step(self) -> int:
        """Decode the previous token (none after prefill), then sample the next one: its id, with
        its bytes in ``piece``; or STEP_EOG (``piece``: the end token's text, b"" unless it is rendered
        as text; ``end_token``: its id), STEP_CANCELLED or STEP_CONTEXT_FULL. Raises
        LlamaStateException once the context or chain is closed, LlamaException on native errors."""
        if self._pos is not None and self._prev != LLAMA_TOKEN_NULL:
            return self._step_at()
        ctx_lock, chain_lock = self._ctx_lock, self._chain_lock
        ctx_lock.acquire()  # context, then chain: the order every pinning caller uses
        chain_lock.acquire()
        try:  # (acquire/release by hand: half the cost of `with ctx_lock, chain_lock`)
            if self._context._ptr is None or self._sampler._ptr is None:
                self._context.check_open()
                self._sampler.check_open()
            token = self._step(*self._head, self._prev, *self._tail)
            if self._matchers:
                self._check_matchers()
            if self._governor is not None:   # llama.cpp's decode clock, sampling left out
                perf = self._perf(self._head[0])
                self._governor.after_decode(perf.n_eval, perf.t_eval_ms)
            if token == LLAMA_TOKEN_NULL:
                return self._stopped()
            n = self._piece_len.value
            if self._eog.value:
                # the guided step renders an end token's piece (non-empty when preserved or
                # render_special, as llama-server appends it); the plain step leaves it empty
                self.piece = b"" if not self._guided or n == 0 else (
                    string_at(self._piece_buf, n) if n > 0 else self._big_piece(token, -n))
                self.end_token = token
                return STEP_EOG
            self.piece = string_at(self._piece_buf, n) if n >= 0 else self._big_piece(token, -n)
        finally:
            chain_lock.release()
            ctx_lock.release()
        self._prev = token
        return token

    def _check_matchers(self) -> None:
        from .matcher_grammar import failure_of

        for ptr in self._matchers:
            failure = failure_of(ptr)
            if failure:
                raise LlamaInferenceException(f"the grammar failed: {failure}", {"grammar_failure": failure})

    def _step_at(self) -> int:
        """``step()`` with the previous token decoded at the explicit position ``_pos``."""
        status = self._decode_prev_at()
        return status if status < 0 else self.step()

    def _decode_prev_at(self) -> int:
        """Decode the previous token at ``_pos`` (then one position further): 0, or STEP_CONTEXT_FULL /
        STEP_CANCELLED."""
        assert self._pos is not None
        context = self._context
        batch = Batch(context, 1)
        try:
            batch.set_sequence([self._prev], self._pos, 0)
            with context.pinned() as ctx_ptr, batch.pinned():
                rc = self._decode(ctx_ptr, batch.struct, self._head[3], *self._err.args)
        finally:
            batch.close()
        if rc == 1:
            return STEP_CONTEXT_FULL
        if rc == 2:
            return STEP_CANCELLED
        if rc != 0:
            context._raise_decode_error(rc, self._err.message)
        self._pos += 1
        self._prev = LLAMA_TOKEN_NULL   # decoded: the step after this only samples
        return 0

    def step_after(self, process: Callable[[], None]) -> int:
        """``step()`` with ``process()`` run between the decode of the previous token and the
        sampling: it may change the logits row in place (``Context.borrow_logits``), and the
        sampler chain reads the changed row. Same returns as ``step()``."""
        prev = self._prev
        if prev != LLAMA_TOKEN_NULL and self._pos is not None:
            status = self._decode_prev_at()
            if status < 0:
                return status
        elif prev != LLAMA_TOKEN_NULL:
            one = (llama_h.llama_token * 1)(prev)
            context = self._context
            with context.pinned() as ctx_ptr:
                rc = self._decode(ctx_ptr, self._lib.llama_batch_get_one(one, 1), self._head[3], *self._err.args)
            if rc == 1:
                return STEP_CONTEXT_FULL
            if rc == 2:
                return STEP_CANCELLED
            if rc != 0:
                context._raise_decode_error(rc, self._err.message)
            self._prev = LLAMA_TOKEN_NULL  # decoded: the step below only samples
        process()
        return self.step()

    def _big_piece(self, token: int, size: int) -> bytes:
        """A piece over _PIECE_CAP bytes (rare): fetched whole, in a buffer of its size."""
        big = ctypes.create_string_buffer(size)
        sampler = self._sampler
        special = self._render_special or (isinstance(sampler, GuidedSampler) and sampler.renders_as_text(token))
        n = self._lib.llama_token_to_piece(self._vocab_ptr, token, big, size, 0, special)
        if not 0 <= n <= size:
            raise LlamaInferenceException(
                f"llama.cpp could not render token {token} (it returned {n} for a {size}-byte buffer)",
                {"token": token, "length": n},
            )
        return big.raw[:n]

    def _stopped(self) -> int:
        rc = self._decode_rc.value
        if rc == 1:
            return STEP_CONTEXT_FULL
        if rc == 2:
            return STEP_CANCELLED
        if rc != 0:
            self._context._raise_decode_error(rc, self._err.message)
        raise self._sampler.abandon("a generation step", self._err.message)
