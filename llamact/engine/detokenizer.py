"""Incremental detokenization that never splits a UTF-8 sequence.

A token's piece can end inside a multi-byte character (byte-fallback vocabularies emit one byte
per token for rare characters). The decoder keeps the incomplete tail until the rest arrives, so
every emitted string is whole characters; bytes that can never form a character become U+FFFD.
"""

from __future__ import annotations

import codecs


class Utf8Stream:
    """Feed bytes, get complete text back."""

    __slots__ = ("_decoder",)

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> str:
        return self._decoder.decode(data)

    def flush(self) -> str:
        """End of stream: an incomplete trailing sequence becomes U+FFFD."""
        return self._decoder.decode(b"", final=True)

    @property
    def pending_bytes(self) -> int:
        return len(self._decoder.getstate()[0])
