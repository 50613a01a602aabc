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

1. explores the lexeme-level grammar's parse states and finds the guilty lexemes
   (``lexeme_states.find_guilty``: U extends itself -> U; U's text read on into V -> V);
2. splits them: a run loses the element at the guilty edge (its first where another lexeme reads
   into it, its last where it reads into what follows), a literal becomes its characters, a regular
   rule / group / repetition the same structure at parser level (a new rule per split reference, so
   the other places keep their lexeme); the new pieces at that edge are checked against the same
   reasons at once. From round ``DEEP_AFTER`` on a guilty lexeme goes down to characters in one
   step. Characters never need splitting, so this ends at worst at one code point per lexeme, the
   conversion the differential test proved first.

Right-linear cycles of rules (a template's "until" rules: each alternative calls the next rule last)
are rewritten as left recursion, the same language (see ``_Builder._left_linear``).

Every answer taken under uncertainty is the one that splits more; over the work bounds the caller
converts one character per lexeme (``OverBudget``). The differential test
(``engine.grammar_equality``) measures the result against llama.cpp's grammar.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ..gbnf import Alternatives, Element, Grammar, Group, Literal, Repeat, RuleRef, Sequence, TokenRef
from .lexeme_lang import Languages, OverBudget, Shapes, intersects
from .lexeme_states import Lexeme, PGroup, PRef, PRepeat, Reason, Sym, find_guilty

__all__ = ["Lexeme", "LexemePlan", "OverBudget", "PGroup", "PRef", "PRepeat", "Sym", "UnfitGrammar", "nesting_depth",
           "plan_lexemes"]

MAX_ROUNDS = 64          # split rounds (each splits every lexeme found guilty)
MAX_STATES = 12_000      # parse states explored, all rounds together (~1-4k a second)
START = "<start>"        # the root when the whole grammar is one lexeme (no GBNF rule has this name)
DEEP_AFTER = 4           # from this round on a guilty lexeme is split down to characters at once


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


def plan_lexemes(grammar: Grammar, root: str = "root", budget: int = 2_000_000) -> LexemePlan:
    """The coarsest lexemes of ``grammar`` that keep llama.cpp's verdicts (see the module docstring).
    Raises OverBudget past the work bounds, UnfitGrammar for token references."""
    builder = _Builder(grammar, root)
    langs = Languages(grammar, budget)
    plan = LexemePlan(grammar, builder.start, builder.rules)
    for plan.rounds in range(1, MAX_ROUNDS + 1):
        guilty, lexemes, explored = find_guilty(builder.rules, builder.start, langs, MAX_STATES - plan.states)
        plan.states += explored
        if not guilty:
            plan.lexemes = lexemes
            plan.rules = builder.rules
            return plan
        split = builder.replace(guilty, langs, deep=plan.rounds > DEEP_AFTER)
        if split == 0:   # cannot happen (characters are never guilty); never loop on it
            raise OverBudget("a guilty lexeme cannot be split")
        plan.splits += split
    raise OverBudget(f"more than {MAX_ROUNDS} rounds of splitting")
