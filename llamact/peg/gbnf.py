"""GBNF from a PEG arena, byte-identical to upstream's ``common_peg_arena::build_grammar``.

:func:`arena_to_gbnf` takes an :class:`Arena` and ``lazy`` and returns the grammar text, as
upstream's ``build_grammar([&](builder) { arena.build_grammar(builder, lazy); })`` does: the rules
reachable from the root (lazy: from the ``trigger`` rules, with ``root ::=`` their sorted names
joined by `` | ``), each node mapped to GBNF, written through the JSON-schema converter's builder
(rule names sorted, the ``space`` rule always present). :func:`add_arena_rules` is the
``build_grammar(builder, lazy)`` step alone, for callers composing a larger grammar.

Raises :class:`PegArenaError` for a dangling parser id or rule name (upstream throws there too),
and the grammar builder's errors for a schema node whose schema cannot be converted.
"""

from __future__ import annotations

from collections.abc import Callable

from ..grammar import GrammarBuilder, build_grammar, gbnf_format_literal
from .aho_corasick import AhoCorasick
from .arena import Arena
from .nodes import (
    INVALID_PARSER_ID,
    Ac,
    And,
    Any_,
    Atomic,
    Chars,
    Choice,
    End,
    Epsilon,
    Gbnf,
    Literal,
    Not,
    Parser,
    Ref,
    Repetition,
    Rule,
    Schema,
    Sequence,
    Space,
    Start,
    String,
    Tag,
    Until,
)

_HEX = "0123456789ABCDEF"


def _escape_char_class(c: int) -> str:
    if c in (0x2D, 0x5D, 0x5B, 0x5C):  # - ] [ backslash
        return "\\" + chr(c)
    if c == 0x0A:
        return "\\n"
    if c == 0x09:
        return "\\t"
    if c == 0x0D:
        return "\\r"
    if 0x20 <= c <= 0x7E:
        return chr(c)
    if c <= 0xFF:
        return "\\x" + _HEX[(c >> 4) & 0xF] + _HEX[c & 0xF]
    if c <= 0xFFFF:
        return "\\u" + "".join(_HEX[(c >> s) & 0xF] for s in (12, 8, 4, 0))
    return "\\U" + "".join(_HEX[(c >> ((7 - i) * 4)) & 0xF] for i in range(8))


def _char_class(chars: list[int], negate: bool) -> str:
    return ("[^" if negate else "[") + "".join(_escape_char_class(c) for c in chars) + "]"


# (completing chars, {destination state: chars}, chars with a transition, state name) -> rule body
_StateRule = Callable[[list[int], dict[int, list[int]], list[int], Callable[[int], str]], str]


def _ac_grammar(builder: GrammarBuilder, prefix: str, strings: tuple[str, ...], build_rule: _StateRule) -> str:
    ac = AhoCorasick(strings)

    def state_name(s: int) -> str:
        if s == 0:
            return prefix
        num = str(s)
        return f"{prefix}-{'0' + num if len(num) == 1 else num}"

    for q in range(ac.num_states):
        if ac.is_terminal(q):
            continue
        buckets: dict[int, list[int]] = {}
        completing: list[int] = []
        specific: list[int] = []
        for c in ac.alphabet:
            d = ac.next(q, c)
            if ac.is_terminal(d):
                completing.append(c)
                specific.append(c)
            elif d != 0:
                buckets.setdefault(d, []).append(c)
                specific.append(c)
        builder.add_rule(state_name(q), build_rule(completing, dict(sorted(buckets.items())), specific, state_name))
    if ac.is_terminal(0):
        builder.add_rule(prefix, "|")
    return state_name(0)


def _excluding_rule(completing: list[int], buckets: dict[int, list[int]], specific: list[int],
                    state_name: Callable[[int], str]) -> str:
    rhs = "|"
    for d, chars in buckets.items():
        rhs += f" {_char_class(chars, False)} {state_name(d)} |"
    return rhs + f" {_char_class(specific, True)} {state_name(0)}"


def _including_rule(completing: list[int], buckets: dict[int, list[int]], specific: list[int],
                    state_name: Callable[[int], str]) -> str:
    alts = []
    if completing:
        alts.append(_char_class(completing, False))
    for d, chars in buckets.items():
        alts.append(f"{_char_class(chars, False)} {state_name(d)}")
    alts.append(f"{_char_class(specific, True)} {state_name(0)}")
    return " | ".join(alts)


def excluding_grammar(builder: GrammarBuilder, prefix: str, strings: tuple[str, ...]) -> str:
    """Rules matching text that contains none of ``strings``; returns the start rule's name."""
    return _ac_grammar(builder, prefix, strings, _excluding_rule)


def including_grammar(builder: GrammarBuilder, prefix: str, strings: tuple[str, ...]) -> str:
    """Rules matching text up to and including the first of ``strings``; returns the start rule's name."""
    return _ac_grammar(builder, prefix, strings, _including_rule)


def _quantified(body: str, min_count: int, max_count: int) -> str:
    if min_count == 0 and max_count == 1:
        return body + "?"
    if min_count == 0 and max_count == -1:
        return body + "*"
    if min_count == 1 and max_count == -1:
        return body + "+"
    if max_count == -1:
        return f"{body}{{{min_count},}}"
    if min_count == max_count:
        return body if min_count == 1 else f"{body}{{{min_count}}}"
    return f"{body}{{{min_count},{max_count}}}"


def collect_reachable_rules(arena: Arena, start: int) -> set[str]:
    """Names of the rules reachable from node ``start`` (through children, rules and refs)."""
    reachable: set[str] = set()
    stack = [start]
    while stack:
        p = arena.get(stack.pop())
        if isinstance(p, (Sequence, Choice)):
            stack.extend(reversed(p.children))
        elif isinstance(p, (Repetition, And, Not, Tag, Atomic, Gbnf, Ac, Schema)):
            stack.append(p.child)
        elif isinstance(p, Rule):
            if p.name not in reachable:
                reachable.add(p.name)
                stack.append(p.child)
        elif isinstance(p, Ref):
            stack.append(arena.get_rule(p.name))
    return reachable


class _Generator:
    def __init__(self, arena: Arena, builder: GrammarBuilder) -> None:
        self.arena = arena
        self.builder = builder

    @staticmethod
    def _schema_delegates(p: Schema) -> bool:
        return p.node is None or (p.raw and p.node.may_be_string())

    def effective(self, parser_id: int) -> Parser:
        """The node after unwrapping tags, atomics and delegating schema nodes."""
        while True:
            p = self.arena.get(parser_id)
            if isinstance(p, (Tag, Atomic)) or (isinstance(p, Schema) and self._schema_delegates(p)):
                parser_id = p.child
            else:
                return p

    def to_gbnf(self, parser_id: int) -> str:
        p = self.arena.get(parser_id)
        while isinstance(p, (Tag, Atomic)) or (isinstance(p, Schema) and self._schema_delegates(p)):
            parser_id = p.child
            p = self.arena.get(parser_id)
        if isinstance(p, (Epsilon, Start, End, And, Not)):
            return ""
        if isinstance(p, Literal):
            return gbnf_format_literal(p.literal)
        if isinstance(p, Sequence):
            s = ""
            for child in p.children:
                child_gbnf = self.to_gbnf(child)
                if not child_gbnf:
                    continue
                if s:
                    s += " "
                s += f"({child_gbnf})" if isinstance(self.effective(child), (Choice, Sequence)) else child_gbnf
            return s
        if isinstance(p, Choice):
            parts = []
            for child in p.children:
                child_gbnf = self.to_gbnf(child)
                parts.append(f"({child_gbnf})" if isinstance(self.effective(child), Choice) else child_gbnf)
            return " | ".join(parts)
        if isinstance(p, Repetition):
            child_gbnf = self.to_gbnf(p.child)
            if isinstance(self.effective(p.child), (Choice, Sequence)):
                child_gbnf = f"({child_gbnf})"
            return _quantified(child_gbnf, p.min_count, p.max_count)
        if isinstance(p, Any_):
            return "."
        if isinstance(p, Space):
            return "space"
        if isinstance(p, Chars):
            return _quantified(p.pattern, p.min_count, p.max_count)
        if isinstance(p, String):
            d = p.delimiter
            return f'( [^{d}\\\\] | "\\\\" ( [{d}\\\\/ bfnrt] | "u" [0-9a-fA-F]{{4}} ) )*'
        if isinstance(p, Until):
            if not p.delimiters:
                return ".*"
            return excluding_grammar(self.builder, f"until-{parser_id}", p.delimiters)
        if isinstance(p, Schema):
            return self.builder.add_schema(p.name, p.node)
        if isinstance(p, (Rule, Ref)):
            return p.name
        if isinstance(p, Gbnf):
            return p.grammar
        if isinstance(p, Ac):
            return including_grammar(self.builder, f"ac-{parser_id}", p.delimiters)
        raise TypeError(f"not a PEG parser node: {p!r}")


def add_arena_rules(arena: Arena, builder: GrammarBuilder, lazy: bool = False) -> None:
    """Upstream's ``common_peg_arena::build_grammar(builder, lazy)``: add the arena's rules to ``builder``."""
    gen = _Generator(arena, builder)
    reachable: set[str] = set()
    if lazy:
        for name, rule_id in arena.rules.items():
            rule = arena.get(rule_id)
            if isinstance(rule, Rule) and rule.trigger:
                reachable.add(name)
                reachable |= collect_reachable_rules(arena, rule_id)
    else:
        reachable = collect_reachable_rules(arena, arena.root)
    for name, rule_id in arena.rules.items():
        if name not in reachable:
            continue
        rule = arena.get(rule_id)
        if isinstance(rule, Rule):
            builder.add_rule(rule.name, gen.to_gbnf(rule.child))
    if lazy:
        triggers = []
        for rule_id in arena.rules.values():
            rule = arena.get(rule_id)
            if isinstance(rule, Rule) and rule.trigger:
                triggers.append(rule.name)
        builder.add_rule("root", " | ".join(sorted(triggers, key=lambda n: n.encode("utf-8", "surrogateescape"))))
    elif arena.root != INVALID_PARSER_ID:
        builder.add_rule("root", gen.to_gbnf(arena.root))


def arena_to_gbnf(arena: Arena, lazy: bool = False) -> str:
    """The whole grammar for ``arena`` (upstream's ``build_grammar`` around ``arena.build_grammar``)."""
    return build_grammar(lambda builder: add_arena_rules(arena, builder, lazy))
