"""What a grammar may cost before llama.cpp sees it: size, nesting depth, alternatives, elements.

    check_grammar_limits(text, limits=None) -> Grammar     raises GrammarLimitError (a GbnfError)
    GrammarLimits(max_bytes=..., max_depth=..., max_alternatives=..., max_elements=...)
    set_default_limits(limits) / default_limits()          the process-wide default (``llamact serve`` sets it)

Why: llama.cpp's grammar code has no bounds. Its parser and its stack expansion recurse once per
nested group or rule, so a grammar nested 20,000 deep overflows the C stack (SIGSEGV, in
llama-server too); and the cost of applying a grammar to the candidates of one token is about the
number of parse stacks times the vocabulary, inside one native call that nothing can interrupt (a
``json_schema`` enum of 100,000 values held a slot for more than 14 minutes on one token). Every
grammar that reaches llama.cpp -- a request's ``grammar``, one converted from a ``json_schema`` or
``response_format``, a template's tool-call grammar, ``GenerationParams(grammar=...)`` -- passes this
check first (``native.sampler.Grammar.validate``), so no route or library call can skip it.

The limits, each named in the error so that the caller knows which one to raise:

* ``max_bytes``: the grammar's text, checked first (it bounds the parser's work).
* ``max_depth``: parentheses nested in the text, and the longest chain of rules and groups that
  one position enters (``a ::= b "x"``, ``b ::= c "y"``, ...): the depth of llama.cpp's recursion.
  ``max_rule_chain`` bounds the second apart (``SAME_AS_DEPTH``: ``max_depth`` does): the
  llguidance engine allows longer chains (a schema with 600 optional properties is a chain of 600
  rules) up to its own bound.
* ``max_alternatives``: the most parse stacks one position can open -- an alternation's sequences,
  with those of the rules and groups at its first positions counted through (an enum of N values is
  N). Measured on SmolLM2 (49k tokens, 2 cores): 250 values cost ~0.03 s a token, 1,000 ~0.2 s,
  2,000 ~0.6 s; the default keeps one token's native work well under a second there.
* ``max_elements``: the grammar after llama.cpp expands repetitions (``x{2000}`` is 2000 copies
  of x): its memory and its parser's time.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..errors import LlamaInferenceException
from .gbnf import (
    Alternatives,
    CharClass,
    GbnfError,
    Grammar,
    Group,
    Literal,
    Repeat,
    RuleRef,
    Sequence,
    max_paren_depth,
    parse_gbnf,
)

__all__ = ["GrammarLimitError", "GrammarLimits", "check_grammar_limits", "default_limits", "set_default_limits"]


DEFAULT_MAX_BYTES = 1 << 20
DEFAULT_MAX_DEPTH = 128
DEFAULT_MAX_ALTERNATIVES = 1024
DEFAULT_MAX_ELEMENTS = 1_000_000
SAME_AS_DEPTH = -1
_FLAGS = ("max_bytes", "max_depth", "max_alternatives", "max_elements")   # llamact serve --grammar-...


@dataclass(frozen=True)
class GrammarLimits:
    """Bounds on a grammar's cost (see the module docstring); ``None`` lifts a limit."""

    max_bytes: int | None = DEFAULT_MAX_BYTES
    max_depth: int | None = DEFAULT_MAX_DEPTH
    max_alternatives: int | None = DEFAULT_MAX_ALTERNATIVES
    max_elements: int | None = DEFAULT_MAX_ELEMENTS
    max_rule_chain: int | None = SAME_AS_DEPTH   # chains of rules entered at one position


class GrammarLimitError(GbnfError):
    """A grammar over one of the limits; ``limit`` names it (``max_bytes``, ...)."""

    def __init__(self, limit: str, value: int, maximum: int, what: str) -> None:
        flag = "--grammar-" + limit.replace("_", "-")
        remedy = f"`llamact serve {flag}`, or GrammarLimits in the library" if limit in _FLAGS \
            else "a bound of the llguidance grammar engine"
        LlamaInferenceException.__init__(
            self, f"the grammar is too costly: its {what} ({value}) is above the limit of {maximum} ({limit}: "
                  f"{remedy})",
            {"limit": limit, "value": value, "maximum": maximum})
        self.reason, self.line, self.column, self.context = self.message, None, None, ""
        self.limit = limit


_default = GrammarLimits()


def default_limits() -> GrammarLimits:
    return _default


def set_default_limits(limits: GrammarLimits) -> None:
    """The limits every grammar of this process is checked against unless a call gives its own."""
    global _default
    _default = limits
    _checked.cache_clear()


def _over(limit: str, value: int, maximum: int | None, what: str) -> None:
    if maximum is not None and value > maximum:
        raise GrammarLimitError(limit, value, maximum, what)


def check_grammar_limits(text: str, limits: GrammarLimits | None = None, *, root: str = "root") -> Grammar:
    """Parse ``text`` (GbnfError if it is not valid) and check it against ``limits`` (the process
    default when None); returns the parsed grammar. Repeated grammars (a server's tool sets) are
    checked once."""
    return _checked(text, limits or _default, root)


@functools.lru_cache(maxsize=64)
def _checked(text: str, limits: GrammarLimits, root: str) -> Grammar:
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:   # not text: llama.cpp takes UTF-8 bytes
        raise GbnfError(f"the grammar holds {text[exc.start]!r} at position {exc.start}, a lone surrogate that is "
                        "not Unicode text") from None
    _over("max_bytes", size, limits.max_bytes, "size in bytes")
    # before parsing: the parser recurses per group, as llama.cpp's does
    _over("max_depth", max_paren_depth(text), limits.max_depth, "nesting of parentheses")
    grammar = parse_gbnf(text, root)
    _Cost(grammar, limits).check()
    return grammar


class _Cost:
    """One pass over the rules in dependency order (no recursion across rules: a chain of 20,000
    rules is a loop here), measuring fan-out, entry depth and expanded size."""

    def __init__(self, grammar: Grammar, limits: GrammarLimits) -> None:
        self.rules = grammar.rules
        self.limits = limits
        self.nullable = _nullable_rules(grammar)
        self.fan: dict[str, int] = {}      # parse stacks the rule opens at its start
        self.depth: dict[str, int] = {}    # rules and groups entered from its start, itself included
        self.size: dict[str, int] = {}     # elements once repetitions are expanded

    def check(self) -> None:
        for name in self._order():
            fan, depth, size, widest = self._rule(self.rules[name])
            self.fan[name], self.depth[name], self.size[name] = fan, depth, size
            _over("max_alternatives", widest, self.limits.max_alternatives, "alternatives at one position")
            if self.limits.max_rule_chain == SAME_AS_DEPTH:
                _over("max_depth", depth, self.limits.max_depth, "chain of rules entered at one position")
            else:
                _over("max_rule_chain", depth, self.limits.max_rule_chain, "chain of rules entered at one position")
        total = sum(self.size.values())
        _over("max_elements", total, self.limits.max_elements, "elements after expanding repetitions")

    def _order(self) -> list[str]:
        """Rules with those referenced at their first positions before them (iterative DFS); a cycle
        there is left recursion, which llama.cpp refuses too (and its check recurses)."""
        order: list[str] = []
        state: dict[str, int] = {}   # 1: on the path, 2: done
        for start in self.rules:
            if start in state:
                continue
            stack = [(start, iter(self._leading_refs(self.rules[start])))]
            state[start] = 1
            while stack:
                name, refs = stack[-1]
                for ref in refs:
                    if state.get(ref) == 1:
                        raise GbnfError(f"left recursion: rule '{ref}' can reach itself without consuming input "
                                        f"(through '{name}')")
                    if ref not in state:
                        state[ref] = 1
                        stack.append((ref, iter(self._leading_refs(self.rules[ref]))))
                        break
                else:
                    stack.pop()
                    state[name] = 2
                    order.append(name)
            # every rule is reached from some start: the outer loop covers those not referenced
        return order

    def _leading_refs(self, alternatives: Alternatives) -> list[str]:
        out: list[str] = []
        for sequence in alternatives.sequences:
            self._leading_of_sequence(sequence.items, out)
        return out

    def _leading_of_sequence(self, items: tuple[object, ...], out: list[str]) -> None:
        for item in items:
            if not self._leading_of_item(item, out):
                return

    def _leading_of_item(self, item: object, out: list[str]) -> bool:
        """Append the rules referenced at ``item``'s start; True when ``item`` can match nothing."""
        if isinstance(item, RuleRef):
            out.append(item.name)
            return item.name in self.nullable
        if isinstance(item, Group):
            nullable = False
            for sequence in item.alternatives.sequences:
                self._leading_of_sequence(sequence.items, out)
                nullable = nullable or self._sequence_nullable(sequence)
            return nullable
        if isinstance(item, Repeat):
            if item.max == 0:
                return True
            # a repetition of something that can match nothing ((x? y?)+, upstream's own tool-call
            # grammars) is fine: llama.cpp's stack expansion is iterative with a seen-set at the pin
            inner = self._leading_of_item(item.item, out)
            return inner or item.min == 0
        return _item_nullable(item, self.nullable)

    def _sequence_nullable(self, sequence: Sequence) -> bool:
        return all(_item_nullable(item, self.nullable) for item in sequence.items)

    # -- measures of one rule, its references already measured (bounded recursion: groups nest at
    # most max_depth deep, checked on the text) --

    def _rule(self, alternatives: Alternatives) -> tuple[int, int, int, int]:
        """(fan-out at the start, entry depth, expanded size, widest fan-out at any position)."""
        fan, depth, size, widest = self._alternatives(alternatives)
        return fan, depth + 1, size, widest

    def _alternatives(self, alternatives: Alternatives) -> tuple[int, int, int, int]:
        fan = depth = size = widest = 0
        for sequence in alternatives.sequences:
            f, d, s, w = self._sequence(sequence.items)
            fan, depth, size, widest = fan + max(f, 1), max(depth, d), size + s, max(widest, w)
        return fan, depth, size, max(widest, fan)

    def _sequence(self, items: tuple[object, ...]) -> tuple[int, int, int, int]:
        """From the end: the fan-out of each suffix is its first item's, plus the rest's when the
        first can match nothing."""
        fan_rest = depth_rest = size = widest = 0
        for item in reversed(items):
            f, d, s, w, nullable = self._item(item)
            fan_rest = f + (fan_rest if nullable else 0)
            depth_rest = max(d, depth_rest if nullable else 0)
            size += s
            widest = max(widest, w, fan_rest)
        return fan_rest, depth_rest, size, widest

    def _item(self, item: object) -> tuple[int, int, int, int, bool]:
        """(fan-out, entry depth, expanded size, widest inside, can match nothing)."""
        if isinstance(item, RuleRef):
            return self.fan.get(item.name, 1), self.depth.get(item.name, 1), 1, 0, item.name in self.nullable
        if isinstance(item, Group):
            fan, depth, size, widest = self._alternatives(item.alternatives)
            nullable = any(self._sequence_nullable(s) for s in item.alternatives.sequences)
            return fan, depth + 1, size + 1, widest, nullable
        if isinstance(item, Repeat):
            fan, depth, size, widest, nullable = self._item(item.item)
            copies = max(item.min, 1) + (0 if item.max is None else max(0, item.max - item.min))
            extra_rules = 0 if item.max is not None and item.max == item.min else 1
            return fan + extra_rules, depth + extra_rules, size * copies, widest, nullable or item.min == 0
        if isinstance(item, Literal):
            return (1 if item.codepoints else 0), 0, max(1, len(item.codepoints)), 0, not item.codepoints
        if isinstance(item, CharClass):
            return (1 if item.ranges else 0), 0, 1 + len(item.ranges), 0, not item.ranges
        return 1, 0, 1, 0, False


def _item_nullable(item: object, nullable_rules: set[str]) -> bool:
    if isinstance(item, RuleRef):
        return item.name in nullable_rules
    if isinstance(item, Literal):
        return not item.codepoints
    if isinstance(item, CharClass):
        return not item.ranges
    if isinstance(item, Group):
        return any(all(_item_nullable(i, nullable_rules) for i in s.items) for s in item.alternatives.sequences)
    if isinstance(item, Repeat):
        return item.min == 0 or item.max == 0 or _item_nullable(item.item, nullable_rules)
    return False


def _nullable_rules(grammar: Grammar) -> set[str]:
    """Rules that can match the empty string: a worklist (a rule is looked at again only when one it
    references became nullable), so long chains of rules cost linear time and no recursion."""
    nullable: set[str] = set()
    users: dict[str, set[str]] = {}
    for name, alternatives in grammar.rules.items():
        for ref in _refs_in(alternatives):
            users.setdefault(ref, set()).add(name)
    pending = list(grammar.rules)
    while pending:
        name = pending.pop()
        if name in nullable:
            continue
        if any(all(_item_nullable(i, nullable) for i in s.items) for s in grammar.rules[name].sequences):
            nullable.add(name)
            pending.extend(users.get(name, ()))
    return nullable


def _refs_in(alternatives: Alternatives) -> set[str]:
    out: set[str] = set()
    todo: list[object] = [item for s in alternatives.sequences for item in s.items]
    while todo:
        item = todo.pop()
        if isinstance(item, RuleRef):
            out.add(item.name)
        elif isinstance(item, Group):
            todo.extend(i for s in item.alternatives.sequences for i in s.items)
        elif isinstance(item, Repeat):
            todo.append(item.item)
    return out
