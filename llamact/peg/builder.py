"""Building parser arenas in code: upstream's ``common_peg_parser_builder`` (common/peg-parser.cpp).

:class:`ParserBuilder` allocates nodes into an arena and hands back :class:`P` handles, which
combine with operators as upstream's ``common_peg_parser`` does: ``a + b`` (sequence), ``a | b``
(choice), ``a << b`` (sequence with :meth:`ParserBuilder.space` between), a ``str`` on either side
becoming a literal. ``a += b`` / ``a |= b`` rebind ``a`` to the new node and leave other handles
to the old one alone (upstream's handles are values). :meth:`ParserBuilder.build` resolves the
refs and returns the frozen :class:`Arena`; :func:`build_peg_parser` is the one-call form.

Node ids show up in GBNF rule names and in the arena JSON, so every node is allocated in the
order upstream's GCC build allocates it. GCC evaluates the right operand of an overloaded ``+`` /
``|`` before the left one; :meth:`ParserBuilder.seq_rtl` builds a ``+`` chain that way (Python
would go left to right). Builder misuse raises :class:`PegArenaError` with upstream's message;
an unusable JSON schema raises the grammar layer's ``SchemaError``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from ..grammar.schema import SchemaDocument, SchemaNode, schema_from_json
from .arena import Arena
from .nodes import (
    INVALID_PARSER_ID,
    Ac,
    And,
    Any_,
    Atomic,
    CharRange,
    Chars,
    Choice,
    End,
    Epsilon,
    Gbnf,
    Literal,
    Not,
    Parser,
    PegArenaError,
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

__all__ = ["P", "ParserBuilder", "ParserLike", "build_peg_parser", "parse_char_classes", "rule_name"]


class P:
    """A handle on one node of a builder's arena (upstream's ``common_peg_parser``): its ``id``
    and its ``builder``. Handles are values: operators return new handles and never change one."""

    __slots__ = ("id", "builder")

    def __init__(self, parser_id: int, builder: ParserBuilder) -> None:
        self.id = parser_id
        self.builder = builder

    def __repr__(self) -> str:
        return f"P({self.id})"

    def __int__(self) -> int:
        return self.id

    # upstream's handle converts to its id, so handles (and ids) compare by id
    def __eq__(self, other: object) -> bool:
        if isinstance(other, P):
            return self.id == other.id and self.builder is other.builder
        if isinstance(other, int) and not isinstance(other, bool):
            return self.id == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.id)

    def _other(self, other: P | str) -> P:
        return self.builder.literal(other) if isinstance(other, str) else other

    def __add__(self, other: P | str) -> P:
        if not isinstance(other, (P, str)):
            return NotImplemented
        return self.builder.sequence([self, self._other(other)])

    def __radd__(self, other: str) -> P:
        if not isinstance(other, str):
            return NotImplemented
        return self.builder.sequence([self.builder.literal(other), self])

    def __or__(self, other: P | str) -> P:
        if not isinstance(other, (P, str)):
            return NotImplemented
        return self.builder.choice([self, self._other(other)])

    def __ror__(self, other: str) -> P:
        if not isinstance(other, str):
            return NotImplemented
        return self.builder.choice([self.builder.literal(other), self])

    def __lshift__(self, other: P | str) -> P:
        if not isinstance(other, (P, str)):
            return NotImplemented
        rhs = self._other(other)
        return self.builder.sequence([self, self.builder.space(), rhs])

    def __rlshift__(self, other: str) -> P:
        if not isinstance(other, str):
            return NotImplemented
        return self.builder.literal(other) << self

    # ``a += b`` must not change other handles on a's node (C++ copies), so these return new handles
    def __iadd__(self, other: P | str) -> P:
        return self.__add__(other)

    def __ior__(self, other: P | str) -> P:
        return self.__or__(other)


ParserLike = P | int
#: an operand of :meth:`ParserBuilder.seq_rtl`: a handle, a string (``p + "x"``), or a thunk
Operand = P | str | Callable[[], P]

_INVALID_RULE_CHARS = re.compile(r"[^a-zA-Z0-9-]+")


def rule_name(name: str) -> str:
    """Upstream's rule name sanitising: every run of characters outside ``[a-zA-Z0-9-]`` becomes ``-``."""
    return _INVALID_RULE_CHARS.sub("-", name)


def _hex_escape(data: bytes, pos: int, count: int) -> int | None:
    if pos + count > len(data):
        return None
    digits = data[pos:pos + count]
    if not all(chr(c) in "0123456789abcdefABCDEF" for c in digits):
        return None
    return int(digits, 16)


def _class_char(data: bytes, pos: int) -> tuple[int, int]:
    """(code point, bytes used) of one character of a class body, escapes decoded."""
    if data[pos] == 0x5C and pos + 1 < len(data):
        esc = data[pos + 1]
        widths = {0x78: 2, 0x75: 4, 0x55: 8}  # x u U
        if esc in widths:
            value = _hex_escape(data, pos + 2, widths[esc])
            return (esc, 2) if value is None else (value, 2 + widths[esc])
        simple = {0x6E: 0x0A, 0x74: 0x09, 0x72: 0x0D}
        if esc in simple:
            return simple[esc], 2
        # upstream widens a signed char: a UTF-8 byte after a backslash sign-extends
        return (esc if esc < 0x80 else esc | 0xFFFFFF00), 2
    return data[pos], 1


def parse_char_classes(classes: str) -> tuple[tuple[CharRange, ...], bool]:
    """Upstream's ``parse_char_classes``: the ranges of ``[...]`` (byte-wise, as upstream) and whether negated."""
    content = classes.encode("utf-8", "surrogateescape")
    if content[:1] == b"[":
        content = content[1:]
    if content[-1:] == b"]":
        content = content[:-1]
    negated = content[:1] == b"^"
    if negated:
        content = content[1:]
    ranges: list[CharRange] = []
    i = 0
    while i < len(content):
        start, used = _class_char(content, i)
        i += used
        if i + 1 < len(content) and content[i] == 0x2D:  # '-' with something after it: a range
            end, end_used = _class_char(content, i + 1)
            ranges.append(CharRange(start, end))
            i += 1 + end_used
        else:
            ranges.append(CharRange(start, start))
    return tuple(ranges), negated


def _resolved_children(p: Parser, resolve: Callable[[int], int]) -> Parser:
    if isinstance(p, (Sequence, Choice)):
        return replace(p, children=tuple(resolve(c) for c in p.children))
    if isinstance(p, (Repetition, And, Not, Tag, Atomic, Gbnf, Ac, Rule, Schema)):
        return replace(p, child=resolve(p.child))
    return p


class ParserBuilder:
    """Upstream's ``common_peg_parser_builder``: methods that add nodes and return :class:`P` handles."""

    def __init__(self) -> None:
        self._parsers: list[Parser] = []
        self._rules: dict[str, int] = {}
        self._root = INVALID_PARSER_ID

    # -- the arena -------------------------------------------------------------------------------

    def add(self, node: Parser) -> P:
        """Append ``node`` to the arena; its handle."""
        self._parsers.append(node)
        return P(len(self._parsers) - 1, self)

    def get(self, p: ParserLike) -> Parser:
        """The node behind a handle or id; raises PegArenaError for an id outside the arena."""
        parser_id = int(p)
        if not 0 <= parser_id < len(self._parsers):
            raise PegArenaError(f"parser id {parser_id} is out of range (the arena has {len(self._parsers)} parsers)",
                                {"id": parser_id})
        return self._parsers[parser_id]

    def has_rule(self, name: str) -> bool:
        return name in self._rules

    def __len__(self) -> int:
        return len(self._parsers)

    def wrap(self, parser_id: int) -> P:
        return P(parser_id, self)

    # -- primitives ------------------------------------------------------------------------------

    def eps(self) -> P:
        return self.add(Epsilon())

    def start(self) -> P:
        return self.add(Start())

    def end(self) -> P:
        return self.add(End())

    def literal(self, literal: str) -> P:
        return self.add(Literal(literal))

    def _flattened(self, parsers: Iterable[ParserLike], kind: type[Sequence] | type[Choice]) -> tuple[int, ...]:
        out: list[int] = []
        for p in parsers:
            node = self.get(p)
            if isinstance(node, kind):
                out.extend(node.children)
            else:
                out.append(int(p))
        return tuple(out)

    def sequence(self, parsers: Iterable[ParserLike] = ()) -> P:
        """All of ``parsers`` in order; a child that is itself a sequence is spliced in."""
        return self.add(Sequence(self._flattened(parsers, Sequence)))

    def choice(self, parsers: Iterable[ParserLike] = ()) -> P:
        """The first of ``parsers`` that matches; a child that is itself a choice is spliced in."""
        return self.add(Choice(self._flattened(parsers, Choice)))

    def seq_rtl(self, *parts: Operand) -> P:
        """``parts[0] + parts[1] + ...`` evaluated as upstream's GCC build evaluates such a chain.

        GCC evaluates the right operand of an overloaded ``+`` first, so the handles and thunks
        are evaluated right to left; the sequences are then made left to right, a ``str`` part
        becoming its literal just before the sequence that takes it (inside the operator).
        """
        return self._chain_rtl(parts, lambda a, b: a + b)

    def alt_rtl(self, *parts: Operand) -> P:
        """``parts[0] | parts[1] | ...`` evaluated as GCC evaluates it (see :meth:`seq_rtl`)."""
        return self._chain_rtl(parts, lambda a, b: a | b)

    def _chain_rtl(self, parts: tuple[Operand, ...], combine: Callable[[Any, Any], P]) -> P:
        if not parts or all(isinstance(part, str) for part in parts[:2]):
            raise PegArenaError("an operator chain needs a parser among its first two operands")
        values: list[P | None] = [None] * len(parts)
        for k in range(len(parts) - 1, -1, -1):
            part = parts[k]
            if not isinstance(part, str):
                values[k] = part if isinstance(part, P) else part()
        first = values[0]
        for k in range(1, len(parts)):
            part, value = parts[k], values[k]
            if first is None:  # "s" + p: the free operator makes the literal after p
                assert value is not None
                first = combine(str(parts[0]), value)
            elif isinstance(part, str):
                first = combine(first, part)
            else:
                assert value is not None
                first = combine(first, value)
        assert first is not None
        return first

    def _lit(self, text: str) -> Callable[[], P]:
        """A ``literal(text)`` operand of a :meth:`seq_rtl` chain, made when the chain evaluates it."""
        return lambda: self.literal(text)

    def repeat(self, p: ParserLike, min_count: int, max_count: int | None = None) -> P:
        """``p`` ``min_count`` to ``max_count`` times (-1: unbounded; omitted: exactly ``min_count``)."""
        return self.add(Repetition(int(p), min_count, min_count if max_count is None else max_count))

    def one_or_more(self, p: ParserLike) -> P:
        return self.repeat(p, 1, -1)

    def zero_or_more(self, p: ParserLike) -> P:
        return self.repeat(p, 0, -1)

    def optional(self, p: ParserLike) -> P:
        return self.repeat(p, 0, 1)

    def peek(self, p: ParserLike) -> P:
        """Positive lookahead."""
        return self.add(And(int(p)))

    def negate(self, p: ParserLike) -> P:
        """Negative lookahead."""
        return self.add(Not(int(p)))

    def any(self) -> P:
        return self.add(Any_())

    def chars(self, classes: str, min: int = 1, max: int = -1) -> P:
        """A character class such as ``[a-z]`` or ``[^"\\\\]``, repeated ``min`` to ``max`` times."""
        ranges, negated = parse_char_classes(classes)
        return self.add(Chars(classes, ranges, negated, min, max))

    def ref(self, name: str) -> P:
        """A reference to the rule ``name`` (resolved by :meth:`build`)."""
        return self.add(Ref(name))

    def space(self) -> P:
        return self.add(Space())

    def until(self, delimiter: str) -> P:
        return self.add(Until((delimiter,)))

    def until_one_of(self, delimiters: Iterable[str]) -> P:
        return self.add(Until(tuple(delimiters)))

    def rest(self) -> P:
        return self.until_one_of(())

    def string_content(self, delimiter: str) -> P:
        """JSON-escaped string content up to ``delimiter`` (one character), the quotes excluded."""
        if len(delimiter) != 1:
            raise PegArenaError("string_content needs a one-character delimiter", {"delimiter": delimiter})
        return self.add(String(delimiter))

    # -- wrappers --------------------------------------------------------------------------------

    def schema(self, p: ParserLike, name: str, json_schema: Any, raw: bool = False) -> P:
        """``p`` whose GBNF comes from a JSON schema (a JSON value, a SchemaDocument or one of its nodes).

        ``raw``: a schema that may be a string lets ``p`` (a raw string) through instead.
        Raises ``SchemaError`` for a schema outside the supported subset.
        """
        if isinstance(json_schema, SchemaDocument):
            node: SchemaNode = json_schema.root
        elif isinstance(json_schema, SchemaNode):
            node = json_schema
        else:
            node = schema_from_json(json_schema).root
        return self.add(Schema(int(p), name, raw, node))

    def rule(self, name: str, p: ParserLike | Callable[[], P], trigger: bool = False) -> P:
        """A named rule (name sanitised by :func:`rule_name`); returns a ref to it.

        With a callable, the rule is defined once: an existing rule of that name is just
        referenced, and a placeholder rule lets the callable refer to the rule recursively.
        """
        clean = rule_name(name)
        if isinstance(p, (P, int)):
            self._rules[clean] = self.add(Rule(clean, int(p), trigger)).id
            return self.ref(clean)
        if clean in self._rules:
            return self.ref(clean)
        placeholder = self.any()
        self._rules[clean] = self.add(Rule(clean, placeholder.id, trigger)).id
        body = p()
        self._rules[clean] = self.add(Rule(clean, body.id, trigger)).id
        return self.ref(clean)

    def trigger_rule(self, name: str, p: ParserLike | Callable[[], P]) -> P:
        """A rule that starts a lazy grammar."""
        return self.rule(name, p, True)

    def atomic(self, p: ParserLike) -> P:
        return self.add(Atomic(int(p)))

    def tag(self, tag: str, p: ParserLike) -> P:
        return self.add(Tag(int(p), tag))

    def gbnf(self, p: ParserLike, grammar: str) -> P:
        """``p`` when parsing; the verbatim ``grammar`` in GBNF."""
        return self.add(Gbnf(int(p), grammar))

    def ac(self, p: ParserLike, delimiters: str | Iterable[str]) -> P:
        """``p`` when parsing; in GBNF, everything up to and including the first of ``delimiters``."""
        delims = (delimiters,) if isinstance(delimiters, str) else tuple(delimiters)
        if not delims:
            raise PegArenaError("ac parser requires at least one delimiter")
        return self.add(Ac(int(p), delims))

    # -- strings, JSON and Python values ---------------------------------------------------------

    def double_quoted_string(self) -> P:
        return self.rule("double-quoted-string",
                         lambda: self.sequence([self.literal('"'), self.string_content('"'), self.literal('"')]))

    def single_quoted_string(self) -> P:
        return self.rule("single-quoted-string",
                         lambda: self.sequence([self.literal("'"), self.string_content("'"), self.literal("'")]))

    def quoted_string(self) -> P:
        return self.rule("quoted-string", lambda: self.choice([self.double_quoted_string(),
                                                               self.single_quoted_string()]))

    def json_number(self) -> P:
        def body() -> P:
            digit1_9 = self.chars("[1-9]", 1, 1)
            digits = self.chars("[0-9]")
            int_part = self.choice([self.literal("0"), self.sequence([digit1_9, self.chars("[0-9]", 0, -1)])])
            frac = self.sequence([self.literal("."), digits])
            exp = self.sequence([self.choice([self.literal("e"), self.literal("E")]),
                                 self.optional(self.chars("[+-]", 1, 1)), digits])
            # a number is only complete when nothing that could extend it follows
            not_number_continuation = self.negate(self.chars("[0-9.eE+-]", 1, 1))
            return self.sequence([self.optional(self.literal("-")), int_part, self.optional(frac),
                                  self.optional(exp), not_number_continuation])

        return self.rule("json-number", body)

    def json_string(self) -> P:
        return self.rule("json-string",
                         lambda: self.sequence([self.literal('"'), self.string_content('"'), self.literal('"')]))

    def json_bool(self) -> P:
        return self.rule("json-bool", lambda: self.choice([self.literal("true"), self.literal("false")]))

    def json_null(self) -> P:
        return self.rule("json-null", lambda: self.literal("null"))

    def _container(self, open_: str, close: str, elements: P, ws: P, trailing_ws: bool) -> P:
        parts = [self.literal(open_), ws, self.choice([self.literal(close),
                                                       self.sequence([elements, ws, self.literal(close)])])]
        return self.sequence(parts + [ws] if trailing_ws else parts)

    def json_object(self) -> P:
        def body() -> P:
            ws = self.space()
            member = self.sequence([self.json_string(), ws, self.literal(":"), ws, self.json()])
            members = self.sequence([member, self.zero_or_more(self.sequence([ws, self.literal(","), ws, member]))])
            return self._container("{", "}", members, ws, False)

        return self.rule("json-object", body)

    def json_array(self) -> P:
        def body() -> P:
            ws = self.space()
            elements = self.sequence([self.json(), self.zero_or_more(self.sequence([ws, self.literal(","), ws,
                                                                                    self.json()]))])
            return self._container("[", "]", elements, ws, False)

        return self.rule("json-array", body)

    def json(self) -> P:
        """Any JSON value."""
        return self.rule("json-value", lambda: self.choice([self.json_object(), self.json_array(), self.json_string(),
                                                            self.json_number(), self.json_bool(), self.json_null()]))

    def json_member(self, key: str, p: ParserLike) -> P:
        """``"key" : p`` with optional spaces around the colon."""
        ws = self.space()
        return self.sequence([self.literal(f'"{key}"'), ws, self.literal(":"), ws, p])

    def python_string(self) -> P:
        return self.rule("python-string", lambda: self.choice([self.double_quoted_string(),
                                                               self.single_quoted_string()]))

    def python_number(self) -> P:
        return self.json_number()

    def python_bool(self) -> P:
        return self.rule("python-bool", lambda: self.choice([self.literal("True"), self.literal("False")]))

    def python_null(self) -> P:
        return self.rule("python-none", lambda: self.literal("None"))

    def python_dict(self) -> P:
        def body() -> P:
            ws = self.space()
            member = self.sequence([self.python_string(), ws, self.literal(":"), ws, self.python_value()])
            members = self.sequence([member, self.zero_or_more(self.sequence([ws, self.literal(","), ws, member]))])
            return self._container("{", "}", members, ws, True)

        return self.rule("python-dict", body)

    def python_array(self) -> P:
        def body() -> P:
            ws = self.space()
            elements = self.sequence([self.python_value(),
                                      self.zero_or_more(self.sequence([self.literal(","), ws, self.python_value()]))])
            return self._container("[", "]", elements, ws, True)

        return self.rule("python-array", body)

    def python_value(self) -> P:
        """A Python literal value: dict, list, quoted string, number, True/False, None."""
        return self.rule("python-value", lambda: self.choice([
            self.python_dict(), self.python_array(), self.python_string(), self.python_number(), self.python_bool(),
            self.python_null()]))

    def marker(self) -> P:
        """Text between ``<`` and ``>`` or between ``[`` and ``]``."""
        # upstream's ``literal("<") + until(">") + literal(">")``: operands right to left
        sharp = self.seq_rtl(self._lit("<"), lambda: self.until(">"), self._lit(">"))
        square = self.seq_rtl(self._lit("["), lambda: self.until("]"), self._lit("]"))
        return self.choice([sharp, square])

    # -- the result ------------------------------------------------------------------------------

    def set_root(self, p: ParserLike) -> None:
        self._root = int(p)

    def _resolve(self, parser_id: int) -> int:
        node = self.get(parser_id)
        if isinstance(node, Ref):
            try:
                return self._rules[node.name]
            except KeyError:
                raise PegArenaError(f"Rule not found: {node.name}", {"rule": node.name}) from None
        return parser_id

    def build(self) -> Arena:
        """Point every child (and the root) that is a ref at its rule; the arena.

        Raises PegArenaError for a ref to a rule that does not exist.
        """
        self._parsers = [_resolved_children(p, self._resolve) for p in self._parsers]
        if self._root != INVALID_PARSER_ID:
            self._root = self._resolve(self._root)
        return Arena(tuple(self._parsers), dict(self._rules), self._root)


def build_peg_parser(fn: Callable[[ParserBuilder], P]) -> Arena:
    """Upstream's ``build_peg_parser``: ``fn``'s parser becomes the root of a built arena."""
    builder = ParserBuilder()
    builder.set_root(fn(builder))
    return builder.build()
