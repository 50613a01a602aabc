"""Saved KV caches of sequences in host memory, found again by their tokens: llama-server's
``--cache-ram`` prompt cache, for the batched slots.

    store = PromptStore(context, limit_bytes)
    store.save(seq, tokens, tag=key)         # before a slot's cache is overwritten
    tokens = store.load(seq, prompt, better_than=n, tag=key)   # a saved prefix longer than n restored into seq

A slot about to lose most of what it holds (another request takes it) saves it first; a request
whose prompt starts with a saved sequence's tokens (further than its slot's own cache reaches) gets
that state copied into its slot, and only the rest of the prompt is evaluated. So a client coming
back to a conversation finds it again even after its slot served others. Entries beyond the limit
go oldest first; an entry that another entry extends is dropped. An entry is found only by a
request with the same ``tag`` (the LoRA adapters its cells were computed with).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from ..errors import LlamaStateException
from ..native.context import Context
from .prompt_cache import common_prefix

__all__ = ["PromptStore"]


@dataclass
class _Entry:
    tokens: tuple[int, ...]
    data: bytes | bytearray
    tag: Hashable = None


class PromptStore:
    """See the module docstring. Used by one thread (the scheduler's)."""

    def __init__(self, context: Context, limit_bytes: int) -> None:
        self._context = context
        self.limit_bytes = limit_bytes
        self._entries: list[_Entry] = []   # oldest first
        self.size_bytes = 0                # of the entries' data
        self.n_saved = 0
        self.n_loaded = 0

    def __len__(self) -> int:
        return len(self._entries)

    def save(self, seq: int, tokens: Sequence[int], tag: Hashable = None) -> None:
        """Keep what sequence ``seq`` holds (``tokens``, position by position, computed under ``tag``)."""
        key = tuple(tokens)
        if not key or any(e.tag == tag and e.tokens[:len(key)] == key for e in self._entries):
            return   # nothing, or already covered by an entry
        data = self._context.seq_state_bytes(seq)
        if not data or len(data) > self.limit_bytes:
            return
        for covered in [e for e in self._entries if e.tag == tag and key[:len(e.tokens)] == e.tokens]:
            self._drop(covered)
        self._entries.append(_Entry(key, data, tag))
        self.size_bytes += len(data)
        while self.size_bytes > self.limit_bytes:
            self._drop(self._entries[0])
        self.n_saved += 1

    def load(self, seq: int, prompt: Sequence[int], better_than: int, tag: Hashable = None) -> list[int] | None:
        """Restore into ``seq`` the entry of ``tag`` sharing the longest prefix with ``prompt``, when
        that prefix is longer than ``better_than``; returns the tokens ``seq`` then holds (None:
        nothing loaded, ``seq`` unchanged)."""
        best, best_lcp = None, better_than
        for entry in self._entries:
            if entry.tag != tag:
                continue
            lcp = common_prefix(entry.tokens, prompt)
            if lcp > best_lcp:
                best, best_lcp = entry, lcp
        if best is None:
            return None
        try:
            self._context.load_seq_state_bytes(best.data, seq)
        except LlamaStateException:
            self._drop(best)
            return []    # the sequence was cleared
        self._entries.remove(best)     # most recently used: to the end
        self._entries.append(best)
        self.n_loaded += 1
        return list(best.tokens)

    def clear(self) -> None:
        """Forget every entry (the weights changed: no saved state is valid any more)."""
        self._entries.clear()
        self.size_bytes = 0

    def _drop(self, entry: _Entry) -> None:
        self._entries.remove(entry)
        self.size_bytes -= len(entry.data)
