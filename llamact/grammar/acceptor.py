"""Decide whether text is in a GBNF grammar's language, the way llama.cpp's grammar matcher does.

What enters: a :class:`~llamact.grammar.gbnf.Grammar` (from ``parse_gbnf``) and the name of its
start rule; then strings, read as Unicode code points (llama.cpp decodes UTF-8 to code points and
matches those).

What leaves: :meth:`GbnfAcceptor.accepts` (the whole string is a sentence of the grammar),
:meth:`GbnfAcceptor.is_viable_prefix` (some continuation of the string is one) and
:meth:`GbnfAcceptor.matched_length` (how many code points are read before no continuation exists).

What is raised: :class:`~llamact.grammar.gbnf.GbnfError` when the start rule is missing or the
grammar is left-recursive (llama.cpp's ``llama_grammar_init_impl`` refuses left recursion too).

How: upstream's pushdown simulation. The AST is lowered to upstream's flat rules, with repetitions
expanded exactly as ``llama_grammar_parser::parse_sequence`` does (``S{m,n}`` is m copies of S and
a chain of n-m optional rules; ``S{m,}`` a right-recursive rule; a bound above 2000 is unbounded),
so the language is upstream's. A parse state is a stack of positions in those rules; expanding rule
references until every stack shows a terminal is ``llama_grammar_advance_stack``, and reading one
code point is ``llama_grammar_accept``. The set of stacks is deduplicated at every step, which keeps
ambiguous grammars (e.g. ``"\\n"{1,2} [ \\t]{0,20}``) polynomial, and the closure of each stack is
cached (bounded) because the same stacks recur at every character of a string or number.

Left recursion: upstream's check only follows a rule reference past an earlier one that has an
empty alternative itself; a rule that is empty only through another rule escapes it, and llama.cpp
then loops forever building its stacks. This check computes nullability properly and rejects every
left-recursive grammar, the ones upstream catches included.

Token references (``<[id]>``, ``<text>``, ``!<...>``) match model tokens, never text: here they never
match, so a parse that must read a token next is dead.
"""

from __future__ import annotations

from collections.abc import Callable

from .gbnf import (
    MAX_REPETITION_THRESHOLD,
    Alternatives,
    AnyChar,
    CharClass,
    Element,
    GbnfError,
    Grammar,
    Group,
    Literal,
    Repeat,
    RuleRef,
    TokenRef,
)

__all__ = ["GbnfAcceptor"]

# element kinds of the flat rules (upstream's llama_gretype, reduced to what matching needs)
_END = 0  # end of an alternative (upstream's ALT and END)
_CHAR = 1  # a character set: literal char, class, or '.'
_REF = 2  # a rule reference
_TOKEN = 3  # a token reference: never matches text

_MAX_CODE_POINT = 0x10FFFF
_BLANKS = frozenset((9, 10, 13, 32))   # the whitespace JSON's grammar makes optional
_CACHE_LIMIT = 1 << 16

_Stack = tuple[int, ...]


class _CharSet:
    """One terminal: inclusive ranges (``any_char`` matches everything), possibly negated."""

    __slots__ = ("ranges", "negated", "ascii", "matchable")

    def __init__(self, ranges: tuple[tuple[int, int], ...], negated: bool) -> None:
        self.ranges = ranges
        self.negated = negated
        bits = 0
        for c in range(128):
            if self._match(c):
                bits |= 1 << c
        self.ascii = bits
        self.matchable = self._matchable()

    def _match(self, c: int) -> bool:
        for lo, hi in self.ranges:
            if lo <= c <= hi:
                return not self.negated
        return self.negated

    def match(self, c: int) -> bool:
        if c < 128:
            return bool(self.ascii >> c & 1)
        return self._match(c)

    def _matchable(self) -> bool:
        """Whether some code point in [0, U+10FFFF] matches (a negated class may cover them all)."""
        if not self.negated:
            return bool(self.ranges)
        nxt = 0
        for lo, hi in sorted(self.ranges):
            if lo > nxt:
                return True
            nxt = max(nxt, hi + 1)
        return nxt <= _MAX_CODE_POINT


class _Lowering:
    """AST -> upstream's rules: a list of alternatives, each a list of ``(kind, argument)``."""

    def __init__(self, grammar: Grammar) -> None:
        self.rule_ids = {name: i for i, name in enumerate(grammar.rules)}
        self.names: list[str] = list(grammar.rules)
        self.origin: list[str] = list(grammar.rules)  # the user rule each rule was written in
        self.rules: list[list[list[tuple[int, int]]]] = [[] for _ in grammar.rules]
        self.charsets: list[_CharSet] = []
        self._charset_ids: dict[tuple[tuple[tuple[int, int], ...], bool], int] = {}
        for name, alternatives in grammar.rules.items():
            self.rules[self.rule_ids[name]] = self.alternatives(alternatives, name)

    def charset(self, ranges: tuple[tuple[int, int], ...], negated: bool) -> tuple[int, int]:
        key = (ranges, negated)
        if key not in self._charset_ids:
            self._charset_ids[key] = len(self.charsets)
            self.charsets.append(_CharSet(ranges, negated))
        return _CHAR, self._charset_ids[key]

    def new_rule(self, base: str) -> int:
        self.rules.append([])
        self.names.append(f"{base}_{len(self.rules) - 1}")
        self.origin.append(base)
        return len(self.rules) - 1

    def alternatives(self, alternatives: Alternatives, base: str) -> list[list[tuple[int, int]]]:
        out = []
        for sequence in alternatives.sequences:
            elements: list[tuple[int, int]] = []
            for item in sequence.items:
                self.element(item, base, elements)
            out.append(elements)
        return out

    def element(self, item: Element, base: str, out: list[tuple[int, int]]) -> None:
        if isinstance(item, Literal):
            out.extend(self.charset(((cp, cp),), False) for cp in item.codepoints)
        elif isinstance(item, CharClass):
            if item.ranges:  # upstream emits nothing for [] and [^]: they match the empty string
                out.append(self.charset(item.ranges, item.negated))
        elif isinstance(item, AnyChar):
            out.append(self.charset(((0, 2**32 - 1),), False))
        elif isinstance(item, RuleRef):
            if item.name not in self.rule_ids:
                raise GbnfError(f"undefined rule '{item.name}' (referenced in rule '{base}')")
            out.append((_REF, self.rule_ids[item.name]))
        elif isinstance(item, TokenRef):
            out.append((_TOKEN, 0))
        elif isinstance(item, Group):
            rule_id = self.new_rule(base)
            self.rules[rule_id] = self.alternatives(item.alternatives, base)
            out.append((_REF, rule_id))
        elif isinstance(item, Repeat):
            self.repeat(item, base, out)
        else:
            raise GbnfError(f"not a GBNF element: {item!r}")

    def repeat(self, item: Repeat, base: str, out: list[tuple[int, int]]) -> None:
        """Upstream's handle_repetitions: S{m,n} -> S x m, then S'(n-m) with S'(k) ::= S S'(k-1) |."""
        if item.max == 0:
            # S{0} is dropped (a group's rule in it stays upstream, unreachable; parse_gbnf has
            # checked its references), so an undefined rule there is never looked at
            return
        prev: list[tuple[int, int]] = []
        self.element(item.item, base, prev)
        lo, hi = item.min, item.max
        no_max = hi is None or hi > MAX_REPETITION_THRESHOLD
        out.extend(prev * lo)
        last = -1
        for i in range(1 if no_max else (hi or 0) - lo):
            rule_id = self.new_rule(base)
            tail = [(_REF, rule_id)] if no_max else ([(_REF, last)] if i > 0 else [])
            self.rules[rule_id] = [prev + tail, []]
            last = rule_id
        if last >= 0:
            out.append((_REF, last))


def _left_recursive_rule(rules: list[list[list[tuple[int, int]]]]) -> int | None:
    """A rule on a cycle of leftmost references (through nullable prefixes), or None."""
    nullable = [False] * len(rules)
    changed = True
    while changed:
        changed = False
        for r, alternatives in enumerate(rules):
            if not nullable[r] and any(all(k == _REF and nullable[a] for k, a in alt) for alt in alternatives):
                nullable[r] = changed = True
    edges: list[list[int]] = []
    for alternatives in rules:
        targets: list[int] = []
        for alt in alternatives:
            for kind, arg in alt:
                if kind != _REF:
                    break
                targets.append(arg)
                if not nullable[arg]:
                    break
        edges.append(targets)
    state = [0] * len(rules)  # 0 new, 1 on the path, 2 done
    for start in range(len(rules)):
        if state[start]:
            continue
        path = [(start, iter(edges[start]))]
        state[start] = 1
        while path:
            node, it = path[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                path.pop()
            elif state[nxt] == 1:
                return nxt
            elif state[nxt] == 0:
                state[nxt] = 1
                path.append((nxt, iter(edges[nxt])))
    return None


class GbnfAcceptor:
    """Membership and viable-prefix tests for one grammar and start rule. Reusable; not
    thread-safe (it caches stack closures)."""

    def __init__(self, grammar: Grammar, root: str = "root") -> None:
        if root not in grammar.rules:
            raise GbnfError(f"the grammar has no '{root}' rule (the start rule)")
        lowering = _Lowering(grammar)
        bad = _left_recursive_rule(lowering.rules)
        if bad is not None:
            where = lowering.names[bad]
            if lowering.origin[bad] != where:
                where = f"{where}' (a group or repetition in rule '{lowering.origin[bad]}')"
            else:
                where += "'"
            raise GbnfError(f"unsupported grammar: left recursion detected for rule '{where}")
        self.root = root
        self._charsets = lowering.charsets
        # flat layout, as upstream's: each alternative's elements followed by an _END marker
        kinds: list[int] = []
        args: list[int] = []
        starts: list[tuple[int, ...]] = []
        for alternatives in lowering.rules:
            alt_starts = []
            for alt in alternatives:
                alt_starts.append(len(kinds))
                for kind, arg in alt:
                    kinds.append(kind)
                    args.append(arg)
                kinds.append(_END)
                args.append(0)
            starts.append(tuple(alt_starts))
        self._kinds = kinds
        self._args = args
        self._starts = starts
        self._closures: dict[_Stack, tuple[_Stack, ...]] = {}
        initial: dict[_Stack, None] = {}
        for pos in starts[lowering.rule_ids[root]]:
            for stack in self._advance(() if kinds[pos] == _END else (pos,)):
                initial[stack] = None
        self._initial = tuple(initial)

    @property
    def n_rules(self) -> int:
        """Rules after lowering (groups and repetitions included)."""
        return len(self._starts)

    def _advance(self, stack: _Stack) -> tuple[_Stack, ...]:
        """``llama_grammar_advance_stack``: expand references until each stack shows a terminal
        (or is empty, i.e. the start rule is complete)."""
        cached = self._closures.get(stack)
        if cached is not None:
            return cached
        kinds, args, starts = self._kinds, self._args, self._starts
        todo = [stack]
        seen: set[_Stack] = set()
        out: dict[_Stack, None] = {}
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            if not current or kinds[current[-1]] != _REF:
                out[current] = None
                continue
            pos = current[-1]
            below = current[:-1] if kinds[pos + 1] == _END else current[:-1] + (pos + 1,)
            for start in starts[args[pos]]:
                todo.append(below if kinds[start] == _END else below + (start,))
        result = tuple(out)
        if len(self._closures) >= _CACHE_LIMIT:
            self._closures.clear()
        self._closures[stack] = result
        return result

    def _step(self, stacks: tuple[_Stack, ...], c: int) -> tuple[_Stack, ...]:
        """``llama_grammar_accept``: the stacks after reading code point ``c``."""
        kinds, args, charsets = self._kinds, self._args, self._charsets
        out: dict[_Stack, None] = {}
        for stack in stacks:
            if not stack:
                continue
            pos = stack[-1]
            if kinds[pos] != _CHAR or not charsets[args[pos]].match(c):
                continue
            below = stack[:-1] if kinds[pos + 1] == _END else stack[:-1] + (pos + 1,)
            for nxt in self._advance(below):
                out[nxt] = None
        return tuple(out)

    def _run(self, text: str) -> tuple[tuple[_Stack, ...], int]:
        stacks = self._initial
        for i, ch in enumerate(text):
            stacks = self._step(stacks, ord(ch))
            if not stacks:
                return stacks, i
        return stacks, len(text)

    def _live(self, stacks: tuple[_Stack, ...]) -> bool:
        kinds, args, charsets = self._kinds, self._args, self._charsets
        return any(not s or (kinds[s[-1]] == _CHAR and charsets[args[s[-1]]].matchable) for s in stacks)

    def accepts(self, text: str) -> bool:
        """Whether ``text`` as a whole is a sentence of the grammar."""
        stacks, _ = self._run(text)
        return any(not s for s in stacks)

    def is_viable_prefix(self, text: str) -> bool:
        """Whether some (possibly empty) continuation makes ``text`` a sentence."""
        stacks, n = self._run(text)
        return n == len(text) and self._live(stacks)

    def matched_length(self, text: str) -> int:
        """How many code points of ``text`` can be read while a continuation still exists."""
        stacks = self._initial
        for i, ch in enumerate(text):
            stacks = self._step(stacks, ord(ch))
            if not self._live(stacks):
                return i
        return len(text)

    def sentence_prefixes(self, text: str) -> list[int]:
        """The lengths (in code points, ascending) of the prefixes of ``text`` that are sentences of
        the grammar: where a generation under it may stop."""
        stacks = self._initial
        ends = [0] if any(not s for s in stacks) else []
        for i, ch in enumerate(text):
            stacks = self._step(stacks, ord(ch))
            if not stacks:
                break
            if any(not s for s in stacks):
                ends.append(i + 1)
        return ends

    # -- incremental use (speculative grammar drafts) ----------------------------------------------

    def initial_state(self) -> tuple[_Stack, ...]:
        """The parse state before any text (pass it to ``advance`` and ``forced_text``)."""
        return self._initial

    def advance(self, state: tuple[_Stack, ...], text: str) -> tuple[_Stack, ...]:
        """The state after reading ``text`` from ``state``; empty when no continuation exists."""
        for ch in text:
            if not state:
                break
            state = self._step(state, ord(ch))
        return state

    def forced_text(self, state: tuple[_Stack, ...], limit: int,
                    space: Callable[[str], str | None] | None = None) -> tuple[str, bool]:
        """The text every continuation of ``state`` begins with (at most ``limit`` code points), and
        whether the grammar must end right after it. The text stops where the grammar may end, where
        two characters are possible, or where a model token (not text) comes next.

        ``space`` (a guess, for drafts): where the only choice is optional whitespace before one
        character (JSON's ``space`` rule), ``space(previous_character)`` says which whitespace to
        assume ("" for none, None: no guess, the text ends there); the walk goes on through it when
        the grammar allows it."""
        kinds, args, charsets = self._kinds, self._args, self._charsets
        out: list[str] = []
        while state and len(out) < limit:
            singles: set[int] = set()   # characters possible next, from one-character sets
            blank_sets = False          # a set of several whitespace characters is possible next
            for stack in state:
                if not stack:   # the grammar may end here; it must when no other continuation exists
                    return "".join(out), bool(out) and all(not s for s in state)
                if kinds[stack[-1]] != _CHAR:
                    return "".join(out), False
                charset = charsets[args[stack[-1]]]
                ranges = charset.ranges
                if charset.negated or not ranges:
                    return "".join(out), False
                if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
                    singles.add(ranges[0][0])
                elif all(hi - lo < 8 and set(range(lo, hi + 1)) <= _BLANKS for lo, hi in ranges):
                    blank_sets = True
                else:
                    return "".join(out), False
            if len(singles) == 1 and not blank_sets:
                forced = singles.pop()
            else:
                others = singles - _BLANKS
                if space is None or len(others) > 1:
                    return "".join(out), False
                guess = space(out[-1] if out else "")
                if guess is None:
                    return "".join(out), False
                walked = state
                for ch in guess:
                    walked = self._step(walked, ord(ch)) if walked else walked
                if guess and walked and len(out) + len(guess) <= limit:
                    out.extend(guess)
                    state = walked
                    continue
                if not others:
                    return "".join(out), False
                forced = others.pop()
            out.append(chr(forced))
            state = self._step(state, forced)
        return "".join(out), bool(out) and all(not stack for stack in state)
