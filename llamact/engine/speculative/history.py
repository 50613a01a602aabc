"""A sequence's tokens as the draft sources read them: a list, and the same ids packed as int32
bytes, so that looking an n-gram up in a long history is one ``bytearray.rfind`` (C speed) instead of
a Python scan per position."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["TokenHistory"]

_ID = struct.Struct("<i")


class TokenHistory:
    """The tokens a sequence's KV cache holds, position by position (the pending token is not one)."""

    __slots__ = ("ids", "_raw")

    def __init__(self, tokens: Iterable[int] = ()) -> None:
        self.ids: list[int] = []
        self._raw = bytearray()
        self.extend(tokens)

    def __len__(self) -> int:
        return len(self.ids)

    def extend(self, tokens: Iterable[int]) -> None:
        tokens = list(tokens)
        self.ids.extend(tokens)
        self._raw += np.asarray(tokens, dtype="<i4").tobytes()

    def extended(self, tokens: Sequence[int]) -> TokenHistory:
        """A copy with ``tokens`` after these."""
        other = TokenHistory()
        other.ids = [*self.ids, *tokens]
        other._raw = self._raw + np.asarray(tokens, dtype="<i4").tobytes()
        return other

    def append(self, token: int) -> None:
        self.ids.append(token)
        self._raw += _ID.pack(token)

    def truncate(self, n: int) -> None:
        del self.ids[n:]
        del self._raw[4 * n:]

    def array(self, start: int = 0, end: int | None = None) -> np.ndarray:
        """A copy of ``ids[start:end]`` as int32."""
        stop = len(self.ids) if end is None else end
        return np.frombuffer(bytes(self._raw[4 * start:4 * stop]), dtype="<i4")

    def rfind(self, pattern: Sequence[int], start: int, end: int) -> int:
        """The highest ``j`` with ``start <= j`` and ``j + len(pattern) <= end`` where ``ids[j:j+len(pattern)]``
        equals ``pattern``; -1 when there is none."""
        if not pattern or end - start < len(pattern):
            return -1
        needle = np.asarray(pattern, dtype="<i4").tobytes()
        lo, hi = 4 * start, 4 * end
        while True:
            at = self._raw.rfind(needle, lo, hi)
            if at < 0:
                return -1
            if at % 4 == 0:
                return at // 4
            hi = at + len(needle) - 1   # a match across token boundaries: look further back

    def find_all(self, pattern: Sequence[int], start: int, end: int) -> list[int]:
        """Every ``j`` (ascending) with ``start <= j`` and ``j + len(pattern) <= end`` where the
        window at ``j`` equals ``pattern``."""
        if not pattern:
            return []
        needle = np.asarray(pattern, dtype="<i4").tobytes()
        lo, hi = 4 * start, 4 * end
        found: list[int] = []
        while True:
            at = self._raw.find(needle, lo, hi)
            if at < 0:
                return found
            if at % 4 == 0:
                found.append(at // 4)
                lo = at + 4
            else:
                lo = at + 1
