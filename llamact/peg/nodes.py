"""The PEG parser nodes: upstream's 21 parser node kinds (``common/peg-parser.h``) as frozen dataclasses.

Nodes refer to one another by id only (an index into an :class:`~llamact.peg.arena.Arena`);
nothing here checks that child ids are in range: that surfaces, as upstream's ``parsers_.at``
would, when a walker (e.g. GBNF generation) follows them and raises :class:`PegArenaError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import LlamaInferenceException

#: upstream's ``COMMON_PEG_INVALID_PARSER_ID`` (``size_t(-1)``).
INVALID_PARSER_ID = (1 << 64) - 1


class PegArenaError(LlamaInferenceException):
    """A parser arena is malformed: bad JSON shape, unknown node type, or a dangling id or rule name."""


@dataclass(frozen=True)
class Epsilon:
    """Matches the empty string."""


@dataclass(frozen=True)
class Start:
    """Matches at the start of the input only."""


@dataclass(frozen=True)
class End:
    """Matches at the end of the input only."""


@dataclass(frozen=True)
class Literal:
    """Matches ``literal`` exactly."""

    literal: str


@dataclass(frozen=True)
class Sequence:
    """Matches every child in order."""

    children: tuple[int, ...]


@dataclass(frozen=True)
class Choice:
    """Ordered choice: the first child that matches."""

    children: tuple[int, ...]


@dataclass(frozen=True)
class Repetition:
    """``child`` repeated ``min_count`` to ``max_count`` times (``max_count == -1``: unbounded)."""

    child: int
    min_count: int
    max_count: int


@dataclass(frozen=True)
class And:
    """Positive lookahead on ``child`` (consumes nothing)."""

    child: int


@dataclass(frozen=True)
class Not:
    """Negative lookahead on ``child`` (consumes nothing)."""

    child: int


@dataclass(frozen=True)
class Any_:
    """One UTF-8 code point (named ``Any_`` so as not to shadow ``typing.Any``)."""


@dataclass(frozen=True)
class Space:
    """A run (possibly empty) of C ``isspace`` characters."""


@dataclass(frozen=True)
class CharRange:
    """An inclusive code point range of a :class:`Chars` node."""

    start: int
    end: int

    def contains(self, codepoint: int) -> bool:
        return self.start <= codepoint <= self.end


@dataclass(frozen=True)
class Chars:
    """A character class (``pattern`` is its GBNF text) repeated ``min_count`` to ``max_count`` times."""

    pattern: str
    ranges: tuple[CharRange, ...]
    negated: bool
    min_count: int
    max_count: int


@dataclass(frozen=True)
class String:
    """JSON-escaped string content (no quotes) up to an unescaped ``delimiter`` (one character)."""

    delimiter: str


@dataclass(frozen=True)
class Until:
    """Everything up to (not including) the first of ``delimiters``."""

    delimiters: tuple[str, ...]


@dataclass(frozen=True)
class Schema:
    """``child`` constrained by a JSON schema. The schema itself is never serialised, so a loaded
    arena has none (``node`` is ``None``) and its GBNF delegates to ``child``."""

    child: int
    name: str
    raw: bool
    node: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Rule:
    """A named rule (``trigger``: it starts a lazy grammar)."""

    name: str
    child: int
    trigger: bool


@dataclass(frozen=True)
class Ref:
    """A reference to the rule called ``name``."""

    name: str


@dataclass(frozen=True)
class Atomic:
    """``child``, whose partial matches are dropped."""

    child: int


@dataclass(frozen=True)
class Tag:
    """``child``, tagged ``tag`` in the AST."""

    child: int
    tag: str


@dataclass(frozen=True)
class Gbnf:
    """``child`` when parsing; ``grammar`` (verbatim GBNF) when generating a grammar."""

    child: int
    grammar: str


@dataclass(frozen=True)
class Ac:
    """Aho-Corasick scan up to and including the first of ``delimiters`` (non-empty)."""

    child: int
    delimiters: tuple[str, ...]


Parser = (Epsilon | Start | End | Literal | Sequence | Choice | Repetition | And | Not | Any_ | Space | Chars | String
          | Until | Schema | Rule | Ref | Atomic | Tag | Gbnf | Ac)

#: the serialised ``type`` name of every node class (upstream's lower-case variant names).
TYPE_NAMES: dict[type, str] = {
    Epsilon: "epsilon", Start: "start", End: "end", Literal: "literal", Sequence: "sequence", Choice: "choice",
    Repetition: "repetition", And: "and", Not: "not", Any_: "any", Space: "space", Chars: "chars",
    String: "string", Until: "until", Schema: "schema", Rule: "rule", Ref: "ref", Atomic: "atomic", Tag: "tag",
    Gbnf: "gbnf", Ac: "ac",
}
