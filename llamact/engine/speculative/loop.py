"""The single-sequence token loop with drafts (``generator.generate(..., speculation=...)``).

Each step: the sources draft after the pending token (``SequenceSpeculation.propose``); without a
draft the step is ``generate``'s own (one native call: decode the pending token, sample); with one,
``DraftVerifier.verify`` decodes the pending token and the draft in one batch and the target samples
every position while it equals the draft (one native call), and the decoder takes the chosen tokens
at once (``SequenceDecoder.take_run``: the same chunks as one by one). A run that a stop string, a
limit or an end token ends part-way leaves the KV cache holding exactly what a plain loop would.
"""

from __future__ import annotations

from collections.abc import Iterator

from ...native.llama_h import LLAMA_TOKEN_NULL
from ...native.speculative import DraftVerifier
from ...native.stepper import STEP_CANCELLED, STEP_CONTEXT_FULL, STEP_EOG, TokenStepper
from ..decode import GenerationChunk, SequenceDecoder, StopReason
from .speculator import SequenceSpeculation, accepted_count

__all__ = ["speculative_steps"]

_STOPS = {STEP_EOG: StopReason.EOG, STEP_CANCELLED: StopReason.CANCELLED, STEP_CONTEXT_FULL: StopReason.CONTEXT_FULL}


def speculative_steps(stepper: TokenStepper, decoder: SequenceDecoder, spec: SequenceSpeculation, *,
                      n_ctx: int, max_tokens: int, logprobs: bool) -> Iterator[GenerationChunk]:
    """The chunks of one generation whose prompt is evaluated (``decoder.prompt_done()`` was called),
    until ``decoder.reason`` is set; the caller yields ``decoder.finish()``."""
    verifier = DraftVerifier(stepper)
    draft_all = spec.speculator.draft_all
    step, take, take_run = stepper.step, decoder.take, decoder.take_run
    context = stepper.context
    spec.begin()
    while decoder.reason is None:
        pending = stepper.pending
        draft: list[int] = []
        if pending != LLAMA_TOKEN_NULL:
            n_max = spec.n_max(n_ctx, max_tokens, decoder.n_generated)
            if n_max > 0:
                draft = draft_all([(spec, pending, n_max)])[0]
        if not draft:
            token = step()
            if token < 0:
                if token == STEP_EOG:
                    end_token = stepper.end_token
                    assert end_token is not None   # STEP_EOG sets it
                    decoder.end(end_token, stepper.piece)
                else:
                    decoder.stop(_STOPS[token])
                return
            spec.stepped(() if pending == LLAMA_TOKEN_NULL else (pending,), token)
            yield take(token, stepper.piece)
            continue
        n_kv = len(spec.history)   # what the KV cache holds before this step
        n = verifier.verify(draft)
        decoder.n_draft += len(draft)
        if n < 0:
            decoder.stop(_STOPS[n])
            return
        chosen = verifier.tokens
        decoder.n_draft_accepted += accepted_count(draft, chosen)
        spec.verified(pending, draft, chosen)
        chunks, taken = take_run(chosen, verifier.pieces, range(n) if logprobs else None)
        if taken < n:
            # a stop string, a limit or an end token ended the run: the KV cache keeps what a plain
            # loop would hold (everything up to the last token taken, which is never decoded)
            context.memory_seq_rm(0, n_kv + taken, -1)
        yield from chunks
