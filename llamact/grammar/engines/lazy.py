"""A lazy grammar for a token-matcher engine: unconstrained until a trigger, as llama.cpp's.

llama.cpp keeps the trigger logic inside its grammar (llama-grammar.cpp, ``llama_grammar_accept_impl``);
an engine without it gets the same behaviour from ``LazyMatcher`` around its matcher:

* while awaiting a trigger every token is allowed, and each accepted token's piece (special tokens as
  their text) is appended to a buffer;
* a trigger token ends the wait: the matcher reads that token;
* otherwise each trigger pattern is tried on the whole buffer (``^...$`` patterns as a full match
  first, then any pattern as a search); the first that matches ends the wait, and the matcher reads
  the buffer from the first non-empty capture group (the whole match when none) to its end -- the
  bytes llama.cpp replays, first piece cut where the match starts.

Patterns are compiled as Python regular expressions over bytes; llama.cpp compiles them with
std::regex (ECMAScript). The templates' patterns (``[\\s\\S]*?``, literals, groups, alternations)
mean the same in both; a pattern Python cannot compile makes the grammar unfit for the engine
(``TriggerPatternError``), and ``auto`` keeps it on llama.cpp's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from ...errors import LlamaInferenceException

__all__ = ["LazyMatcher", "TriggerPatternError", "compile_trigger_patterns"]


class TriggerPatternError(LlamaInferenceException):
    """A trigger pattern the token-matcher engine cannot read as llama.cpp does."""


def compile_trigger_patterns(patterns: Sequence[str]) -> tuple[tuple[re.Pattern[bytes], bool], ...]:
    """Each pattern compiled over bytes, with whether it is anchored at both ends (``^...$``)."""
    out = []
    for pattern in patterns:
        try:
            compiled = re.compile(pattern.encode("utf-8"))
        except (re.error, UnicodeEncodeError) as exc:
            raise TriggerPatternError(f"the trigger pattern {pattern!r} is not a regular expression this engine "
                                      f"reads as llama.cpp does ({exc})", {"pattern": pattern}) from None
        out.append((compiled, bool(pattern) and pattern[0] == "^" and pattern[-1] == "$"))
    return tuple(out)


def _start(match: re.Match[bytes]) -> int:
    """Where the grammar starts reading: the first capture group that matched something, else the match."""
    for i in range(1, (match.re.groups or 0) + 1):
        if match.end(i) - match.start(i) > 0:
            return match.start(i)
    return match.start(0)


def _find(patterns: Sequence[tuple[re.Pattern[bytes], bool]], buffer: bytes) -> int | None:
    for pattern, anchored in patterns:
        if anchored:
            whole = pattern.fullmatch(buffer)
            if whole is not None:
                return _start(whole)
        found = pattern.search(buffer)
        if found is not None:
            return _start(found)
    return None


class LazyMatcher:
    """``inner`` (a TokenMatcher with ``accept_bytes``) behind a trigger (see the module docstring).
    ``pieces(token)`` is a token's text as llama.cpp's grammar reads it (special tokens included)."""

    def __init__(self, inner: object, n_vocab: int, pieces: Callable[[int], bytes],
                 patterns: Sequence[tuple[re.Pattern[bytes], bool]], trigger_tokens: frozenset[int]) -> None:
        self.inner = inner
        self._n_vocab = n_vocab
        self._pieces = pieces
        self._patterns = tuple(patterns)
        self._trigger_tokens = trigger_tokens
        self.awaiting = True
        self._buffer = b""
        self._all: np.ndarray | None = None

    def allows(self, token: int) -> bool:
        return True if self.awaiting else bool(self.inner.allows(token))  # type: ignore[attr-defined]

    def allowed(self) -> np.ndarray:
        if not self.awaiting:
            allowed: np.ndarray = self.inner.allowed()  # type: ignore[attr-defined]
            return allowed
        if self._all is None:
            self._all = np.ones(self._n_vocab, dtype=bool)
        return self._all

    def accept(self, token: int) -> None:
        if not self.awaiting:
            self.inner.accept(token)  # type: ignore[attr-defined]
            return
        if token in self._trigger_tokens:
            self.awaiting, self._buffer = False, b""
            self.inner.accept(token)  # type: ignore[attr-defined]
            return
        self._buffer += self._pieces(token)
        start = _find(self._patterns, self._buffer)
        if start is not None:
            constrained, self._buffer, self.awaiting = self._buffer[start:], b"", False
            self.inner.accept_bytes(constrained)  # type: ignore[attr-defined]

    def reset(self) -> None:
        self.inner.reset()  # type: ignore[attr-defined]
        self.awaiting, self._buffer = True, b""

    def copy(self) -> LazyMatcher:
        twin = LazyMatcher(self.inner.copy(), self._n_vocab, self._pieces,  # type: ignore[attr-defined]
                           self._patterns, self._trigger_tokens)
        twin.awaiting, twin._buffer = self.awaiting, self._buffer
        return twin
