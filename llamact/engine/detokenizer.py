"""Incremental detokenization that never splits a UTF-8 sequence.

A token's piece can end inside a multi-byte character (byte-fallback vocabularies emit one byte
per token for rare characters). The decoder keeps the incomplete tail until the rest arrives, so
every emitted string is whole characters; bytes that can never form a character become U+FFFD.
"""

from __future__ import annotations

from codecs import utf_8_decode


class Utf8Stream:
    """Feed bytes, get complete text back."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> str:
        if self._pending:
            data = self._pending + data
        # Not final: an incomplete sequence at the end is left unconsumed, to be completed by the
        # next piece; bytes that can never start or continue a character become U+FFFD.
        text, used = utf_8_decode(data, "replace", False)
        self._pending = data[used:]
        return text

    def flush(self) -> str:
        """End of stream: an incomplete trailing sequence becomes U+FFFD."""
        data, self._pending = self._pending, b""
        return utf_8_decode(data, "replace", True)[0] if data else ""

    @property
    def pending_bytes(self) -> int:
        return len(self._pending)
