"""``ngram-mod``: upstream's ``common_ngram_mod`` and its speculative state (common/ngram-mod.cpp,
``common_speculative_impl_ngram_mod`` in common/speculative.cpp).

One hash table for every sequence of the engine (4 Mi entries): the hash of ``n_match`` tokens gives
the slot of the token that followed them, the latest one written. A draft walks the table from the
last ``n_match`` tokens (ending with the pending token), one token per lookup, up to ``n_max``;
fewer than ``n_min`` found is no draft. The table learns each prompt at ``begin`` and the generated
tokens in chunks of 32; it is emptied when more than a quarter of it is used after a prompt, and
after five drafts in a row of which less than a quarter was accepted.

The hash is upstream's (``h = h * 6364136223846793005 + token`` in 64 bits, then modulo the size),
kept as a rolling hash while a draft walks, so each lookup is a few integer operations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .history import TokenHistory

__all__ = ["NgramMod", "NgramModTable"]

MULT = 6364136223846793005
_MASK64 = (1 << 64) - 1
TABLE_SIZE = 4 * 1024 * 1024
EMPTY = -1


class NgramModTable:
    """``common_ngram_mod``: n-gram hash -> the token after it."""

    def __init__(self, n: int, size: int = TABLE_SIZE) -> None:
        self.n = n
        self.entries = np.full(size, EMPTY, dtype=np.int32)
        self.used = 0
        self._power = pow(MULT, n - 1, 1 << 64)   # what the oldest token of a window is multiplied by

    @property
    def size(self) -> int:
        return len(self.entries)

    def reset(self) -> None:
        self.entries.fill(EMPTY)
        self.used = 0

    def hash(self, window: list[int]) -> int:
        h = 0
        for token in window:
            h = (h * MULT + token) & _MASK64
        return h

    def add_range(self, history: TokenHistory, start: int, stop: int) -> None:
        """``add`` at every position in ``start .. stop - 1`` in order (the window and the token after it
        lie in ``history``): the table's slot of each window gets the token that followed it."""
        if stop <= start:
            return
        n = self.n
        ids = history.array(start, stop + n).astype(np.uint64)
        count = stop - start
        h = np.zeros(count, dtype=np.uint64)
        for k in range(n):
            h = h * np.uint64(MULT) + ids[k:k + count]   # wraps modulo 2**64, as size_t does
        slots = (h % np.uint64(self.size)).astype(np.int64)
        nexts = ids[n:n + count].astype(np.int32)
        # in order, the last write to a slot wins: keep each slot's last position
        reverse_first = np.unique(slots[::-1], return_index=True)[1]
        last = count - 1 - reverse_first
        slots, nexts = slots[last], nexts[last]
        self.used += int(np.count_nonzero(self.entries[slots] == EMPTY))
        self.entries[slots] = nexts


@dataclass
class _SeqInfo:
    i_last: int = 0        # the last position of the history added to the table
    n_draft_last: int = 0  # the length of the last draft
    n_low: int = 0         # drafts in a row with less than a quarter accepted


class NgramMod:
    """The ngram-mod source for ``n_seq`` sequences over one shared table."""

    def __init__(self, n_match: int, n_min: int, n_max: int, n_seq: int) -> None:
        self.table = NgramModTable(n_match)
        self.n_min, self.n_max = n_min, n_max
        self.seqs = [_SeqInfo() for _ in range(n_seq)]

    def begin(self, seq: int, history: TokenHistory) -> None:
        info = self.seqs[seq]
        info.i_last = 0
        info.n_draft_last = 0
        table = self.table
        n = table.n
        if len(history) < n:
            return
        table.add_range(history, 0, len(history) - n)
        info.i_last = len(history) - n
        if table.used / table.size > 0.25:   # upstream's occupancy threshold
            table.reset()

    def draft(self, seq: int, history: TokenHistory, sampled: int) -> list[int]:
        info = self.seqs[seq]
        info.n_draft_last = 0
        table = self.table
        n = table.n
        cur_len = len(history)
        if cur_len < n:
            return []
        if info.i_last + 32 < cur_len:   # new n-grams are added in chunks
            table.add_range(history, info.i_last, cur_len - n)
            info.i_last = cur_len - n
        return self.peek(seq, history, sampled)

    def peek(self, seq: int, history: TokenHistory, sampled: int) -> list[int]:
        """The draft after ``history`` + ``sampled`` without learning from them (a continuation of
        grammar-forced tokens lent to the history)."""
        info = self.seqs[seq]
        info.n_draft_last = 0
        table = self.table
        n = table.n
        cur_len = len(history)
        if cur_len < n:
            return []
        window = [*history.ids[cur_len - n + 1:cur_len], sampled]
        h = table.hash(window)
        entries, size, power = table.entries, table.size, table._power
        result: list[int] = []
        for i in range(self.n_max):
            token = int(entries[h % size])
            if token == EMPTY:
                if i < self.n_min:
                    return []
                break
            result.append(token)
            h = ((h - window[i] * power) * MULT + token) & _MASK64   # slide the window by one token
            window.append(token)
        info.n_draft_last = len(result)
        return result

    def accept(self, seq: int, n_accepted: int) -> None:
        info = self.seqs[seq]
        if info.n_draft_last > 0:
            if n_accepted / info.n_draft_last < 0.25:
                info.n_low += 1
                if info.n_low >= 5:
                    self.table.reset()
                    info.n_low = 0
                    info.i_last = 0
            else:
                info.n_low = 0
