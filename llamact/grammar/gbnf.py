"""GBNF, llama.cpp's grammar format: parse it (on Lark) into a small AST, validate it, print it back.

What enters: GBNF text, as llama.cpp's ``llama_grammar_parser::parse`` (src/llama-grammar.cpp at
the pin) reads it: rules ``name ::= alternatives``; literals ``"..."``; character classes
``[...]`` / ``[^...]`` with ranges; ``.``; rule references; token references ``<[id]>``,
``<text>``, ``!<...>``; groups ``( ... )``; repetitions ``*``, ``+``, ``?``, ``{m}``, ``{m,}``,
``{m,n}``; escapes ``\\xHH \\uHHHH \\UHHHHHHHH \\t \\n \\r \\\\ \\" \\[ \\] \\-``; comments ``#``.

What leaves: :func:`parse_gbnf` returns a :class:`Grammar` of frozen dataclasses;
:func:`format_gbnf` prints one back such that ``parse_gbnf(format_gbnf(g)) == g``.

What is raised: :class:`GbnfError` (a ``LlamaException``) with ``line``, ``column`` and a caret
``context`` for: syntax errors, unknown or short escapes, a NUL character, an undefined rule (named,
with where it is referenced), a character range whose start is above its end, repetition bounds
``{m,n}`` with m > n, counts upstream refuses (``min > 2000``; more than 2000 repeated rules; an
integer past 64 bits; a repetition of nothing, e.g. ``""*``), no rules at all, and a missing root.

Invariants (upstream's semantics, kept exactly; the tests hold llama.cpp to them):

* Newlines end a rule, except directly after ``::=`` or ``|`` and anywhere inside parentheses.
* Rule names are ``[a-zA-Z0-9-]+``; a rule defined twice keeps its last definition.
* ``[]`` and ``[^]`` match the empty string (upstream emits nothing for them).
* A ``{m,n}`` with n > 2000 is unbounded, as upstream's parser makes it.
* ``[z-a]`` is rejected here; llama.cpp accepts it as a class that matches nothing (deliberately
  stricter). ``{3,2}`` is rejected here; llama.cpp would loop ~2**64 times on it. A root that is
  only referenced, never defined (``r ::= root{0}``), is rejected here; llama.cpp's check finds the
  symbol and its grammar set-up then indexes past its rules.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError
from lark.lark import PostLex

from ..errors import ErrorKind, LlamaInferenceException, LlamaRequestException

__all__ = [
    "MAX_PARSE_DEPTH",
    "MAX_REPETITION_THRESHOLD",
    "Alternatives",
    "AnyChar",
    "CharClass",
    "Element",
    "GbnfError",
    "Grammar",
    "Group",
    "Literal",
    "Repeat",
    "RuleRef",
    "Sequence",
    "TokenRef",
    "format_gbnf",
    "max_paren_depth",
    "parse_gbnf",
]

#: upstream's MAX_REPETITION_THRESHOLD (src/llama-grammar.cpp)
MAX_REPETITION_THRESHOLD = 2000
_U64 = 2**64


class GbnfError(LlamaInferenceException, LlamaRequestException):
    """A GBNF grammar that does not parse or is not valid; ``line`` / ``column`` are 1-based (None
    when the problem has no single place, e.g. a missing root) and ``context`` shows the line with a
    caret under the place, as Lark's errors do. The request's fault wherever the grammar was made
    (llama-server answers 400 "Failed to parse grammar"); a ``LlamaInferenceException`` too, as it was
    before errors had a kind."""

    kind = ErrorKind.REQUEST

    def __init__(self, reason: str, line: int | None = None, column: int | None = None, context: str = "") -> None:
        where = f" at line {line}, column {column}" if line is not None else ""
        message = f"invalid GBNF grammar: {reason}{where}" + (f"\n{context}" if context else "")
        super().__init__(message, {"reason": reason, "line": line, "column": column})
        self.reason = reason
        self.line = line
        self.column = column
        self.context = context


# ---------------------------------------------------------------------------------------------
# The AST
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Literal:
    """``"..."``: the code points in order (``\\U`` escapes may exceed U+10FFFF, as upstream allows)."""

    codepoints: tuple[int, ...]

    @classmethod
    def of(cls, text: str) -> Literal:
        return cls(tuple(ord(c) for c in text))


@dataclass(frozen=True)
class CharClass:
    """``[...]``: inclusive ``(start, end)`` ranges in source order (a single char is ``(c, c)``)."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False


@dataclass(frozen=True)
class AnyChar:
    """``.``: any one code point."""


@dataclass(frozen=True)
class RuleRef:
    """A reference to rule ``name``; ``offset`` (where it is written) is not part of equality."""

    name: str
    offset: int | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class TokenRef:
    """``<[id]>`` (``token`` is the int id) or ``<text>`` (``token`` is the text between the angle
    brackets); ``!`` negates. These match model tokens, never text."""

    token: int | str
    negated: bool = False


@dataclass(frozen=True)
class Group:
    """``( alternatives )``."""

    alternatives: Alternatives


@dataclass(frozen=True)
class Repeat:
    """``item`` repeated ``min`` to ``max`` times (None: unbounded). ``*`` is (0, None), ``+`` is
    (1, None), ``?`` is (0, 1), ``{m}`` is (m, m). ``offset`` is not part of equality."""

    item: Element
    min: int
    max: int | None
    offset: int | None = field(default=None, compare=False, repr=False)


Element = Literal | CharClass | AnyChar | RuleRef | TokenRef | Group | Repeat


@dataclass(frozen=True)
class Sequence:
    """Elements matched one after the other; empty matches the empty string."""

    items: tuple[Element, ...] = ()


@dataclass(frozen=True)
class Alternatives:
    """``seq | seq | ...``."""

    sequences: tuple[Sequence, ...]


@dataclass(frozen=True)
class Grammar:
    """Rule name -> its alternatives, in order of first definition."""

    rules: dict[str, Alternatives]


# ---------------------------------------------------------------------------------------------
# Lark grammar
# ---------------------------------------------------------------------------------------------

# LALR with Lark's contextual lexer, not Earley. GBNF's newlines are significant at the top level
# (they end a rule) but are whitespace inside parentheses and right after `::=` or `|`: that is
# depth-dependent, which no single regular lexer rule captures. Lark's idiom for it (the one its
# Python grammar uses) is a post-lexer that tracks the parenthesis depth and drops _NL tokens where
# they are whitespace, leaving a grammar with no ambiguity about where a rule ends. Post-lexers run
# with the LALR front end; Earley's dynamic lexer would instead have to decide each newline's role
# by ambiguity resolution. LALR is also linear time (grammars generated from JSON schemas are
# large), and its contextual lexer tells a repetition count `{2}` from a rule named `2`.
_LARK_GRAMMAR = r"""
start: (rule (_NL rule)*)? _NL?
rule: NAME _DEF alternatives
alternatives: sequence (_BAR sequence)*
sequence: item*

?item: atom
     | item STAR -> star
     | item PLUS -> plus
     | item QMARK -> optional
     | item "{" INT "}" -> repeat_exact
     | item "{" INT "," "}" -> repeat_min
     | item "{" INT "," INT "}" -> repeat_range

?atom: STRING -> literal
     | CLASS -> char_class
     | DOT -> any_char
     | NAME -> rule_ref
     | TOKEN -> token_ref
     | _LPAR alternatives _RPAR -> group

NAME: /[a-zA-Z0-9-]+/
INT: /[0-9]+/
STRING: /"(?:\\[\s\S]|[^"\\])*"/
CLASS: /\[(?:\\[\s\S]|[^\]\\])*\]/
TOKEN: /!?<(?:\[[0-9]+\]|(?!\[)[^>]*)>/
DOT: "."
STAR: "*"
PLUS: "+"
QMARK: "?"
_DEF: "::="
_BAR: "|"
_LPAR: "("
_RPAR: ")"
_NL: /[\r\n]+/
COMMENT: /#[^\r\n]*/
%ignore /[ \t]+/
%ignore COMMENT
"""


class _Newlines(PostLex):
    """Drop the newlines that are whitespace: inside parentheses, after ``::=`` / ``|``, at the
    start and after another newline. Stateless between calls (the state lives in the generator)."""

    always_accept = ("_NL",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        depth = 0
        prev: str | None = None
        for tok in stream:
            kind = tok.type
            if kind == "_NL":
                if depth > 0 or prev in (None, "_NL", "_DEF", "_BAR"):
                    continue
            elif kind == "_LPAR":
                depth += 1
            elif kind == "_RPAR":
                depth = max(0, depth - 1)
            prev = kind
            yield tok


class _SourceError(Exception):
    """An error found while building the AST, at ``offset`` in the text."""

    def __init__(self, reason: str, offset: int | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.offset = offset


_HEX_WIDTHS = {"x": 2, "u": 4, "U": 8}
_SIMPLE_CHARS = {"t": 9, "r": 13, "n": 10, "\\": 0x5C, '"': 0x22, "[": 0x5B, "]": 0x5D, "-": 0x2D}


def _decode_char(text: str, i: int, end: int, base: int) -> tuple[int, int]:
    """Upstream's ``parse_char`` at ``text[i]``: ``(code point, index after it)``."""
    if text[i] != "\\":
        return ord(text[i]), i + 1
    kind = text[i + 1] if i + 1 < end else ""
    if kind in _HEX_WIDTHS:
        width = _HEX_WIDTHS[kind]
        digits = text[i + 2:min(end, i + 2 + width)]
        if len(digits) != width or any(d not in "0123456789abcdefABCDEF" for d in digits):
            raise _SourceError(f"expecting {width} hex chars after '\\{kind}'", base + i)
        return int(digits, 16), i + 2 + width
    if kind in _SIMPLE_CHARS:
        return _SIMPLE_CHARS[kind], i + 2
    raise _SourceError(f"unknown escape '\\{kind}'", base + i)


def _literal(tok: Token) -> Literal:
    text, base = str(tok), tok.start_pos or 0
    out: list[int] = []
    i, end = 1, len(text) - 1
    while i < end:
        cp, i = _decode_char(text, i, end, base)
        out.append(cp)
    return Literal(tuple(out))


def _char_class(tok: Token) -> CharClass:
    """Upstream's class loop: after a char, a raw ``-`` not right before ``]`` makes a range."""
    text, base = str(tok), tok.start_pos or 0
    negated = text.startswith("[^")
    i, end = (2 if negated else 1), len(text) - 1
    ranges: list[tuple[int, int]] = []
    while i < end:
        start = i
        lo, i = _decode_char(text, i, end, base)
        hi = lo
        if i < end and text[i] == "-" and i + 1 < end:
            hi, i = _decode_char(text, i + 1, end, base)
            if lo > hi:
                raise _SourceError(f"character range start U+{lo:04X} is above its end U+{hi:04X}", base + start)
        ranges.append((lo, hi))
    return CharClass(tuple(ranges), negated)


def _count(tok: Token) -> int:
    value = int(tok)
    if value >= _U64:
        raise _SourceError(f"repetition count {tok} does not fit in 64 bits", tok.start_pos)
    return value


@v_args(inline=True)
class _ToAst(Transformer):
    """Lark tree -> AST. Runs inside the LALR parser (no intermediate tree is built)."""

    def start(self, *rules: tuple[Token, Alternatives]) -> list[tuple[Token, Alternatives]]:
        return list(rules)

    def rule(self, name: Token, alternatives: Alternatives) -> tuple[Token, Alternatives]:
        return name, alternatives

    def alternatives(self, *sequences: Sequence) -> Alternatives:
        return Alternatives(tuple(sequences))

    def sequence(self, *items: Element) -> Sequence:
        return Sequence(tuple(items))

    def literal(self, tok: Token) -> Literal:
        return _literal(tok)

    def char_class(self, tok: Token) -> CharClass:
        return _char_class(tok)

    def any_char(self, tok: Token) -> AnyChar:
        return AnyChar()

    def rule_ref(self, tok: Token) -> RuleRef:
        return RuleRef(str(tok), tok.start_pos)

    def token_ref(self, tok: Token) -> TokenRef:
        text = str(tok)
        negated = text.startswith("!")
        inner = text[2:-1] if negated else text[1:-1]
        if inner.startswith("[") and inner.endswith("]") and inner[1:-1].isdigit():
            return TokenRef(int(inner[1:-1]), negated)
        return TokenRef(inner, negated)

    def group(self, alternatives: Alternatives) -> Group:
        return Group(alternatives)

    def star(self, item: Element, op: Token) -> Repeat:
        return Repeat(item, 0, None, op.start_pos)

    def plus(self, item: Element, op: Token) -> Repeat:
        return Repeat(item, 1, None, op.start_pos)

    def optional(self, item: Element, op: Token) -> Repeat:
        return Repeat(item, 0, 1, op.start_pos)

    def repeat_exact(self, item: Element, m: Token) -> Repeat:
        return Repeat(item, _count(m), _count(m), m.start_pos)

    def repeat_min(self, item: Element, m: Token) -> Repeat:
        return Repeat(item, _count(m), None, m.start_pos)

    def repeat_range(self, item: Element, m: Token, n: Token) -> Repeat:
        lo, hi = _count(m), _count(n)
        if lo > hi:
            raise _SourceError(f"repetition {{{lo},{hi}}} has its minimum above its maximum", m.start_pos)
        return Repeat(item, lo, hi, m.start_pos)


@functools.lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark(_LARK_GRAMMAR, parser="lalr", lexer="contextual", postlex=_Newlines(), transformer=_ToAst(),
                propagate_positions=False, maybe_placeholders=False)


# ---------------------------------------------------------------------------------------------
# Errors with context
# ---------------------------------------------------------------------------------------------

_TERMINAL_NAMES = {
    "_DEF": "'::='", "_BAR": "'|'", "_LPAR": "'('", "_RPAR": "')'", "_NL": "a newline", "$END": "end of input",
    "NAME": "a rule name", "INT": "an integer", "STRING": "a literal", "CLASS": "a character class",
    "TOKEN": "a token reference", "DOT": "'.'", "STAR": "'*'", "PLUS": "'+'", "QMARK": "'?'",
    "LBRACE": "'{'", "RBRACE": "'}'", "COMMA": "','",
}


def _locate(text: str, offset: int) -> tuple[int, int, str]:
    """1-based line and column of ``offset`` (``\\n``, ``\\r\\n`` and ``\\r`` end lines, as upstream reads
    them), and that line with a caret under the place."""
    offset = max(0, min(offset, len(text)))
    prefix = text[:offset]
    line = prefix.count("\n") + prefix.count("\r") - prefix.count("\r\n") + 1
    line_start = max(prefix.rfind("\n"), prefix.rfind("\r")) + 1
    line_end = len(text)
    for stop in ("\n", "\r"):
        found = text.find(stop, offset)
        if found != -1:
            line_end = min(line_end, found)
    lo, hi = max(line_start, offset - 60), min(line_end, offset + 60)
    snippet = text[lo:hi].replace("\t", " ")
    return line, offset - line_start + 1, f"{snippet}\n{' ' * (offset - lo)}^"


def _error_at(text: str, reason: str, offset: int | None) -> GbnfError:
    if offset is None:
        return GbnfError(reason)
    line, column, context = _locate(text, offset)
    return GbnfError(reason, line, column, context)


def _describe(exc: UnexpectedInput) -> str:
    if isinstance(exc, UnexpectedCharacters):
        char = exc.char
        if char == '"':
            return "unterminated literal"
        if char == "[":
            return "unterminated character class"
        if char in "<!":
            return "malformed token reference (expecting <[id]> or <text>, '!' directly before '<')"
        return f"unexpected character {char!r}"
    if isinstance(exc, UnexpectedToken):
        expected = sorted({_TERMINAL_NAMES.get(t, t) for t in exc.expected if not t.startswith("__")})
        kind = exc.token.type
        got = _TERMINAL_NAMES.get(kind, repr(str(exc.token))).removeprefix("a ").removeprefix("an ")
        if kind in ("NAME", "INT", "STRING", "CLASS", "TOKEN"):
            got = f"{got} {str(exc.token)!r}"
        return f"unexpected {got}; expecting {' or '.join(expected)}"
    if isinstance(exc, UnexpectedEOF):
        return "unexpected end of input"
    return str(exc)


# ---------------------------------------------------------------------------------------------
# Validation (upstream's checks, in source order as upstream makes them)
# ---------------------------------------------------------------------------------------------


class _Symbols:
    """Upstream's ``symbol_ids``: it counts the rules a group creates, which bounds repetitions, and
    says which ids got a rule (``added``): upstream's rule vector reaches the largest of them, and
    a symbol below it that never got one is an "Undefined rule"."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.added: set[int] = set()

    def name(self, name: str) -> None:
        self.ids.setdefault(name, len(self.ids))

    def define(self, name: str) -> None:
        self.name(name)
        self.added.add(self.ids[name])

    def generate(self, base: str) -> None:
        next_id = len(self.ids)
        self.ids[f"{base}_{next_id}"] = next_id
        self.added.add(next_id)

    def empty_slots(self) -> list[str]:
        """Symbols whose slot in upstream's rule vector stays empty (referenced, never defined)."""
        size = max(self.added) + 1 if self.added else 0
        return [name for name, i in self.ids.items() if i < size and i not in self.added]


def _emits_nothing(item: Element) -> bool:
    """Upstream emits no element for these, so a repetition after them has no preceding item."""
    if isinstance(item, Literal):
        return not item.codepoints
    if isinstance(item, CharClass):
        return not item.ranges
    return isinstance(item, Repeat) and item.max == 0


def _check_item(item: Element, base: str, symbols: _Symbols) -> int:
    """Walk ``item`` as upstream's parser does; return its ``n_prev_rules``."""
    if isinstance(item, RuleRef):
        symbols.name(item.name)
        return 1
    if isinstance(item, Group):
        before = len(symbols.ids)
        symbols.generate(base)
        _check_alternatives(item.alternatives, base, symbols)
        return max(1, len(symbols.ids) - before)
    if isinstance(item, Repeat):
        n_prev = _check_item(item.item, base, symbols)
        lo, hi = item.min, item.max
        if hi is not None and lo > hi:
            raise _SourceError(f"repetition {{{lo},{hi}}} has its minimum above its maximum", item.offset)
        if lo > MAX_REPETITION_THRESHOLD:
            raise _SourceError(f"repetition minimum {lo} is above llama.cpp's limit of {MAX_REPETITION_THRESHOLD}",
                               item.offset)
        no_max = hi is None or hi > MAX_REPETITION_THRESHOLD
        if _emits_nothing(item.item):
            raise _SourceError("expecting a non-empty item before the repetition", item.offset)
        total = hi if (not no_max and hi) else (lo if lo > 0 else 1)
        if n_prev * total > MAX_REPETITION_THRESHOLD:
            raise _SourceError(
                f"the repetition makes {n_prev} x {total} rules, above llama.cpp's limit of {MAX_REPETITION_THRESHOLD}",
                item.offset)
        for _ in range(1 if no_max else (hi or 0) - lo):
            symbols.generate(base)
        return n_prev * total
    return 1


def _check_alternatives(alternatives: Alternatives, base: str, symbols: _Symbols) -> None:
    for sequence in alternatives.sequences:
        for item in sequence.items:
            _check_item(item, base, symbols)


def _references(item: Element | Alternatives) -> Iterator[RuleRef]:
    """The references upstream writes into the rule itself (``x{0}`` writes none: it is dropped)."""
    if isinstance(item, RuleRef):
        yield item
    elif isinstance(item, Repeat):
        if item.max != 0:
            yield from _references(item.item)
    elif isinstance(item, Group):
        yield from _references(item.alternatives)
    elif isinstance(item, Alternatives):
        for sequence in item.sequences:
            for element in sequence.items:
                yield from _references(element)


def _kept_references(item: Element | Alternatives, inside: bool = False) -> Iterator[RuleRef]:
    """References that upstream stores in the rules it generates (a group's rule; the rules a
    repetition with optional copies makes): they stay when their definition is given again."""
    if isinstance(item, RuleRef):
        if inside:
            yield item
    elif isinstance(item, Group):
        yield from _kept_references(item.alternatives, True)
    elif isinstance(item, Repeat):
        if item.max == 0:  # dropped, even inside a group's rule; only groups within it keep theirs
            yield from _kept_references(item.item, False)
            return
        generates = item.max is None or item.max > MAX_REPETITION_THRESHOLD or item.max > item.min
        yield from _kept_references(item.item, inside or generates)
    elif isinstance(item, Alternatives):
        for sequence in item.sequences:
            for element in sequence.items:
                yield from _kept_references(element, inside)


#: the deepest nesting of parentheses parse_gbnf reads (its checks recurse once per group, as
#: llama.cpp's parser does); ``grammar.limits`` bounds it lower by default
MAX_PARSE_DEPTH = 256


def max_paren_depth(text: str) -> int:
    """The deepest nesting of parentheses in GBNF ``text`` (literals, classes, token references
    and comments skipped): a linear scan, so that depth is known before anything recurses."""
    depth = deepest = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "[":
            close = '"' if c == '"' else "]"
            i += 1
            while i < n and text[i] != close:
                i += 2 if text[i] == "\\" else 1
        elif c == "#":
            while i < n and text[i] not in "\r\n":
                i += 1
        elif c == "<":
            end = text.find(">", i)
            i = n if end < 0 else end
        elif c == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif c == ")":
            depth = max(0, depth - 1)
        i += 1
    return deepest


def parse_gbnf(text: str, root: str | None = "root") -> Grammar:
    """Parse and validate GBNF ``text``; ``root`` must be defined (None: no root check).

    Raises GbnfError for anything llama.cpp's parser rejects and for the stricter checks in the
    module docstring.
    """
    if "\x00" in text:
        raise _error_at(text, "NUL character in the grammar (llama.cpp stops reading there)", text.index("\x00"))
    depth = max_paren_depth(text)
    if depth > MAX_PARSE_DEPTH:
        raise GbnfError(f"parentheses nested {depth} deep, above the {MAX_PARSE_DEPTH} levels llamact reads "
                        "(llama.cpp's parser would overflow its stack)")
    try:
        parsed = cast(list[tuple[Token, Alternatives]], _parser().parse(text))
    except UnexpectedInput as exc:
        if isinstance(exc, UnexpectedToken) and exc.token.type != "$END":
            offset = exc.token.start_pos
        elif isinstance(exc, UnexpectedCharacters):
            offset = exc.pos_in_stream
        else:
            offset = len(text.rstrip())
        raise _error_at(text, _describe(exc), offset) from None
    except _SourceError as exc:
        raise _error_at(text, exc.reason, exc.offset) from None
    except VisitError as exc:
        if isinstance(exc.orig_exc, _SourceError):
            raise _error_at(text, exc.orig_exc.reason, exc.orig_exc.offset) from None
        raise
    symbols = _Symbols()
    rules: dict[str, Alternatives] = {}
    try:
        for name_tok, alternatives in parsed:
            symbols.name(str(name_tok))
            _check_alternatives(alternatives, str(name_tok), symbols)
            symbols.define(str(name_tok))
            rules[str(name_tok)] = alternatives
    except _SourceError as exc:
        raise _error_at(text, exc.reason, exc.offset) from None
    if not rules:
        raise GbnfError("the grammar has no rules")
    for name, alternatives in rules.items():
        for ref in _references(alternatives):
            if ref.name not in rules:
                raise _error_at(text, f"undefined rule '{ref.name}' (referenced in rule '{name}')", ref.offset)
    for name_tok, alternatives in parsed:
        for ref in _kept_references(alternatives):
            if ref.name not in rules:
                raise _error_at(text, f"undefined rule '{ref.name}' (referenced in rule '{name_tok}')", ref.offset)
    for name in symbols.empty_slots():
        # referenced only in a definition given again later; llama.cpp still counts it (unless no
        # rule was added after it, where it never looks)
        raise GbnfError(f"undefined rule '{name}' (referenced in a definition that a later one replaced)")
    if root is not None and root not in rules:
        raise GbnfError(f"the grammar has no '{root}' rule (the start rule)")
    return Grammar(rules)


# ---------------------------------------------------------------------------------------------
# Printing
# ---------------------------------------------------------------------------------------------

_SIMPLE_ESCAPES = {9: "\\t", 10: "\\n", 13: "\\r", 0x5C: "\\\\"}


def _char(cp: int, specials: str) -> str:
    if cp in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[cp]
    if cp > 0x10FFFF:
        return f"\\U{cp:08X}"
    if 0xD800 <= cp <= 0xDFFF:
        return f"\\u{cp:04X}"
    c = chr(cp)
    if c in specials:
        return "\\" + c if c != "^" else "\\x5E"
    if cp < 0x100 and not c.isprintable():
        return f"\\x{cp:02X}"
    if not c.isprintable():
        return f"\\u{cp:04X}" if cp <= 0xFFFF else f"\\U{cp:08X}"
    return c


def _format_element(item: Element) -> str:
    if isinstance(item, Literal):
        return '"' + "".join(_char(cp, '"') for cp in item.codepoints) + '"'
    if isinstance(item, CharClass):
        parts = [_char(lo, "]-[^") + ("" if lo == hi else "-" + _char(hi, "]-[^")) for lo, hi in item.ranges]
        return "[" + ("^" if item.negated else "") + "".join(parts) + "]"
    if isinstance(item, AnyChar):
        return "."
    if isinstance(item, RuleRef):
        return item.name
    if isinstance(item, TokenRef):
        body = f"<[{item.token}]>" if isinstance(item.token, int) else f"<{item.token}>"
        return ("!" if item.negated else "") + body
    if isinstance(item, Group):
        return "(" + _format_alternatives(item.alternatives) + ")"
    if isinstance(item, Repeat):
        lo, hi = item.min, item.max
        op = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((lo, hi))
        if op is None:
            op = f"{{{lo},}}" if hi is None else (f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}")
        return _format_element(item.item) + op
    raise TypeError(f"not a GBNF element: {item!r}")


def _format_alternatives(alternatives: Alternatives) -> str:
    return " | ".join(" ".join(_format_element(i) for i in s.items) for s in alternatives.sequences).strip()


def format_gbnf(grammar: Grammar) -> str:
    """GBNF text for ``grammar``, one rule per line, in the grammar's rule order except that a rule
    whose last alternative is empty (``a ::=``, ``a ::= "x" |``) comes last.

    Upstream skips newlines after ``::=`` and ``|``, so such a rule must end the text: a grammar
    with two of them has no GBNF text (``parse_gbnf`` never makes one) and raises GbnfError.
    """
    empty = [name for name, alts in grammar.rules.items() if alts.sequences[-1:] == (Sequence(),)]
    if len(empty) > 1:
        raise GbnfError(f"rules {', '.join(map(repr, empty))} all end with an empty alternative; GBNF text can "
                        "end with only one such rule (llama.cpp reads the next line as that alternative)")
    names = [name for name in grammar.rules if name not in empty] + empty
    return "".join(f"{name} ::= {_format_alternatives(grammar.rules[name])}".rstrip() + "\n" for name in names)
