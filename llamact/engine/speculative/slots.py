"""Speculative decoding in the batch scheduler's slots (``batched.BatchScheduler``).

    drafts = plan_drafts(speculator, generating, capacity, n_ctx_seq)   # before a step: {seq: draft}
    verify_slot(context, request, slot, index, draft, vocab)           # after its decode: chunks, KV, cache

A generating sequence with a draft adds its pending token and the draft to the step's batch, every
one with its logits (llama-server's ``handle_last_sampled_token``); sequences without one add their
pending token alone, so some slots speculate while others do not, in the same decode. After the
decode the sequence's own sampler chooses position by position while it equals the draft
(``native.speculative.sample_run``), the rejected draft tokens leave the KV cache, and the decoder
takes the chosen tokens as a run. The drafts of all slots are made together (``Speculator.draft_all``:
the draft model decodes them in one batch per position).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...native.context import Context
from ...native.model import Vocab
from ...native.speculative import sample_run
from ..decode import GenerationChunk
from .speculator import Speculator, accepted_count

__all__ = ["plan_drafts", "slot_piece", "verify_slot"]


def plan_drafts(speculator: Speculator, generating: Sequence[tuple[Any, Any]], capacity: int,
                n_ctx_seq: int) -> dict[int, list[int]]:
    """The drafts of the generating ``(slot, request)`` pairs that speculate, by slot id: each fits
    its slot's context and ``max_tokens`` (llama-server's ``get_n_draft_max``), and all fit the batch
    beside one pending token per generating sequence."""
    share = (capacity - len(generating)) // max(1, len(generating))
    asks = []
    for slot, request in generating:
        spec = request.spec
        if spec is None or request.decoder is None:
            continue
        n_max = min(share, spec.n_max(n_ctx_seq, request.params.max_tokens, request.decoder.n_generated))
        if n_max > 0:
            asks.append((slot.seq, spec, request.last, n_max))
    if not asks:
        return {}
    made = speculator.draft_all([(spec, last, n_max) for _seq, spec, last, n_max in asks])
    return {seq: draft for (seq, _spec, _last, _n), draft in zip(asks, made, strict=True) if draft}


def slot_piece(vocab: Vocab, request: Any, token: int) -> bytes:
    """A chosen token's bytes as the scheduler renders them: an end token's only when it is preserved."""
    sampler = request.sampler
    if vocab.is_eog(token):
        return vocab.token_to_piece(token, special=True) if sampler.renders_as_text(token) else b""
    return vocab.token_to_piece(token, special=request.params.render_special or sampler.renders_as_text(token))


def verify_slot(context: Context, vocab: Vocab, request: Any, slot: Any, index: int,
                draft: list[int]) -> list[GenerationChunk]:
    """After the step's decode (the pending token at batch ``index``, the draft after it): the tokens
    the target chooses, the KV cache and the slot's cache trimmed to them, the decoder's chunks."""
    decoder, spec, last = request.decoder, request.spec, request.last
    n_kv = request.n_past   # where the pending token was decoded
    chosen = sample_run(request.sampler, context, index, draft)
    n = len(chosen)
    context.memory_seq_rm(slot.seq, n_kv + n, -1)   # the rejected draft tokens
    decoder.n_draft += len(draft)
    decoder.n_draft_accepted += accepted_count(draft, chosen)
    spec.verified(last, draft, chosen)
    pieces = [slot_piece(vocab, request, t) for t in chosen]
    indices = range(index, index + n) if request.logprobs is not None else None
    chunks, taken = decoder.take_run(chosen, pieces, indices)
    if taken < n:   # the run ended part-way: keep what a plain step would hold
        context.memory_seq_rm(slot.seq, n_kv + taken, -1)
        n = taken
    slot.cache.extend([last, *chosen[:n - 1]])
    request.n_past = n_kv + n
    request.last = chosen[n - 1]
    return chunks
