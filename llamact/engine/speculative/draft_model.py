"""``draft-simple``: a smaller model of the same vocabulary drafts the next tokens (upstream's
``common_speculative_impl_draft_simple``).

The draft model has its own context (the target's size unless ``draft_n_ctx`` says otherwise, as
many sequences as the target, its own threads). Before each draft a sequence's draft KV cache is
brought to the target's history plus the pending token: the common prefix with what it holds stays,
the rest is evaluated (the whole prompt the first time). Then, for every drafting sequence at once,
one decode per draft position: the most likely token is taken while its probability among the ten
most likely is at least ``p_min``, up to ``n_max`` tokens; fewer than ``n_min`` is no draft.

Upstream evaluates every target batch on the draft context as well and re-evaluates the drafted
tokens after the verification; keeping the drafted tokens that were accepted in the draft's cache
gives the same drafts with fewer draft decodes.

Raised at construction: ``LlamaModelException`` when the draft cannot be loaded or its vocabulary is
not the target's (upstream's check: type, BOS/EOS, sizes within 128, every token's text from id 5).
A failed draft decode is no draft (the sequence's draft cache is emptied), never the request's error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...errors import LlamaException, LlamaModelException
from ...native.batch import Batch
from ...native.context import Context, ContextOptions
from ...native.model import Model, ModelLoadOptions
from ...native.speculative import draft_pick, draft_vocab_problem
from .history import TokenHistory

__all__ = ["DraftJob", "DraftModel"]

TOP_K = 10   # upstream's draft sampler: top-k 10, the most probable first


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass
class DraftJob:
    """One sequence's request for a draft: its history, pending token and longest draft."""

    seq: int
    history: TokenHistory
    sampled: int
    n_max: int


class DraftModel:
    """The draft model and its context (see the module docstring)."""

    def __init__(self, path: str, target: Model, *, n_ctx: int, n_seq: int, n_batch: int, n_ubatch: int,
                 n_threads: int, n_threads_batch: int, n_gpu_layers: int, n_max: int, n_min: int,
                 p_min: float, adaptive_threads: bool = True) -> None:
        self.model = Model(path, ModelLoadOptions(n_gpu_layers=n_gpu_layers))
        try:
            problem = draft_vocab_problem(target, self.model)
            if problem is not None:
                raise LlamaModelException(
                    f"the draft model {path} cannot draft for {target.path}: {problem}; a draft model must share "
                    "the target's vocabulary (e.g. a smaller model of the same family)",
                    {"draft_model": str(path), "problem": problem})
            self.context = Context(self.model, ContextOptions(
                n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_ubatch, n_seq_max=n_seq, n_threads=n_threads,
                n_threads_batch=n_threads_batch, adaptive_threads=adaptive_threads))
            self._batch = Batch(self.context, self.context.n_batch, 1)
        except BaseException:
            self.model.close()
            raise
        self.n_max, self.n_min, self.p_min = n_max, n_min, p_min
        self._n_vocab_target = target.vocab.n_tokens
        self._n_ctx_seq = self.context.n_ctx_seq
        self._records: list[list[int]] = [[] for _ in range(n_seq)]   # what each sequence's draft cache holds

    def close(self) -> None:
        self.context.request_abort()
        self.model.close()   # closes the context and the batch's owner first

    def forget(self, seq: int) -> None:
        """Empty a sequence's draft cache (its slot was erased or restored)."""
        self._records[seq].clear()
        self.context.memory_seq_rm(seq, -1, -1)

    def draft(self, jobs: Sequence[DraftJob]) -> list[list[int]]:
        """Each job's draft (in order), the sequences drafting together."""
        results: list[list[int]] = [[] for _ in jobs]
        try:
            drafting = self._sync(jobs, results)   # each job's first draft token is picked there
            while drafting:
                batch = self._batch
                batch.clear()
                for i in drafting:
                    record = self._records[jobs[i].seq]
                    batch.add(results[i][-1], len(record), (jobs[i].seq,), logits=True)
                    record.append(results[i][-1])
                self.context.decode(batch)
                drafting = [i for row, i in enumerate(drafting) if self._pick(jobs[i], results[i], row)]
        except LlamaException:
            for job in jobs:    # a failed draft decode: no drafts, and no stale cache
                self._reset(job.seq)
            return [[] for _ in jobs]
        return [r if len(r) >= self.n_min else [] for r in results]

    def _limit(self, job: DraftJob) -> int:
        """The longest draft for ``job``: its own bound, the draft's, and the draft context's room
        (the k-th token needs k - 1 drafted positions after the history and the pending token)."""
        room = self._n_ctx_seq - (len(job.history) + 1) + 1
        return max(0, min(job.n_max, self.n_max, room))

    def _sync(self, jobs: Sequence[DraftJob], results: list[list[int]]) -> list[int]:
        """Bring each job's draft cache to its history + pending token, decoding what is missing in
        batches, and pick each job's first draft token right after the decode of its last token;
        returns the jobs that draft on."""
        pending: list[tuple[int, list[int], int]] = []   # (job index, tokens to decode, their first position)
        for i, job in enumerate(jobs):
            if self._limit(job) <= 0:
                continue
            want = [*job.history.ids, job.sampled]
            record = self._records[job.seq]
            keep = min(common_prefix(record, want), len(want) - 1)   # the last token's logits are needed
            if keep < len(record):
                if not self.context.memory_seq_rm(job.seq, keep, -1):
                    self._reset(job.seq)
                    keep = 0
                del record[keep:]
            pending.append((i, want[keep:], keep))
        drafting: list[int] = []
        batch = self._batch
        while pending:
            batch.clear()
            finishing: list[tuple[int, int]] = []   # (job index, batch row of its last token)
            room = batch.capacity
            while pending and room > 0:
                i, tokens, pos = pending[0]
                take = tokens[:room]
                ends = len(take) == len(tokens)
                row = batch.extend(take, pos, jobs[i].seq, logits_last=ends)
                self._records[jobs[i].seq].extend(take)
                room -= len(take)
                if ends:
                    finishing.append((i, row))
                    pending.pop(0)
                else:
                    pending[0] = (i, tokens[len(take):], pos + len(take))
            self.context.decode(batch)
            drafting += [i for i, row in finishing if self._pick(jobs[i], results[i], row)]
        return drafting

    def _pick(self, job: DraftJob, result: list[int], row: int) -> bool:
        """Pick the next draft token from output ``row``; whether the job drafts on (its token is then
        decoded by the next step)."""
        token, p = draft_pick(self.context, row, TOP_K)
        if p < self.p_min or token >= self._n_vocab_target:
            return False
        result.append(token)
        return len(result) < self._limit(job)

    def _reset(self, seq: int) -> None:
        self._records[seq].clear()
        try:
            self.context.memory_seq_rm(seq, -1, -1)
        except LlamaException:
            pass
