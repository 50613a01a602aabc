"""The regular languages of lexemes: what the lexeme planner (``lexeme_plan``) asks about them.

A lexeme is a run of *regular* GBNF elements (literals, character classes, and references, groups
and repetitions that reach no recursive rule) that llguidance matches as one regular expression.
The planner needs, per lexeme, over code points:

* ``Shapes`` (structural, linear in the grammar, no automaton): whether it matches the empty word,
  a non-empty word, a word of two or more characters; its first characters; and ``ext``: the
  characters that can *extend a complete match* (w in L, w+c a prefix of a word in L). ``ext`` is
  computed on Glushkov positions (the characters that follow a last position), exact but for
  counted repetitions, where it may say more (a safe answer: the planner only splits more);
* ``Languages`` (Brzozowski derivatives, built lazily): whether some complete match of U followed by
  a character of a set C is a prefix of a word of V (``extends_into``), and which sets of lexemes
  can match one same non-empty text (``match_sets``). Both explore only where two languages share
  text, under a step budget; over it they answer the safe way (``True`` / ``None``).

Intervals are tuples of inclusive ``(lo, hi)`` code point pairs, sorted and merged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..gbnf import Alternatives, AnyChar, CharClass, Element, Grammar, Group, Literal, Repeat, RuleRef, TokenRef

__all__ = ["ALL", "Languages", "OverBudget", "Shape", "Shapes", "class_intervals", "intersects", "normalize", "union"]

MAX_CODEPOINT = 0x10FFFF
Intervals = tuple[tuple[int, int], ...]
ALL: Intervals = ((0, MAX_CODEPOINT),)
NONE: Intervals = ()


class OverBudget(Exception):
    """The planner's work bound was reached (the grammar is converted one character per lexeme)."""


def normalize(pairs: Iterable[tuple[int, int]]) -> Intervals:
    """Pairs sorted, overlapping and adjacent ones merged."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(pairs):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def union(*sets: Intervals) -> Intervals:
    present = [s for s in sets if s]
    if not present:
        return NONE
    if all(s == present[0] for s in present):
        return present[0]
    return normalize(p for s in present for p in s)


def intersects(a: Intervals, b: Intervals) -> bool:
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i][1] < b[j][0]:
            i += 1
        elif b[j][1] < a[i][0]:
            j += 1
        else:
            return True
    return False


def class_intervals(item: CharClass | AnyChar) -> Intervals:
    """The code points a class matches (llama.cpp: a negated class matches every other code point)."""
    if isinstance(item, AnyChar):
        return ALL
    ranges = normalize((lo, min(hi, MAX_CODEPOINT)) for lo, hi in item.ranges if lo <= min(hi, MAX_CODEPOINT))
    if not item.negated:
        return ranges
    out, start = [], 0
    for lo, hi in ranges:
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= MAX_CODEPOINT:
        out.append((start, MAX_CODEPOINT))
    return tuple(out)


@dataclass(frozen=True)
class Shape:
    nullable: bool        # matches the empty word
    nonempty: bool        # matches some non-empty word
    multichar: bool       # matches some word of two or more characters
    first: Intervals      # characters a non-empty word can start with
    ext: Intervals        # characters that can extend a complete (non-empty or empty) match


EPS_SHAPE = Shape(True, False, False, NONE, NONE)


def _seq(a: Shape, b: Shape) -> Shape:
    if a is EPS_SHAPE:
        return b
    return Shape(a.nullable and b.nullable, a.nonempty or b.nonempty,
                 a.multichar or b.multichar or (a.nonempty and b.nonempty),
                 union(a.first, b.first) if a.nullable else a.first,
                 union(b.ext, a.ext, b.first) if b.nullable else b.ext)


def _alt(shapes: list[Shape]) -> Shape:
    if not shapes:
        return EPS_SHAPE
    return Shape(any(s.nullable for s in shapes), any(s.nonempty for s in shapes), any(s.multichar for s in shapes),
                 union(*(s.first for s in shapes)), union(*(s.ext for s in shapes)))


class Shapes:
    """Structural facts of regular elements of one grammar (memoized per rule)."""

    def __init__(self, grammar: Grammar) -> None:
        self.grammar = grammar
        self._rules: dict[str, Shape] = {}

    def rule(self, name: str) -> Shape:
        hit = self._rules.get(name)
        if hit is None:
            hit = self.alternatives(self.grammar.rules[name])
            self._rules[name] = hit
        return hit

    def alternatives(self, alts: Alternatives) -> Shape:
        return _alt([self.run(s.items) for s in alts.sequences])

    def run(self, items: Iterable[Element]) -> Shape:
        shape = EPS_SHAPE
        for item in items:
            shape = _seq(shape, self.element(item))
        return shape

    def element(self, item: Element) -> Shape:
        if isinstance(item, Literal):
            cps = item.codepoints
            if not cps:
                return EPS_SHAPE
            return Shape(False, True, len(cps) > 1, ((cps[0], cps[0]),), NONE)
        if isinstance(item, (CharClass, AnyChar)):
            chars = class_intervals(item)
            return Shape(False, bool(chars), False, chars, NONE)
        if isinstance(item, RuleRef):
            return self.rule(item.name)
        if isinstance(item, Group):
            return self.alternatives(item.alternatives)
        if isinstance(item, Repeat):
            if item.max == 0:
                return EPS_SHAPE
            x = self.element(item.item)
            # another iteration may follow a complete match when more are allowed than are needed
            again = item.max is None or item.max > (1 if x.nullable else max(item.min, 1))
            return Shape(item.min == 0 or x.nullable, x.nonempty,
                         x.multichar or (x.nonempty and (item.max is None or item.max > 1)),
                         x.first, union(x.ext, x.first) if again else x.ext)
        raise TypeError(f"not a regular element: {type(item).__name__}")   # TokenRef: never in a lexeme


def _refs(alts: Alternatives) -> list[str]:
    out: list[str] = []
    stack: list[object] = list(alts.sequences)
    while stack:
        x = stack.pop()
        if isinstance(x, RuleRef):
            out.append(x.name)
        elif isinstance(x, Group):
            stack.extend(x.alternatives.sequences)
        elif isinstance(x, Repeat):
            stack.append(x.item)
        elif hasattr(x, "items"):
            stack.extend(x.items)
    return out


# -- derivatives ---------------------------------------------------------------------------------

_EMPTY, _EPS, _CHARS, _SEQ, _ALT, _REP = range(6)


class Languages:
    """Regular elements as interned derivative expressions (ids), explored lazily under a budget."""

    def __init__(self, grammar: Grammar, budget: int = 200_000) -> None:
        self.grammar = grammar
        self.budget = budget
        self._nodes: list[tuple] = []
        self._ids: dict[tuple, int] = {}
        self.EMPTY = self._intern((_EMPTY,))
        self.EPS = self._intern((_EPS,))
        self._rule_ids: dict[str, int] = {}
        self._nullable: dict[int, bool] = {}
        self._bounds: dict[int, frozenset[int]] = {}
        self._first: dict[int, Intervals] = {}
        self._deriv: dict[tuple[int, int], int] = {}

    def _spend(self, n: int = 1) -> None:
        self.budget -= n
        if self.budget < 0:
            raise OverBudget("the lexeme analysis ran out of steps")

    def _intern(self, node: tuple) -> int:
        hit = self._ids.get(node)
        if hit is None:
            hit = len(self._nodes)
            self._nodes.append(node)
            self._ids[node] = hit
        return hit

    # -- constructors (normalizing, so that equal languages tend to meet as equal ids)
    def chars(self, intervals: Intervals) -> int:
        return self._intern((_CHARS, intervals)) if intervals else self.EMPTY

    def seq(self, a: int, b: int) -> int:
        if a == self.EMPTY or b == self.EMPTY:
            return self.EMPTY
        if a == self.EPS:
            return b
        if b == self.EPS:
            return a
        node = self._nodes[a]
        if node[0] == _SEQ:   # right-nested: (x y) z -> x (y z)
            return self.seq(node[1], self.seq(node[2], b))
        return self._intern((_SEQ, a, b))

    def alt(self, ids: Iterable[int]) -> int:
        flat: set[int] = set()
        for i in ids:
            node = self._nodes[i]
            if node[0] == _ALT:
                flat.update(node[1])
            elif i != self.EMPTY:
                flat.add(i)
        if not flat:
            return self.EMPTY
        if len(flat) == 1:
            return next(iter(flat))
        return self._intern((_ALT, frozenset(flat)))

    def rep(self, x: int, lo: int, hi: int | None) -> int:
        if hi == 0 or x == self.EPS:
            return self.EPS
        if x == self.EMPTY:
            return self.EPS if lo == 0 else self.EMPTY
        if lo == 1 and hi == 1:
            return x
        return self._intern((_REP, x, lo, hi))

    # -- from GBNF
    def rule(self, name: str) -> int:
        hit = self._rule_ids.get(name)
        if hit is None:
            for dep in self._dependencies(name):   # deepest first: no recursion along a chain of rules
                if dep not in self._rule_ids:
                    self._rule_ids[dep] = self.alternatives(self.grammar.rules[dep])
            hit = self._rule_ids[name]
        return hit

    def _dependencies(self, name: str) -> list[str]:
        """``name`` and the rules it reaches, each after those it refers to (regular rules: no cycle)."""
        order: list[str] = []
        done: set[str] = set(self._rule_ids)
        stack: list[tuple[str, list[str]]] = [(name, _refs(self.grammar.rules[name]))]
        seen = {name}
        while stack:
            current, refs = stack[-1]
            if refs:
                ref = refs.pop()
                if ref not in seen and ref not in done:
                    seen.add(ref)
                    stack.append((ref, _refs(self.grammar.rules[ref])))
                continue
            stack.pop()
            order.append(current)
        return order

    def alternatives(self, alts: Alternatives) -> int:
        return self.alt([self.run(s.items) for s in alts.sequences])

    def run(self, items: tuple[Element, ...]) -> int:
        out = self.EPS
        for item in reversed(items):
            out = self.seq(self.element(item), out)
        return out

    def element(self, item: Element) -> int:
        self._spend()
        if isinstance(item, Literal):
            out = self.EPS
            for cp in reversed(item.codepoints):
                out = self.seq(self.chars(((cp, cp),)), out)
            return out
        if isinstance(item, (CharClass, AnyChar)):
            return self.chars(class_intervals(item))
        if isinstance(item, RuleRef):
            return self.rule(item.name)
        if isinstance(item, Group):
            return self.alternatives(item.alternatives)
        if isinstance(item, Repeat):
            return self.rep(self.element(item.item), item.min, item.max)
        assert not isinstance(item, TokenRef)
        raise TypeError(f"not a regular element: {type(item).__name__}")

    # -- questions
    def nullable(self, e: int) -> bool:
        hit = self._nullable.get(e)
        if hit is None:
            node = self._nodes[e]
            kind = node[0]
            if kind in (_EMPTY, _CHARS):
                hit = False
            elif kind == _EPS:
                hit = True
            elif kind == _SEQ:
                hit = self.nullable(node[1]) and self.nullable(node[2])
            elif kind == _ALT:
                hit = any(self.nullable(x) for x in node[1])
            else:
                hit = node[2] == 0 or self.nullable(node[1])
            self._nullable[e] = hit
        return hit

    def first(self, e: int) -> Intervals:
        hit = self._first.get(e)
        if hit is None:
            node = self._nodes[e]
            kind = node[0]
            if kind == _CHARS:
                hit = node[1]
            elif kind == _SEQ:
                hit = union(self.first(node[1]), self.first(node[2])) if self.nullable(node[1]) \
                    else self.first(node[1])
            elif kind == _ALT:
                hit = union(*(self.first(x) for x in node[1]))
            elif kind == _REP:
                hit = self.first(node[1])
            else:
                hit = NONE
            self._first[e] = hit
        return hit

    def _bounds_of(self, e: int) -> frozenset[int]:
        """Points where the derivative may change: each first interval's start and end + 1."""
        hit = self._bounds.get(e)
        if hit is None:
            hit = frozenset(p for lo, hi in self.first(e) for p in (lo, hi + 1))
            self._bounds[e] = hit
        return hit

    def _segments(self, exprs: Iterable[int]) -> list[int]:
        """One representative code point per class of characters no expression tells apart."""
        points: set[int] = set()
        for e in exprs:
            points |= self._bounds_of(e)
        return sorted(p for p in points if p <= MAX_CODEPOINT)

    def derive(self, e: int, ch: int) -> int:
        key = (e, ch)
        hit = self._deriv.get(key)
        if hit is not None:
            return hit
        self._spend()
        node = self._nodes[e]
        kind = node[0]
        if kind == _CHARS:
            hit = self.EPS if any(lo <= ch <= hi for lo, hi in node[1]) else self.EMPTY
        elif kind == _SEQ:
            head = self.seq(self.derive(node[1], ch), node[2])
            hit = self.alt((head, self.derive(node[2], ch))) if self.nullable(node[1]) else head
        elif kind == _ALT:
            self._spend(len(node[1]))
            hit = self.alt(self.derive(x, ch) for x in node[1])
        elif kind == _REP:
            x, lo, hi = node[1], node[2], node[3]
            hit = self.seq(self.derive(x, ch), self.rep(x, max(lo - 1, 0), None if hi is None else hi - 1))
        else:
            hit = self.EMPTY
        self._deriv[key] = hit
        return hit

    def extends_into(self, u: int, v: int, follow: Intervals, limit: int = 4000) -> bool:
        """Whether a non-empty complete match w of ``u``, followed by a character of ``follow``, can be
        a prefix of a word of ``v`` (where a greedy lexer would read on into ``v``). Over ``limit``
        pairs explored: True (the safe answer)."""
        if not follow:
            return False
        seen = {(u, v)}
        todo = [(u, v)]
        while todo:
            a, b = todo.pop()
            for ch in self._segments((a, b)):
                da, db = self.derive(a, ch), self.derive(b, ch)
                if da == self.EMPTY or db == self.EMPTY:
                    continue
                if self.nullable(da) and intersects(self.first(db), follow):
                    return True
                if (da, db) not in seen:
                    if len(seen) >= limit:
                        return True
                    seen.add((da, db))
                    todo.append((da, db))
        return False

    def match_sets(self, exprs: list[int], limit: int = 4000) -> set[frozenset[int]] | None:
        """The sets of indexes into ``exprs`` whose languages hold one same non-empty word (what a
        lexer reports as matching one text). None over ``limit`` states explored."""
        out: set[frozenset[int]] = set()
        start = tuple(exprs)
        seen = {start}
        todo = [start]
        while todo:
            state = todo.pop()
            for ch in self._segments(e for e in state if e != self.EMPTY):
                nxt = tuple(self.derive(e, ch) if e != self.EMPTY else e for e in state)
                alive = [i for i, e in enumerate(nxt) if e != self.EMPTY]
                if not alive:
                    continue
                accepting = frozenset(i for i in alive if self.nullable(nxt[i]))
                if accepting:
                    out.add(accepting)
                if len(alive) == 1:   # one language left: it alone matches whatever it goes on to match
                    out.add(frozenset(alive))
                    continue
                if nxt not in seen:
                    if len(seen) >= limit:
                        return None
                    seen.add(nxt)
                    todo.append(nxt)
        return out
