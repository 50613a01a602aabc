"""Speculative decoding's native steps (src/shim/speculative.cpp): verify a draft, pick a draft token.

    verifier = DraftVerifier(stepper)     # beside a TokenStepper, after its first step
    n = verifier.verify(draft)            # decode the pending token + draft; n tokens chosen, or a STEP_* code
    verifier.tokens, verifier.pieces      # the chosen tokens (all but the last equal the draft) and their bytes
    sample_run(sampler, context, first, draft)   # the same choosing on rows of a batch already decoded
    draft_pick(context, index, k)         # a draft model's greedy token and its probability among the top k

The target samples every position itself with its own sampler (grammar, penalties, reasoning budget,
seed) and a drafted token counts only while it equals what the target chose, so what comes out is
what the target alone would sample from the same logits: llama-server's
``common_sampler_sample_and_accept_n``. Rejected draft tokens leave the KV cache in the same call.

What is raised: ``LlamaInferenceException`` (a failed decode, a sampler that threw: it is closed),
``LlamaStateException`` once the context or sampler is closed.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

from ..errors import LlamaInferenceException
from . import llama_h
from ._library import native
from .context import Context
from .guided import GuidedSampler
from .model import Model
from .sampler import SamplerChain
from .shim import ErrorBuffer
from .stepper import STEP_CANCELLED, STEP_CONTEXT_FULL, TokenStepper

__all__ = ["DraftVerifier", "draft_pick", "draft_vocab_problem", "sample_run"]

_Token = llama_h.llama_token


def _tokens(values: Sequence[int]) -> ctypes.Array[ctypes.c_int32]:
    return (_Token * max(1, len(values)))(*values)


def sample_run(sampler: SamplerChain | GuidedSampler, context: Context, first: int, draft: Sequence[int]) -> list[int]:
    """Sample outputs ``first``, ``first + 1``, ... of the last decode with ``sampler`` (accepting each)
    while each equals its ``draft`` token; the tokens chosen: all but the last equal the draft, the last
    is the target's own (after a mismatch, after the whole draft, or an end-of-generation token)."""
    shim, err = native().shim, ErrorBuffer()
    out = (_Token * (len(draft) + 1))()
    with context.pinned() as ctx, sampler.pinned() as handle:
        vocab_ptr = context.model._vocab_ptr   # alive while the context is open
        if isinstance(sampler, GuidedSampler):
            n = shim.llamact_guide_sample_run(handle, ctx, vocab_ptr, first, _tokens(draft), len(draft), out,
                                              *err.args)
        else:
            n = shim.llamact_chain_sample_run(handle, int(sampler.greedy_only), ctx, vocab_ptr, first,
                                              _tokens(draft), len(draft), out, *err.args)
    if n < 0:
        raise sampler.abandon("verifying a draft", err.message)
    return list(out[:n])


def draft_pick(context: Context, index: int = -1, k: int = 10) -> tuple[int, float]:
    """The most likely token at output ``index`` and its probability among the ``k`` most likely
    (upstream's draft-simple reads its draft that way, from a top-k sampler)."""
    shim, err = native().shim, ErrorBuffer()
    p = ctypes.c_float(0.0)
    with context.pinned() as ctx:
        token = int(shim.llamact_draft_pick(ctx, index, context.model.vocab.n_tokens, k, ctypes.byref(p), *err.args))
    if token == llama_h.LLAMA_TOKEN_NULL:
        raise LlamaInferenceException(f"no draft token at output {index}: {err.message}", {"index": index})
    return token, float(p.value)


# upstream's bounds (common/speculative.cpp): SPEC_VOCAB_MAX_SIZE_DIFFERENCE, SPEC_VOCAB_CHECK_START_TOKEN_ID
VOCAB_MAX_SIZE_DIFFERENCE = 128
VOCAB_CHECK_START = 5


def draft_vocab_problem(target: Model, draft: Model) -> str | None:
    """Why ``draft`` cannot draft for ``target`` (upstream's ``common_speculative_are_compatible``:
    the vocabulary type, BOS and EOS as they are added, sizes within 128, the same text for every
    token from id 5 on), or None."""
    t, d = target.vocab, draft.vocab
    if t.type != d.type:
        return f"the vocabulary types differ (target {t.type}, draft {d.type})"
    if t.add_bos != d.add_bos or (t.add_bos and t.bos != d.bos):
        return f"the BOS tokens differ (added: {t.add_bos} / {d.add_bos}, id {t.bos} / {d.bos})"
    if t.add_eos != d.add_eos or (t.add_eos and t.eos != d.eos):
        return f"the EOS tokens differ (added: {t.add_eos} / {d.add_eos}, id {t.eos} / {d.eos})"
    if abs(t.n_tokens - d.n_tokens) > VOCAB_MAX_SIZE_DIFFERENCE:
        return (f"the vocabulary sizes differ by more than {VOCAB_MAX_SIZE_DIFFERENCE} "
                f"(target {t.n_tokens}, draft {d.n_tokens})")
    with target.pinned(), draft.pinned():
        at = int(native().shim.llamact_vocab_text_mismatch(target._vocab_ptr, draft._vocab_ptr, VOCAB_CHECK_START))
    if at >= 0:
        return f"token {at} differs (target {t.text(at)!r}, draft {d.text(at)!r})"
    return None


class DraftVerifier:
    """Verification steps for one ``TokenStepper``'s sequence (sequence 0 of its context)."""

    __slots__ = ("_stepper", "_context", "_sampler", "_guided", "_greedy", "_vocab", "_vocab_ptr", "_err", "_rc",
                 "_render_special", "_preserved", "tokens", "pieces", "_shim")

    def __init__(self, stepper: TokenStepper) -> None:
        self._stepper = stepper
        self._context = stepper.context
        sampler = stepper._sampler
        self._sampler = sampler
        self._guided = isinstance(sampler, GuidedSampler)
        self._greedy = int(sampler.greedy_only)
        self._vocab = self._context.model.vocab
        with self._context.pinned():
            self._vocab_ptr = self._context.model._vocab_ptr   # alive while the context is open
        self._render_special = stepper._render_special
        self._preserved = sampler.preserved_tokens if isinstance(sampler, GuidedSampler) else frozenset()
        self._shim = native().shim
        self._err = ErrorBuffer()
        self._rc = ctypes.c_int32(0)
        self.tokens: list[int] = []
        self.pieces: list[bytes] = []

    def verify(self, draft: Sequence[int]) -> int:
        """Decode the stepper's pending token and ``draft`` in one batch and choose the tokens: their
        number (``tokens`` / ``pieces``; the stepper's pending token becomes the last one), or
        STEP_CANCELLED / STEP_CONTEXT_FULL. Raises LlamaException on native errors."""
        stepper, context, sampler = self._stepper, self._context, self._sampler
        batch = [stepper.pending, *draft]
        out = (_Token * len(batch))()
        # a verification is a small batch, decoded with n_threads_batch: while the thread governor holds
        # the one-token decodes below their thread count (busy cores), so does it hold this one
        governor = context.governor
        throttled = governor is not None and governor.current < context.n_threads_batch
        if throttled:
            context.set_threads(governor.current, governor.current)   # type: ignore[union-attr]
        try:
            with context.pinned() as ctx, sampler.pinned() as handle:
                n = self._shim.llamact_spec_verify(ctx, handle, int(self._guided), self._greedy, self._vocab_ptr,
                                                   ctypes.c_void_p(context._abort_ptr),
                                                   0, (_Token * len(batch))(*batch), len(batch), out,
                                                   ctypes.byref(self._rc), *self._err.args)
        finally:
            if throttled:
                context.set_threads(governor.current, context.n_threads_batch)   # type: ignore[union-attr]
        if n < 0:
            raise sampler.abandon("verifying a draft", self._err.message)
        if n == 0:
            rc = self._rc.value
            if rc == 1:
                return STEP_CONTEXT_FULL
            if rc == 2:
                return STEP_CANCELLED
            context._raise_decode_error(rc, self._err.message)
        tokens = self.tokens = list(out[:n])
        self.pieces = [self.piece(t) for t in tokens]
        stepper.pending = tokens[-1]
        return n

    def piece(self, token: int) -> bytes:
        """A chosen token's bytes as the stepper renders them: an end token's only when a guided
        sampler renders it as text (preserved, or render_special)."""
        special = self._render_special or token in self._preserved
        if self._vocab.is_eog(token) and not (self._guided and special):
            return b""
        return self._vocab.token_to_piece(token, special=special)
