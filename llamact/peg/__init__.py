"""The PEG parser layer (upstream's ``common/peg-parser``): the arena, its JSON, and GBNF from it.

Public names: :class:`Arena` and the node classes, :func:`load_arena` (upstream's serialised
arena JSON -> Arena; raises :class:`PegArenaError`), ``Arena.to_json()``, and
:func:`arena_to_gbnf` / :func:`add_arena_rules` (upstream's ``build_grammar``, byte-identical).
"""

from __future__ import annotations

from .arena import (
    INVALID_PARSER_ID,
    Ac,
    And,
    Any_,
    Arena,
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
    load_arena,
)
from .gbnf import add_arena_rules, arena_to_gbnf

__all__ = [
    "INVALID_PARSER_ID", "Ac", "And", "Any_", "Arena", "Atomic", "CharRange", "Chars", "Choice", "End", "Epsilon",
    "Gbnf", "Literal", "Not", "Parser", "PegArenaError", "Ref", "Repetition", "Rule", "Schema", "Sequence", "Space",
    "Start", "String", "Tag", "Until", "add_arena_rules", "arena_to_gbnf", "load_arena",
]
