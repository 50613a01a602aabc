"""The PEG parser layer (upstream's ``common/peg-parser``): arena, builder, executor, JSON, GBNF.

Public names: :class:`Arena` and the node classes, :func:`load_arena` (upstream's serialised
arena JSON -> Arena; raises :class:`PegArenaError`), ``Arena.to_json()``;
:class:`ParserBuilder` (upstream's builder, node ids allocated in upstream's order) and
:func:`build_peg_parser`; :func:`parse` / :class:`IncrementalParser` (the lenient executor and
its resumable form, results as :class:`ParseResult` with :class:`AstNode` trees); and
:func:`arena_to_gbnf` / :func:`add_arena_rules` (upstream's ``build_grammar``, byte-identical).
"""

from __future__ import annotations

from .arena import Arena, load_arena
from .ast import AstNode, find_by_rule, find_by_tag, visit
from .builder import P, ParserBuilder, build_peg_parser
from .executor import CompiledParser, IncrementalParser, ParseResult, PegParseError, parse
from .gbnf import add_arena_rules, arena_to_gbnf
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

__all__ = [
    "INVALID_PARSER_ID", "Ac", "And", "Any_", "Arena", "AstNode", "Atomic", "CharRange", "Chars", "Choice",
    "CompiledParser", "End", "Epsilon", "Gbnf", "IncrementalParser", "Literal", "Not", "P", "ParseResult", "Parser",
    "ParserBuilder", "PegArenaError", "PegParseError", "Ref", "Repetition", "Rule", "Schema", "Sequence", "Space",
    "Start", "String", "Tag", "Until", "add_arena_rules", "arena_to_gbnf", "build_peg_parser", "find_by_rule",
    "find_by_tag", "load_arena", "parse", "visit",
]
