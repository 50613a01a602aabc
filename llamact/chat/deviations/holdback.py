"""Deviation 5, the hold-back rules: what part of a partial text a stream may already send.

Upstream streams every partial parse as it is; a later parse can then disagree with what was sent
(trailing whitespace the final parse trims, a marker that turns out to open a thought or a tool
call). The stream here sends only a *stable* prefix:

* leading whitespace waits until other text arrives (the parse may drop it);
* trailing whitespace waits until more text arrives or generation ends;
* a tail that is a marker, or the start of one (thinking tags; with tools, tool-call openings),
  waits until later text rules it out.

:class:`Markers` answers "where does the held tail start" in a few slice-and-lookups, whatever the
length of the text (this runs on every token): only the last ``longest marker`` characters are
looked at, from where a marker's first character occurs. :func:`advance` turns a new stable text into the
delta to send. Nothing here raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .reasoning import WHITESPACE

_NOT_SPACE = re.compile(r"[^ \t\n\v\f\r]")

__all__ = ["Markers", "advance"]


class Markers:
    """The markers whose (partial) presence at the end of a text holds that tail back."""

    __slots__ = ("_prefixes", "_longest", "_first_chars")

    def __init__(self, markers: Iterable[str]) -> None:
        words = {m.strip(WHITESPACE) for m in markers}
        words.discard("")
        # every non-empty prefix of every marker, the whole marker included
        self._prefixes = frozenset(w[:k] for w in words for k in range(1, len(w) + 1))
        self._longest = max((len(w) for w in words), default=0)
        self._first_chars = tuple(sorted({w[0] for w in words}))

    def stable(self, text: str, hold_leading: bool = True) -> str:
        """``text`` less its held tail: trailing whitespace and marker (prefix) runs, repeatedly;
        all of it while it is only whitespace (``hold_leading``)."""
        end = len(text)
        while True:
            cut = len(text[:end].rstrip(WHITESPACE))
            cut = self._marker_start(text, cut)
            if cut == end:
                break
            end = cut
        if hold_leading and _NOT_SPACE.search(text, 0, end) is None:
            return ""
        return text[:end]

    def _marker_start(self, text: str, end: int) -> int:
        """Where the longest marker (or marker start) ending at ``end`` begins (``end`` if none)."""
        lo = max(0, end - self._longest)
        best = end
        for first in self._first_chars:
            at = text.find(first, lo, end)
            while 0 <= at < best:
                if text[at:end] in self._prefixes:
                    best = at
                    break
                at = text.find(first, at + 1, end)
        return best


def advance(sent: str, stable: str) -> str:
    """What ``stable`` adds to the ``sent`` text ("" when it adds nothing or does not extend it: a
    stream never takes text back)."""
    if len(stable) > len(sent) and stable.startswith(sent):
        return stable[len(sent):]
    return ""
