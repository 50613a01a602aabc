"""Stop strings over streamed text: text is released only once it cannot start a stop string."""

from __future__ import annotations

from collections.abc import Sequence


class StopMatcher:
    """Finds the first stop string in a stream of text pieces.

    ``feed`` returns the text that is safe to emit now and whether a stop string was hit. Text
    that could be the beginning of a stop string is held back until ruled out, so a stop string
    split across tokens is still found and never partly emitted.
    """

    __slots__ = ("_stops", "_chars", "_held", "matched")

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._chars = frozenset("".join(self._stops))
        self._held = ""
        self.matched: str | None = None

    def feed(self, text: str) -> tuple[str, bool]:
        if not self._stops:
            return text, False
        if not self._held and self._chars.isdisjoint(text):
            return text, False  # the common case: nothing here can be part of a stop string
        buf = self._held + text
        first = -1
        for stop in self._stops:
            at = buf.find(stop)
            if at != -1 and (first == -1 or at < first):
                first, self.matched = at, stop
        if first != -1:
            self._held = ""
            return buf[:first], True
        keep = self._longest_stop_prefix_suffix(buf)
        self._held = buf[len(buf) - keep:] if keep else ""
        return buf[: len(buf) - keep], False

    def flush(self) -> str:
        held, self._held = self._held, ""
        return held

    def _longest_stop_prefix_suffix(self, buf: str) -> int:
        best = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(buf)), best, -1):
                if buf.endswith(stop[:n]):
                    best = n
                    break
        return best
