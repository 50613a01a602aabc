"""The lexeme-level grammar explored: which lexemes a greedy lexer could read on into (see
``lexeme_plan``, which splits them).

    guilty = find_guilty(rules, start, languages, states_left)   lexeme -> [Reason], empty: none

The parser-level grammar (``rules``: rule name -> alternatives of ``Sym``) is flattened to BNF, its
items numbered, and its parse states explored as an LR(0)-style subset construction over Earley
items -- a completed rule returns to every place that calls it, so there are more states than any
parse meets, never fewer -- moving from a state by each set of lexemes that can match one same text
(as llguidance's lexer reports them). In each state, for each allowed lexeme U and the characters
that may follow it from there: U extends itself (``Shape.ext``) -> U is guilty; U extends into
another allowed V (``Languages.extends_into``) -> V is guilty.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..gbnf import Element
from .lexeme_lang import Intervals, Languages, OverBudget, Shape, intersects, union

__all__ = ["Lexeme", "PGroup", "PRef", "PRepeat", "Reason", "Sym", "UNROLL", "find_guilty"]

UNROLL = 8               # counted repetitions up to this bound are analysed exactly, larger as x* / x+


class Lexeme:
    """One place in the parser-level grammar where ``items`` (regular elements) are one lexeme."""

    __slots__ = ("items", "shape")

    def __init__(self, items: tuple[Element, ...], shape: Shape) -> None:
        self.items = items
        self.shape = shape

    def __repr__(self) -> str:
        return f"Lexeme({self.items!r})"


@dataclass(frozen=True)
class PRef:
    name: str


@dataclass(eq=False)
class PGroup:
    alts: list[list[Sym]]


@dataclass(eq=False)
class PRepeat:
    sym: Sym
    min: int
    max: int | None


Sym = Lexeme | PRef | PGroup | PRepeat


@dataclass(frozen=True)
class Reason:
    """Why a lexeme is split: U (a derivative expression; None: the lexeme extends itself) ends and
    a character of ``follow`` may come next."""

    u: int | None
    u_first: Intervals
    follow: Intervals


_LEX, _NT = 0, 1


class _Bnf:
    """The parser-level grammar flattened (groups and repetitions become rules), its items numbered:
    item ``i`` is a position in one alternative; ``sym[i]`` the symbol after it (None at the end)."""

    def __init__(self, rules: dict[str, list[list[Sym]]], start: str) -> None:
        self.prods: list[list[tuple[tuple[int, int], ...]]] = []
        self.lexemes: list[Lexeme] = []
        self._lex_index: dict[int, int] = {}
        self._index: dict[str, int] = {}
        for name in rules:
            self._index[name] = self._new()
        for name, alts in rules.items():
            self.prods[self._index[name]] = [self._seq(a) for a in alts]
        self.start = self._index[start]
        self._number()

    def _new(self) -> int:
        self.prods.append([])
        return len(self.prods) - 1

    def _seq(self, syms: list[Sym]) -> tuple[tuple[int, int], ...]:
        return tuple(self._sym(s) for s in syms)

    def _sym(self, sym: Sym) -> tuple[int, int]:
        if isinstance(sym, Lexeme):
            key = id(sym)
            if key not in self._lex_index:
                self._lex_index[key] = len(self.lexemes)
                self.lexemes.append(sym)
            return (_LEX, self._lex_index[key])
        if isinstance(sym, PRef):
            return (_NT, self._index[sym.name])
        if isinstance(sym, PGroup):
            nt = self._new()
            self.prods[nt] = [self._seq(a) for a in sym.alts]
            return (_NT, nt)
        x = self._sym(sym.sym)
        lo, hi = sym.min, sym.max
        if hi is not None and hi <= UNROLL:   # exact: x^lo (x (x ...)?)?
            tail: tuple[tuple[int, int], ...] = ()
            for _ in range(hi - lo):
                opt = self._new()
                self.prods[opt] = [(), (x,) + tail]
                tail = ((_NT, opt),)
            nt = self._new()
            self.prods[nt] = [(x,) * lo + tail]
            return (_NT, nt)
        star = self._new()   # larger counts: x* (lo 0) or x x* (more than is allowed: only more states)
        self.prods[star] = [(), (x, (_NT, star))]
        if lo == 0:
            return (_NT, star)
        plus = self._new()
        self.prods[plus] = [(x, (_NT, star))]
        return (_NT, plus)

    def _number(self) -> None:
        self.sym: list[tuple[int, int] | None] = []
        self.owner: list[int] = []
        self.starts: list[list[int]] = []
        for nt, alts in enumerate(self.prods):
            firsts = []
            for prod in alts:
                firsts.append(len(self.sym))
                self.sym.extend(prod)
                self.sym.append(None)
                self.owner.extend([nt] * (len(prod) + 1))
            self.starts.append(firsts)
        n = len(self.prods)
        self.returns: list[list[int]] = [[] for _ in range(n)]   # items after each call of the rule
        for i, sym in enumerate(self.sym):
            if sym is not None and sym[0] == _NT:
                self.returns[sym[1]].append(i + 1)
        self.nullable = [False] * n
        changed = True
        while changed:
            changed = False
            for nt, alts in enumerate(self.prods):
                if not self.nullable[nt] and any(all(self._sym_nullable(s) for s in prod) for prod in alts):
                    self.nullable[nt] = True
                    changed = True
        self.skips = [sym is not None and self._sym_nullable(sym) for sym in self.sym]
        self.next_lexeme = [sym[1] if sym is not None and sym[0] == _LEX else -1 for sym in self.sym]
        self._predicted: dict[int, frozenset[int]] = {}
        self._returned: dict[int, frozenset[int]] = {}

    def _sym_nullable(self, sym: tuple[int, int]) -> bool:
        kind, x = sym
        return self.nullable[x] if kind == _NT else self.lexemes[x].shape.nullable

    def predicted(self, nt: int) -> frozenset[int]:
        """Items a prediction of ``nt`` brings (nested predictions and nullable skips; a rule
        completed empty returns only where it was predicted, by the predictor's own skip)."""
        hit = self._predicted.get(nt)
        if hit is None:
            seen: set[int] = set()
            stack = list(self.starts[nt])
            while stack:
                i = stack.pop()
                if i in seen:
                    continue
                seen.add(i)
                sym = self.sym[i]
                if sym is None:
                    continue
                if sym[0] == _NT:
                    stack.extend(self.starts[sym[1]])
                if self.skips[i]:
                    stack.append(i + 1)
            hit = frozenset(seen)
            self._predicted[nt] = hit
        return hit

    def _walk(self, stack: list[int], use_returned: bool) -> set[int]:
        """Items reached from ``stack`` (items after text was read): they and their skips carry the
        return to every caller when their rule completes."""
        out: set[int] = set()
        carried: set[int] = set()
        while stack:
            i = stack.pop()
            if i in carried:
                continue
            carried.add(i)
            sym = self.sym[i]
            if sym is None:
                nt = self.owner[i]
                if use_returned:
                    out |= self.returned(nt)
                else:
                    stack.extend(self.returns[nt])
                continue
            if sym[0] == _NT:
                out |= self.predicted(sym[1])
            if self.skips[i]:
                stack.append(i + 1)
        return out | carried

    def returned(self, nt: int) -> frozenset[int]:
        """Items present once ``nt`` completes after reading text: every caller's next position."""
        hit = self._returned.get(nt)
        if hit is None:
            hit = frozenset(self._walk(list(self.returns[nt]), use_returned=False))
            self._returned[nt] = hit
        return hit

    def closure(self, kernel: frozenset[int]) -> frozenset[int]:
        return frozenset(self._walk(list(kernel), use_returned=True))

    def expected(self, items: frozenset[int]) -> dict[int, list[int]]:
        """Lexeme index -> the items waiting for it."""
        out: dict[int, list[int]] = {}
        nxt = self.next_lexeme
        for i in items:
            x = nxt[i]
            if x >= 0:
                out.setdefault(x, []).append(i)
        return out


def _components(lexemes: list[Lexeme], ids: list[int]) -> list[list[int]]:
    """Groups of lexemes whose first characters overlap (only those can match one same text): a
    sweep over their first intervals in order, joining what overlaps."""
    spans = sorted((lo, hi, i) for i in ids for lo, hi in lexemes[i].shape.first)
    parent = {i: i for i in ids}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    reach, holder = -1, -1
    for lo, hi, i in spans:
        if lo <= reach:
            parent[find(i)] = find(holder)
        if hi > reach:
            reach, holder = hi, i
    groups: dict[int, list[int]] = {}
    for i in ids:
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())


def _char_match_sets(firsts: list[Intervals]) -> set[frozenset[int]]:
    """Match sets of single-character lexemes (their first characters are their language), as
    indexes into ``firsts``: one per class of characters they tell apart (a sweep over the starts
    and ends of their intervals)."""
    events = sorted({p for f in firsts for lo, hi in f for p in (lo, hi + 1)})
    starts: dict[int, list[int]] = {}
    ends: dict[int, list[int]] = {}
    for j, f in enumerate(firsts):
        for lo, hi in f:
            starts.setdefault(lo, []).append(j)
            ends.setdefault(hi + 1, []).append(j)
    active: set[int] = set()
    out: set[frozenset[int]] = set()
    for p in events:
        active.difference_update(ends.get(p, ()))
        active.update(starts.get(p, ()))
        if active:
            out.add(frozenset(active))
    return out


class _Explorer:
    def __init__(self, bnf: _Bnf, langs: Languages, states_left: int) -> None:
        self.states_left = states_left
        self.bnf = bnf
        self.langs = langs
        self._closures: dict[frozenset[int], frozenset[int]] = {}
        self._follows: dict[frozenset[int], Intervals] = {}
        self._exprs: dict[int, int] = {}
        self._extends: dict[tuple[int, int, Intervals], bool] = {}
        self._char_sets: dict[tuple[Intervals, ...], set[frozenset[int]]] = {}

    def closure(self, kernel: frozenset[int]) -> frozenset[int]:
        hit = self._closures.get(kernel)
        if hit is None:
            hit = self.bnf.closure(kernel)
            self._closures[kernel] = hit
        return hit

    def expr(self, i: int) -> int:
        hit = self._exprs.get(i)
        if hit is None:
            hit = self.langs.run(self.bnf.lexemes[i].items)
            self._exprs[i] = hit
        return hit

    def _follow(self, waiting: list[int]) -> Intervals:
        kernel = frozenset(i + 1 for i in waiting)
        hit = self._follows.get(kernel)
        if hit is None:
            lexemes = self.bnf.lexemes
            hit = union(*{lexemes[x].shape.first for x in self.bnf.expected(self.closure(kernel))})
            self._follows[kernel] = hit
        return hit

    def guilty(self) -> dict[Lexeme, list[Reason]]:
        """Lexemes to split, with why (empty: the plan is equal to character-level matching)."""
        bnf, lexemes = self.bnf, self.bnf.lexemes
        start = self.closure(frozenset(bnf.starts[bnf.start]))
        seen = {start}
        todo = [start]
        guilty: dict[Lexeme, list[Reason]] = {}
        self.explored = 0
        while todo:
            self.explored += 1
            state = todo.pop()
            expected = bnf.expected(state)
            ids = list(expected)
            longs = [v for v in ids if lexemes[v].shape.multichar]
            for u in ids:
                shape = lexemes[u].shape
                rivals = [v for v in longs if v != u and intersects(shape.first, lexemes[v].shape.first)]
                if not rivals and not shape.ext:
                    continue   # nothing this lexeme could read on into
                follow = self._follow(expected[u])
                if not follow:
                    continue
                if intersects(shape.ext, follow):
                    guilty.setdefault(lexemes[u], []).append(Reason(None, shape.first, follow))
                for v in rivals:
                    key = (self.expr(u), self.expr(v), follow)
                    hit = self._extends.get(key)
                    if hit is None:
                        hit = self.langs.extends_into(key[0], key[1], follow)
                        self._extends[key] = hit
                    if hit:
                        guilty.setdefault(lexemes[v], []).append(Reason(key[0], shape.first, follow))
            for comp in _components(lexemes, ids) if len(ids) > 1 else [ids]:
                if len(comp) == 1:
                    sets: set[frozenset[int]] = {frozenset(comp)}
                elif not any(lexemes[i].shape.multichar for i in comp):
                    firsts = tuple(lexemes[i].shape.first for i in comp)
                    found_chars = self._char_sets.get(firsts)
                    if found_chars is None:
                        found_chars = _char_match_sets(list(firsts))
                        self._char_sets[firsts] = found_chars
                    sets = {frozenset(comp[j] for j in m) for m in found_chars}
                else:
                    found = self.langs.match_sets([self.expr(i) for i in comp])
                    if found is None:   # too many shared texts to tell: split the long ones
                        for i in comp:
                            if lexemes[i].shape.multichar:
                                guilty.setdefault(lexemes[i], []).append(Reason(None, (), ()))
                        continue
                    sets = {frozenset(comp[j] for j in m) for m in found}
                for m in sets:
                    nxt = self.closure(frozenset(i + 1 for x in m for i in expected[x]))
                    if nxt not in seen:
                        if len(seen) >= self.states_left:
                            raise OverBudget(f"more than {self.states_left} parse states")
                        seen.add(nxt)
                        todo.append(nxt)
        return guilty



def find_guilty(rules: dict[str, list[list[Sym]]], start: str, langs: Languages,
                states_left: int) -> tuple[dict[Lexeme, list[Reason]], int, int]:
    """(the lexemes to split with why, the lexemes of the plan, the parse states explored). Raises
    OverBudget past ``states_left`` states."""
    bnf = _Bnf(rules, start)
    explorer = _Explorer(bnf, langs, states_left)
    guilty = explorer.guilty()
    return guilty, len(bnf.lexemes), explorer.explored
