"""Upstream's code point trie and Aho-Corasick automaton (``common/trie.{h,cpp}``).

State numbers, failure links and the alphabet follow upstream exactly (children visited in
code point order, as its ``std::map``), since the GBNF generator names rules after states.
Words are sequences of Unicode code points; a word's insertion stops at the first code point
upstream's UTF-8 decoder would reject (a lone surrogate here). Nothing in this module raises.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable


def _codepoints(word: str) -> list[int]:
    out = []
    for ch in word:
        cp = ord(ch)
        if 0xD800 <= cp <= 0xDFFF:
            break
        out.append(cp)
    return out


class Trie:
    """A trie of code point sequences; ``pattern[node]`` is the index of the word ending there, or -1."""

    def __init__(self, words: Iterable[str] = ()) -> None:
        self.children: list[dict[int, int]] = [{}]
        self.pattern: list[int] = [-1]
        self._n_patterns = 0
        for word in words:
            self.insert(word)

    def insert(self, word: str) -> int:
        """Insert ``word``; returns its pattern index (a duplicate keeps the first index)."""
        current = 0
        for cp in _codepoints(word):
            nxt = self.children[current].get(cp)
            if nxt is None:
                nxt = len(self.children)
                self.children.append({})
                self.pattern.append(-1)
                self.children[current][cp] = nxt
            current = nxt
        if self.pattern[current] < 0:
            self.pattern[current] = self._n_patterns
            self._n_patterns += 1
        return self.pattern[current]


class AhoCorasick:
    """The automaton over a :class:`Trie`: failure links, longest match per state, alphabet."""

    def __init__(self, strings: Iterable[str]) -> None:
        self.trie = Trie(strings)
        children = self.trie.children
        n = len(children)
        self.fail = [0] * n
        self.order: list[int] = []
        queue = deque([0])
        while queue:
            u = queue.popleft()
            self.order.append(u)
            for ch, v in sorted(children[u].items()):
                if u != 0:
                    f = self.fail[u]
                    while f and ch not in children[f]:
                        f = self.fail[f]
                    target = children[f].get(ch)
                    self.fail[v] = target if target is not None and target != v else 0
                queue.append(v)
        self.match = [-1] * n
        for u in self.order:
            pat = self.trie.pattern[u]
            self.match[u] = pat if pat >= 0 else (self.match[self.fail[u]] if u != 0 else -1)
        self.alphabet: list[int] = sorted({ch for node in children for ch in node})

    @property
    def num_states(self) -> int:
        return len(self.trie.children)

    def is_terminal(self, state: int) -> bool:
        """Whether some word ends at ``state`` (directly or through a suffix link)."""
        return self.match[state] >= 0

    def next(self, state: int, ch: int) -> int:
        """The state after ``ch``: follow failure links until a transition on ``ch`` exists (else 0)."""
        children = self.trie.children
        while state and ch not in children[state]:
            state = self.fail[state]
        return children[state].get(ch, 0)
