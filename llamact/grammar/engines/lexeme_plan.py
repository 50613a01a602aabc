"""Where a GBNF grammar can be cut into whole lexemes without changing what it allows.

llama.cpp's grammar has no lexer: it matches code point by code point, every reading at once.
llguidance splits text into lexemes (regular expressions) with a greedy lexer -- at each lexeme
start it runs the union of the lexemes the parser allows there, and it ends a lexeme only when the
next byte cannot extend any of them -- and parses the lexemes with an Earley parser. Whole lexemes
are what makes it fast (an enum of 10,000 values is one automaton, not 100,000 parser symbols); the
greedy lexer is what can make it refuse text llama.cpp allows. It does so exactly when, at some
lexeme start, a lexeme U can match a non-empty text w, a character c may follow U there, and w+c
is a prefix of a word of a lexeme V allowed at the same start (V may be U): the lexer reads on into
V and never tries "U, then c". A template's free-text rule beside its trigger is the usual case:
``[<]`` ends a lexeme, ``|`` may follow, and ``<|`` is a prefix of the lexeme ``"<|tool_call|>"``.

``plan_lexemes(grammar, root)`` starts from the largest lexemes -- every maximal run of regular
elements (literals, classes, and references / groups / repetitions reaching no recursive rule) is
one -- and repeats until no such U, w, c, V exists:

1. builds the lexeme-level grammar and explores its parse states (an LR(0)-style subset construction
   over Earley items, a completed rule returning to every place that calls it: more states than any
   parse meets, never fewer), moving from a state by each set of lexemes that can match one same text
   (``Languages.match_sets``, as llguidance's lexer reports them);
2. in each state, for each allowed lexeme U and the characters that may follow it from that state:
   U extends itself (``Shape.ext``) -> U is split; U extends into another allowed V
   (``Languages.extends_into``) -> V is split;
3. splits: a run into its elements, a literal into its characters, a regular rule / group /
   repetition into the same structure at parser level (a new rule per split reference, so the other
   places keep their lexeme). Characters never need splitting, so this ends at worst at one code
   point per lexeme, the conversion the differential test proved first.

Every answer taken under uncertainty is the one that splits more; over the work bounds the caller
converts one character per lexeme (``OverBudget``). The differential test
(``engine.grammar_equality``) measures the result against llama.cpp's grammar.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ..gbnf import Alternatives, Element, Grammar, Group, Literal, Repeat, RuleRef, Sequence, TokenRef
from .lexeme_lang import Intervals, Languages, OverBudget, Shape, Shapes, intersects, union

__all__ = ["Lexeme", "LexemePlan", "OverBudget", "PGroup", "PRef", "PRepeat", "Sym", "UnfitGrammar", "nesting_depth",
           "plan_lexemes"]

MAX_ROUNDS = 64          # split rounds (each splits every lexeme found guilty)
MAX_STATES = 12_000      # parse states explored, all rounds together (~1-4k a second)
START = "<start>"        # the root when the whole grammar is one lexeme (no GBNF rule has this name)
DEEP_AFTER = 4           # from this round on a guilty lexeme is split down to characters at once
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


@dataclass
class LexemePlan:
    """The parser-level grammar: rule name -> alternatives of symbols; ``start`` is the root."""

    grammar: Grammar
    start: str
    rules: dict[str, list[list[Sym]]]
    rounds: int = 0
    splits: int = 0
    lexemes: int = 0
    states: int = 0           # parse states explored, all rounds
    notes: list[str] = field(default_factory=list)


class UnfitGrammar(Exception):
    """A grammar no lexeme plan applies to (it matches model tokens)."""


def _references(alts: Alternatives) -> tuple[set[str], bool]:
    """The rules ``alts`` refers to, and whether it matches model tokens."""
    names: set[str] = set()
    token = False
    stack: list[object] = [s for s in alts.sequences]
    while stack:
        x = stack.pop()
        if isinstance(x, Sequence):
            stack.extend(x.items)
        elif isinstance(x, Group):
            stack.extend(x.alternatives.sequences)
        elif isinstance(x, Repeat):
            stack.append(x.item)
        elif isinstance(x, RuleRef):
            names.add(x.name)
        elif isinstance(x, TokenRef):
            token = True
    return names, token


def _rule_components(refs: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of the rule graph (Tarjan's, iteratively), each after the
    components it refers to."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    counter = itertools.count()
    out: list[list[str]] = []
    for root in refs:
        if root in index:
            continue
        work = [(root, iter(sorted(refs[root])))]
        index[root] = low[root] = next(counter)
        stack.append(root)
        on_stack.add(root)
        while work:
            name, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = next(counter)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(refs[child]))))
                elif child in on_stack:
                    low[name] = min(low[name], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[name])
            if low[name] == index[name]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == name:
                        break
                out.append(component)
    return out


def _tail_only(grammar: Grammar, members: frozenset[str]) -> bool:
    """Whether ``members`` refer to one another only as the last element of an alternative."""
    for name in members:
        for seq in grammar.rules[name].sequences:
            for i, item in enumerate(seq.items):
                inner = _references(Alternatives((Sequence((item,)),)))[0]
                if inner & members and not (i == len(seq.items) - 1 and isinstance(item, RuleRef)):
                    return False
    return True


def _regular_rules(grammar: Grammar) -> tuple[set[str], list[str], dict[str, frozenset[str]]]:
    """Rules that reach neither a cycle nor a token reference (regular languages); every rule in an
    order where the rules one refers to come first (cycles aside); and the right-linear cycles
    (rules calling one another only last, a template's "until" rules): rule -> its cycle."""
    refs = {name: _references(alts) for name, alts in grammar.rules.items()}
    bad = {name for name, (_, token) in refs.items() if token}
    order: list[str] = []
    right_linear: dict[str, frozenset[str]] = {}
    for component in _rule_components({name: names for name, (names, _) in refs.items()}):
        order.extend(component)
        if len(component) > 1 or component[0] in refs[component[0]][0]:   # a cycle: not regular
            bad.update(component)
            members = frozenset(component)
            if _tail_only(grammar, members):
                right_linear.update(dict.fromkeys(members, members))
    changed = True
    while changed:   # a rule that reaches a non-regular rule is not regular
        changed = False
        for name, (names, _) in refs.items():
            if name not in bad and names & bad:
                bad.add(name)
                changed = True
    return set(grammar.rules) - bad, order, right_linear


def _group_depth(alts: Alternatives) -> int:
    depth = 0
    stack: list[tuple[object, int]] = [(s, 1) for s in alts.sequences]
    while stack:
        x, d = stack.pop()
        depth = max(depth, d)
        if isinstance(x, Sequence):
            stack.extend((i, d) for i in x.items)
        elif isinstance(x, Group):
            stack.extend((s, d + 1) for s in x.alternatives.sequences)
        elif isinstance(x, Repeat):
            stack.append((x.item, d + 1))
    return depth


def nesting_depth(grammar: Grammar) -> int:
    """The deepest a walk through the grammar's structure can go: rule references followed from rule
    to rule (every rule of a cycle counted, as a depth-first walk may enter them all) with the groups
    nested in each. llguidance's grammar compiler recurses that deep."""
    refs = {name: _references(alts)[0] for name, alts in grammar.rules.items()}
    depth: dict[str, int] = {}
    for component in _rule_components(refs):
        members = set(component)
        weight = sum(_group_depth(grammar.rules[name]) for name in component)
        below = max((depth[r] for name in component for r in refs[name] if r not in members), default=0)
        for name in component:
            depth[name] = weight + below
    return max(depth.values(), default=0)


class _Builder:
    def __init__(self, grammar: Grammar, root: str) -> None:
        self.grammar = grammar
        self.shapes = Shapes(grammar)
        self.regular, order, self.right_linear = _regular_rules(grammar)
        for name in order:   # the rules one refers to first: no recursion along a chain of rules
            if name in self.regular:
                self.shapes.rule(name)
        self.rules: dict[str, list[list[Sym]]] = {}
        self._counter = itertools.count(1)
        self._pending: list[tuple[str, str, bool]] = []   # (new rule, GBNF rule, down to characters)
        if root in self.regular:
            self.start = START
            self.rules[START] = [self.run((RuleRef(root),))]
        else:
            self.start = root
            self._rule(root, root, chars=False)
        self._build_pending()

    def is_regular(self, item: Element) -> bool:
        if isinstance(item, RuleRef):
            return item.name in self.regular
        if isinstance(item, Group):
            return all(self.is_regular(i) for s in item.alternatives.sequences for i in s.items)
        if isinstance(item, Repeat):
            return self.is_regular(item.item)
        return not isinstance(item, TokenRef)

    def run(self, items: tuple[Element, ...]) -> list[Sym]:
        """A run of regular elements as one lexeme ([] when it matches only the empty text)."""
        items = tuple(i for i in items if not (isinstance(i, Literal) and not i.codepoints))
        shape = self.shapes.run(items)
        return [Lexeme(items, shape)] if shape.nonempty else []

    def _rule(self, name: str, source: str, chars: bool) -> None:
        """Queue rule ``name``: GBNF rule ``source`` at parser level (``chars``: down to characters)."""
        if name not in self.rules:
            self.rules[name] = []
            self._pending.append((name, source, chars))

    def _build_pending(self) -> None:
        while self._pending:
            name, source, chars = self._pending.pop()
            if not chars and source in self.right_linear:
                self._left_linear(name, self.right_linear[source])
                continue
            sequences = self.grammar.rules[source].sequences
            self.rules[name] = [self.chars(s.items) if chars else self.syms(s.items) for s in sequences]

    def _left_linear(self, entry: str, members: frozenset[str]) -> None:
        """A right-linear cycle entered at ``entry`` as left recursion: ``entry<X`` is the text read
        from ``entry`` up to where rule X starts (X's alternative ``w Y`` gives ``entry<Y ::= entry<X w``),
        and ``entry`` is any ``entry<X`` followed by an alternative of X that calls no member. The
        same language; but an Earley parser (llguidance's) keeps one item per rule of a right
        recursion for every character read -- a mask over free text grew from 30 ms to 3 s in 50
        tokens -- and a constant number for a left recursion."""
        def at(x: str) -> str:
            return f"{entry}<{x}"

        for x in members:
            self.rules[at(x)] = [[]] if x == entry else []
        finals: list[list[Sym]] = []
        for x in sorted(members):
            for seq in self.grammar.rules[x].sequences:
                items = seq.items
                if items and isinstance(items[-1], RuleRef) and items[-1].name in members:
                    self.rules[at(items[-1].name)].append([PRef(at(x))] + self.syms(items[:-1]))
                else:
                    finals.append([PRef(at(x))] + self.syms(items))
        self.rules[entry] = finals

    def syms(self, items: tuple[Element, ...]) -> list[Sym]:
        out: list[Sym] = []
        run: list[Element] = []
        for item in items:
            if self.is_regular(item):
                run.append(item)
                continue
            out += self.run(tuple(run))
            run = []
            if isinstance(item, RuleRef):
                self._rule(item.name, item.name, chars=False)
                out.append(PRef(item.name))
            elif isinstance(item, Group):
                out.append(PGroup([self.syms(s.items) for s in item.alternatives.sequences]))
            elif isinstance(item, Repeat):
                inner = self.syms((item.item,))
                out.append(PRepeat(inner[0] if len(inner) == 1 else PGroup([inner]), item.min, item.max))
            else:
                raise UnfitGrammar("the grammar matches model tokens (<...> elements)")
        return out + self.run(tuple(run))

    def chars(self, items: tuple[Element, ...]) -> list[Sym]:
        """``items`` at parser level down to single characters (one rule copy per regular rule,
        shared by every place split this deep)."""
        out: list[Sym] = []
        for item in items:
            if isinstance(item, Literal):
                out += [s for cp in item.codepoints for s in self.run((Literal((cp,)),))]
            elif isinstance(item, RuleRef):
                self._rule(f"{item.name}~chars", item.name, chars=True)
                out.append(PRef(f"{item.name}~chars"))
            elif isinstance(item, Group):
                out.append(PGroup([self.chars(s.items) for s in item.alternatives.sequences]))
            elif isinstance(item, Repeat):
                inner = self.chars((item.item,))
                if item.max != 0 and inner:
                    out.append(PRepeat(inner[0] if len(inner) == 1 else PGroup([inner]), item.min, item.max))
            else:
                out += self.run((item,))
        return out

    def split(self, lex: Lexeme, deep: bool = False, edge: str = "both") -> Sym | None:
        """``lex`` one level finer, or (``deep``) down to single characters; None: it is one
        character already. A run loses one element at ``edge`` ("first": where another lexeme's
        text reads into it; "last": where it reads into what follows) or is cut into all of them."""
        items = lex.items
        if not lex.shape.multichar and not lex.shape.ext:
            return None
        if deep:
            out = PGroup([self.chars(items)])
            self._build_pending()
            return out
        if len(items) > 1:
            if edge == "first":
                return PGroup([self.run(items[:1]) + self.run(items[1:])])
            if edge == "last":
                return PGroup([self.run(items[:-1]) + self.run(items[-1:])])
            return PGroup([[s for item in items for s in self.run((item,))]])
        item = items[0]
        if isinstance(item, Literal):
            return PGroup([[s for cp in item.codepoints for s in self.run((Literal((cp,)),))]])
        if isinstance(item, RuleRef):
            name = f"{item.name}~{next(self._counter)}"
            self.rules[name] = [self.run(s.items) for s in self.grammar.rules[item.name].sequences]
            return PRef(name)
        if isinstance(item, Group):
            return PGroup([self.run(s.items) for s in item.alternatives.sequences])
        if isinstance(item, Repeat):
            inner = self.run((item.item,))
            return PRepeat(inner[0], item.min, item.max) if inner else PGroup([[]])
        return None

    def nullable(self, sym: Sym) -> bool:
        if isinstance(sym, Lexeme):
            return sym.shape.nullable
        if isinstance(sym, PRef):
            return any(all(self.nullable(s) for s in alt) for alt in self.rules[sym.name])
        if isinstance(sym, PGroup):
            return any(all(self.nullable(s) for s in alt) for alt in sym.alts)
        return sym.min == 0 or self.nullable(sym.sym)

    def edge_lexemes(self, sym: Sym, last: bool) -> list[Lexeme]:
        """The lexemes a split-made symbol can start with (``last``: end with). Split-made rules are
        copies of regular rules: never recursive."""
        if isinstance(sym, Lexeme):
            return [sym]
        if isinstance(sym, PRepeat):
            return self.edge_lexemes(sym.sym, last)
        alts = self.rules[sym.name] if isinstance(sym, PRef) else sym.alts
        out: list[Lexeme] = []
        for alt in alts:
            for s in reversed(alt) if last else alt:
                out += self.edge_lexemes(s, last)
                if not self.nullable(s):
                    break
        return out

    def replace(self, guilty: dict[Lexeme, list[Reason]], langs: Languages, deep: bool) -> int:
        """Split every lexeme in ``guilty``; the pieces at the split edge are checked again against
        the same reasons and split further while guilty (a literal read on into from free text goes
        down to characters in one round). Returns how many lexemes were split."""
        done = 0

        def finer(lex: Lexeme) -> Sym | None:
            nonlocal done
            reasons = guilty[lex]
            sides = {"both" if not r.follow else "last" if r.u is None else "first" for r in reasons}
            sym = self.split(lex, deep, sides.pop() if len(sides) == 1 else "both")
            if sym is None:
                return None
            done += 1
            for piece in self.edge_lexemes(sym, last=False):
                found = [r for r in reasons if r.u is not None and piece.shape.multichar
                         and intersects(r.u_first, piece.shape.first)
                         and langs.extends_into(r.u, langs.run(piece.items), r.follow)]
                if found:
                    guilty.setdefault(piece, []).extend(found)
            for piece in self.edge_lexemes(sym, last=True):
                found = [r for r in reasons if r.u is None and intersects(piece.shape.ext, r.follow)]
                if found:
                    guilty.setdefault(piece, []).extend(found)
            return sym

        def walk(seq: list[Sym]) -> list[Sym]:
            out: list[Sym] = []
            for sym in seq:
                while isinstance(sym, Lexeme) and sym in guilty:
                    smaller = finer(sym)
                    if smaller is None:
                        break
                    sym = smaller
                if isinstance(sym, PGroup):
                    sym.alts = [walk(a) for a in sym.alts]
                elif isinstance(sym, PRepeat):
                    sym.sym = walk([sym.sym])[0]
                out.append(sym)
            return out

        for name in list(self.rules):
            self.rules[name] = [walk(a) for a in self.rules[name]]
        return done


@dataclass(frozen=True)
class Reason:
    """Why a lexeme is split: U (a derivative expression; None: the lexeme extends itself) ends and
    a character of ``follow`` may come next."""

    u: int | None
    u_first: Intervals
    follow: Intervals


# -- the lexeme-level grammar as BNF, explored ----------------------------------------------------

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
                            raise OverBudget(f"more than {MAX_STATES} parse states")
                        seen.add(nxt)
                        todo.append(nxt)
        return guilty


def plan_lexemes(grammar: Grammar, root: str = "root", budget: int = 2_000_000) -> LexemePlan:
    """The coarsest lexemes of ``grammar`` that keep llama.cpp's verdicts (see the module docstring).
    Raises OverBudget past the work bounds, UnfitGrammar for token references."""
    builder = _Builder(grammar, root)
    langs = Languages(grammar, budget)
    plan = LexemePlan(grammar, builder.start, builder.rules)
    for plan.rounds in range(1, MAX_ROUNDS + 1):
        bnf = _Bnf(builder.rules, builder.start)
        explorer = _Explorer(bnf, langs, MAX_STATES - plan.states)
        guilty = explorer.guilty()
        plan.states += explorer.explored
        if not guilty:
            plan.lexemes = len(bnf.lexemes)
            plan.rules = builder.rules
            return plan
        split = builder.replace(guilty, langs, deep=plan.rounds > DEEP_AFTER)
        if split == 0:   # cannot happen (characters are never guilty); never loop on it
            raise OverBudget("a guilty lexeme cannot be split")
        plan.splits += split
    raise OverBudget(f"more than {MAX_ROUNDS} rounds of splitting")
