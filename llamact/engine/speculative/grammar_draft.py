"""Grammar drafts (llamact's own ``grammar`` type): the text a request's grammar forces next, drafted.

A named tool call's envelope and function name, a schema's keys and punctuation, a reasoning tag:
where every continuation the grammar allows starts with the same text, that text's tokens are a
draft. The target still samples each position with its grammar-constrained sampler and keeps a
drafted token only while it equals its own choice, so nothing changes but the number of decodes.

How: the grammar (the one the sampler holds, non-lazy only) is read by ``GbnfAcceptor``, upstream's
pushdown matcher in Python, fed the text of every token the target samples (as llama.cpp's grammar
reads it: special tokens as their text), after the generation prompt when the grammar was prefilled
with it. ``forced_text`` walks from that state while exactly one character is possible.

The seam: the forced text is tokenized alone, and its last token may be one the model would merge
with the text that follows (a forced ``"`` followed by a sampled ``Paris`` is often the one token
``"Paris``), so the last token is left out of the draft unless the grammar ends right after it. A
token whose text is not exactly the next piece of the forced text (a tokenizer that adds a space
in front) ends the draft there. A grammar the acceptor cannot follow (a token reference, bytes
that are not UTF-8) drafts nothing from then on.
"""

from __future__ import annotations

import codecs
from collections import OrderedDict
from collections.abc import Callable, Sequence

from ...grammar import GbnfAcceptor, GbnfError, parse_gbnf
from ...native.model import Vocab

__all__ = ["AcceptorCache", "GrammarDraft"]

_BLANKS = frozenset(" \t\n\r")


class AcceptorCache:
    """Acceptors by grammar text and root, the most recent ``size`` kept (building one parses and
    lowers the grammar; a server sees the same tool-call grammars again and again). One cache per
    engine: an acceptor caches its stack closures and is not thread-safe."""

    def __init__(self, size: int = 16) -> None:
        self._size = size
        self._cache: OrderedDict[tuple[str, str], GbnfAcceptor | None] = OrderedDict()

    def get(self, text: str, root: str) -> GbnfAcceptor | None:
        key = (text, root)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        try:
            acceptor: GbnfAcceptor | None = GbnfAcceptor(parse_gbnf(text, root), root)
        except (GbnfError, RecursionError):
            acceptor = None   # the native grammar was checked already; drafts are only a help
        self._cache[key] = acceptor
        if len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return acceptor


class GrammarDraft:
    """One sequence's grammar state, fed what the target samples, and its forced drafts."""

    def __init__(self, acceptor: GbnfAcceptor, vocab: Vocab, prefill: Sequence[int] = ()) -> None:
        self._acceptor = acceptor
        self._vocab = vocab
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._state = acceptor.initial_state()
        self._tokenize: Callable[[str], list[int]] = lambda text: vocab.tokenize(text, False, True)
        # the whitespace the model wrote after each character where the grammar let it choose (JSON's
        # optional spaces): the draft assumes the same habit next time
        self._habit: dict[str, str] = {}
        self._last = ""      # the last character that is not whitespace
        self._blank = ""     # the whitespace the model wrote after it so far
        self.feed(prefill)

    @property
    def alive(self) -> bool:
        return bool(self._state)

    def feed(self, tokens: Sequence[int]) -> None:
        """Tokens the target chose (accepted by its grammar), in order."""
        if not self._state:
            return
        piece = self._vocab.token_to_piece
        raw = b"".join(piece(t, special=True) for t in tokens)
        try:
            text = self._utf8.decode(raw)
        except UnicodeDecodeError:
            self._state = ()
            return
        if text:
            self._state = self._acceptor.advance(self._state, text)
            for ch in text:
                if ch in _BLANKS:
                    self._blank += ch
                else:
                    if self._last:
                        self._habit[self._last] = self._blank
                    self._last, self._blank = ch, ""

    def _space(self, previous: str) -> str | None:
        """The whitespace to assume after ``previous`` ("": the last character fed) where the grammar
        makes it optional: what the model wrote after that character before (the rest of it, when
        the model is writing it now); None, no guess, where it has not shown its habit yet."""
        if not previous:
            habit = self._habit.get(self._last)
            if habit is None or not habit.startswith(self._blank):
                return None
            return habit[len(self._blank):]
        return None if previous in _BLANKS else self._habit.get(previous)

    def draft(self, n_max: int) -> list[int]:
        """The tokens of the text the grammar forces next (at most ``n_max``; none when nothing is forced)."""
        if not self._state or n_max <= 0 or self._utf8.getstate()[0]:
            return []   # dead, or inside a character: the next characters are not the grammar's to say
        text, ends = self._acceptor.forced_text(self._state, 4 * n_max + 16, self._space)
        if not text:
            return []
        forced = text.encode("utf-8")
        tokens: list[int] = []
        at = 0
        for token in self._tokenize(text):
            piece = self._vocab.token_to_piece(token, special=True)
            if not piece or not forced.startswith(piece, at):
                break
            tokens.append(token)
            at += len(piece)
        if not (ends and at == len(forced)) and tokens:
            tokens.pop()   # the seam: the model may merge the last forced token with what follows
        return tokens[:n_max]
