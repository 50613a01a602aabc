"""``ngram-map-k`` and ``ngram-map-k4v``: upstream's ``common_ngram_map`` (common/ngram-map.cpp).

A map from key n-grams of the history (``size_key`` tokens) to the m-grams (``size_value``) that
followed them. The last ``size_key`` tokens (ending with the pending token) are looked up -- through
a hash of key n-grams to their latest position, then by scanning back -- and the tokens that followed
the match are the draft. ``ngram-map-k`` (``key_only``) drafts them at once; ``ngram-map-k4v`` keeps
up to four different m-grams per key with their counts and drafts the most frequent one only when
it is at least twice as frequent as the others together, after ``min_hits`` hits of the key. A
draft is cut to the number of its tokens accepted the last time that value was drafted.

Per sequence; ``begin`` refreshes the map when a new prompt is shorter than the history it knew (a
chat whose earlier reasoning was dropped). A port of upstream's code, its orders and bounds kept, so
the drafts are llama-server's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .history import TokenHistory

__all__ = ["NgramMap"]

MAX_VALUES = 4              # COMMON_NGRAM_MAX_VALUES
HASH_MAP_SIZE = 262144      # COMMON_NGRAM_HASH_MAP_SIZE
MAX_VALUE_COUNT = 16380     # COMMON_NGRAM_MAX_VALUE_COUNT
LCG_FACTOR = 2654435761
_MASK32 = 0xFFFFFFFF


@dataclass
class _Value:
    value_idx: int = 0     # where the value m-gram starts in the history (0: unused)
    value_num: int = 0     # its occurrences after the key
    n_accepted: int = -1   # tokens of it accepted at its last draft


@dataclass
class _Key:
    key_idx: int           # where the key n-gram is in the history
    stat_idx: int          # up to where its values were counted
    key_num: int
    values: list[_Value] = field(default_factory=list)


def _hash(ids: list[int], start: int, n: int) -> int:
    h = 0
    for i in range(start, start + n):
        h = (h * LCG_FACTOR + ids[i]) & _MASK32
    return h


def _hashes(history: TokenHistory, positions: np.ndarray, n: int) -> np.ndarray:
    """``_hash`` of the windows at ``positions``, all at once (uint32 arithmetic in uint64)."""
    lo = int(positions.min())
    ids = history.array(lo, int(positions.max()) + n).astype(np.uint64)   # only the windows' span
    at = positions - lo
    h = np.zeros(len(positions), dtype=np.uint64)
    for k in range(n):
        h = (h * np.uint64(LCG_FACTOR) + ids[at + k]) & np.uint64(_MASK32)
    return h


class NgramMap:
    """One sequence's map (``common_ngram_map``)."""

    def __init__(self, size_key: int, size_value: int, key_only: bool, min_hits: int) -> None:
        self.size_key, self.size_value = size_key, size_value
        self.key_only, self.min_hits = key_only, min_hits
        self.keys: list[_Key] = []
        self.size_last_begin = 0
        self.last_draft_created = False
        self.last_draft_key_idx = 0
        self.last_draft_value_idx = 0
        self.idx_last_check = 0
        self.key_map = np.zeros(HASH_MAP_SIZE, dtype=np.uint32)
        self.key_map_last_idx = 0

    def begin(self, history: TokenHistory) -> None:
        """A new prompt (``history``: what the KV cache holds once it is evaluated)."""
        size_begin = len(history)
        cleanup = self.size_last_begin
        if cleanup > size_begin:
            n_kv = self.size_key + self.size_value
            cleanup = size_begin - n_kv if size_begin > n_kv else 0
        if size_begin < self.idx_last_check:
            key_map = self.key_map
            key_map[(key_map != 0) & (key_map >= cleanup)] = 0
            self.key_map_last_idx = cleanup - 1 if cleanup > 0 else 0
            for i in range(len(self.keys) - 1, -1, -1):
                key = self.keys[i]
                if key.key_idx >= cleanup:
                    del self.keys[i]
                    continue
                if self.key_only:
                    continue
                values = key.values
                for j in range(MAX_VALUES - 1, -1, -1):
                    if values[j].value_idx != 0 and values[j].value_idx >= cleanup:
                        for k in range(j, MAX_VALUES - 1):
                            values[k] = _Value(values[k + 1].value_idx, values[k + 1].value_num,
                                               values[k + 1].n_accepted)
                        last = values[MAX_VALUES - 1]
                        values[MAX_VALUES - 1] = _Value(0, 0, last.n_accepted)
                if values[0].value_idx == 0:
                    del self.keys[i]
        self.idx_last_check = size_begin
        self.size_last_begin = size_begin

    def draft(self, history: TokenHistory, sampled: int) -> list[int]:
        """The draft after ``history`` + ``sampled`` (possibly empty)."""
        self.last_draft_created = False
        self.last_draft_key_idx = 0
        self.last_draft_value_idx = 0
        ids = history.ids
        cur_len = len(ids)
        n, m = self.size_key, self.size_value
        if cur_len < 2 * n + m:
            return []
        if self.idx_last_check > cur_len or self.size_last_begin > cur_len:
            self.begin(history)   # upstream aborts here; a history it did not see begin is read afresh
        self.idx_last_check = cur_len
        key_tokens = [*ids[cur_len - n + 1:cur_len], sampled]
        last_begin, map_last = self.size_last_begin, self.key_map_last_idx
        top = cur_len - n - m - 1   # the last position a key may start at
        match_pos = 0
        idx_key = int(self.key_map[_hash(key_tokens, 0, n) % HASH_MAP_SIZE])
        if idx_key != 0 and idx_key < top and ids[idx_key:idx_key + n] == key_tokens:
            match_pos = idx_key
        if match_pos == 0 and last_begin > n + m + 1:
            hi = last_begin - n - m - 1
            if hi > map_last:
                match_pos = max(0, history.rfind(key_tokens, map_last + 1, hi + n))
        if match_pos == 0:
            lo = max(last_begin, map_last) + 1
            if top >= lo:
                match_pos = max(0, history.rfind(key_tokens, lo, top + n))
        self._add_hashes(history, top)
        if match_pos == 0:
            return []
        return self._draft_from(history, match_pos, key_tokens)

    def _add_hashes(self, history: TokenHistory, top: int) -> None:
        """Record the key n-grams seen since the last call (latest position wins an empty hash slot)."""
        n, m = self.size_key, self.size_value
        last_begin, map_last = self.size_last_begin, self.key_map_last_idx
        spans = []
        if last_begin > n + m + 1 and last_begin - n - m - 1 > map_last:
            spans.append(np.arange(last_begin - n - m - 1, map_last, -1))
        lo = max(last_begin, map_last)
        if top > lo:
            spans.append(np.arange(top, lo, -1))
        if spans and sum(map(len, spans)) < 16:   # a step's one or two new n-grams: plain Python is faster
            key_map, ids = self.key_map, history.ids
            for j in (int(j) for span in spans for j in span):
                slot = _hash(ids, j, n) % HASH_MAP_SIZE
                if key_map[slot] == 0:
                    key_map[slot] = j
        elif spans:
            positions = np.concatenate(spans)   # upstream's order: each j in turn, first come first kept
            slots = (_hashes(history, positions, n) % np.uint64(HASH_MAP_SIZE)).astype(np.int64)
            _unique, first = np.unique(slots, return_index=True)
            slots, positions = slots[first], positions[first]
            empty = self.key_map[slots] == 0
            self.key_map[slots[empty]] = positions[empty].astype(np.uint32)
        self.key_map_last_idx = max(top, map_last)

    def _draft_from(self, history: TokenHistory, match_pos: int, key_tokens: list[int]) -> list[int]:
        ids = history.ids
        n, m = self.size_key, self.size_value
        key_offset = len(self.keys)
        for i, key in enumerate(self.keys):
            if ids[key.key_idx:key.key_idx + n] == key_tokens:
                key_offset = i
                break
        if key_offset == len(self.keys):
            self.keys.append(_Key(match_pos, 0, 0, [_Value(0, 0, m) for _ in range(MAX_VALUES)]))
        key = self.keys[key_offset]
        key.key_num = min(key.key_num + 1, MAX_VALUE_COUNT)
        if self.key_only:
            count = min(m, key.values[0].n_accepted)
            self.last_draft_created, self.last_draft_key_idx, self.last_draft_value_idx = True, key_offset, 0
            return ids[match_pos + n:match_pos + n + max(0, count)]
        if key.key_num < self.min_hits:
            return []
        values = key.values
        for i in history.find_all(key_tokens, key.stat_idx, match_pos + n):
            begin = i + n
            found = -1
            for v in range(MAX_VALUES):
                start = values[v].value_idx
                if start == 0:
                    values[v] = _Value(begin, 0, m)
                    found = v
                    break
                if ids[begin:begin + m] == ids[start:start + m]:
                    found = v
                    break
            if found >= 0:
                values[found].value_num = min(values[found].value_num + 1, MAX_VALUE_COUNT)
        key.stat_idx = match_pos
        max_occur, slot_max = 0, 0
        for v in range(MAX_VALUES):
            if values[v].value_num > max_occur:
                max_occur, slot_max = values[v].value_num, v
        sum_occur = sum(values[v].value_num for v in range(MAX_VALUES) if v != slot_max)
        if sum_occur > 0 and max_occur < 2 * sum_occur:
            return []
        count = min(m, values[slot_max].n_accepted)
        self.last_draft_created, self.last_draft_key_idx, self.last_draft_value_idx = True, key_offset, slot_max
        return ids[match_pos + n:match_pos + n + max(0, count)]

    def accept(self, n_accepted: int) -> None:
        """The target accepted ``n_accepted`` tokens of the last draft: that value's next draft is cut to it."""
        if self.last_draft_created:
            self.keys[self.last_draft_key_idx].values[self.last_draft_value_idx].n_accepted = n_accepted
