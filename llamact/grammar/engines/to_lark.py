"""GBNF (llamact's parsed form) -> llguidance's Lark, one character per lexeme.

Why not ``llguidance.gbnf_to_lark``: that converter turns every rule made only of text into one
lexeme, and llguidance's lexer is greedy -- a lexeme that can still grow is never cut short to let
other lexemes match the same bytes. llama.cpp's grammar has no lexer: it matches code point by code
point. The two disagree wherever a multi-character lexeme shares a prefix with text other rules
accept at the same place, as in every template grammar that lets content come before the call
(``until-N ::= [^<] until-N | [<] until-N-01 ...`` beside ``"<|tools_prefix|>"``: after ``<|`` the
lexer is inside the long lexeme and refuses ``<|im_start|>`` as free text, which llama.cpp allows).
Here every rule is a parser rule and every lexeme is exactly one code point (a literal becomes its
characters, a character class one regex), so no lexeme can grow past another's boundary and the
parse is llama.cpp's, character by character. The differential test measures the result.

    lark = gbnf_to_char_lark(parse_gbnf(text), root="root")   GrammarUnfitError for what Lark cannot say
"""

from __future__ import annotations

import re

from ...errors import LlamaInferenceException
from ..gbnf import (
    Alternatives,
    AnyChar,
    CharClass,
    Grammar,
    Group,
    Literal,
    Repeat,
    RuleRef,
    Sequence,
    TokenRef,
)

__all__ = ["CharLarkError", "gbnf_to_char_lark"]

MAX_CODEPOINT = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)


class CharLarkError(LlamaInferenceException):
    """A grammar this conversion cannot express the way llama.cpp reads it."""


def _hex(cp: int) -> str:
    return f"\\x{{{cp:x}}}"


def _char(cp: int) -> str:
    if cp > MAX_CODEPOINT or _SURROGATES[0] <= cp <= _SURROGATES[1]:
        raise CharLarkError(f"the grammar holds the code point U+{cp:X}, which no UTF-8 text contains")
    return f"/{_hex(cp)}/"


def _char_class(item: CharClass) -> str:
    parts = []
    for lo, hi in item.ranges:
        hi = min(hi, MAX_CODEPOINT)
        if lo > hi:
            continue   # a range no text reaches (llama.cpp's too): nothing to match
        if _SURROGATES[0] <= lo and hi <= _SURROGATES[1]:
            continue
        parts.append(_hex(lo) if lo == hi else f"{_hex(lo)}-{_hex(hi)}")
    if not parts:
        if item.negated:
            return "/(?s:.)/"
        raise CharLarkError("the grammar holds a character class that matches nothing")
    return f"/[{'^' if item.negated else ''}{''.join(parts)}]/"


class _Names:
    def __init__(self, grammar: Grammar, root: str) -> None:
        self.map: dict[str, str] = {}
        for i, name in enumerate(grammar.rules):
            clean = re.sub(r"[^a-z0-9_]", "_", name.lower())
            self.map[name] = "start" if name == root else f"r{i}_{clean}"[:60]

    def __getitem__(self, name: str) -> str:
        return self.map[name]


def _element(item: object, names: _Names) -> str:
    if isinstance(item, Literal):
        if not item.codepoints:
            return '""'
        return " ".join(_char(cp) for cp in item.codepoints) if len(item.codepoints) > 1 else _char(item.codepoints[0])
    if isinstance(item, CharClass):
        return _char_class(item)
    if isinstance(item, AnyChar):
        return "/(?s:.)/"
    if isinstance(item, RuleRef):
        return names[item.name]
    if isinstance(item, Group):
        return f"({_alternatives(item.alternatives, names)})"
    if isinstance(item, Repeat):
        inner = _element(item.item, names)
        if " " in inner and not inner.startswith("("):
            inner = f"({inner})"
        if item.max == 0:
            return '""'
        if (item.min, item.max) == (0, None):
            return f"{inner}*"
        if (item.min, item.max) == (1, None):
            return f"{inner}+"
        if (item.min, item.max) == (0, 1):
            return f"{inner}?"
        if item.max is None:
            return f"{inner}{{{item.min},}}"
        return f"{inner}{{{item.min},{item.max}}}"
    if isinstance(item, TokenRef):
        raise CharLarkError("the grammar matches model tokens (<...> elements): llguidance matches them differently")
    raise CharLarkError(f"unknown grammar element {type(item).__name__}")


def _sequence(sequence: Sequence, names: _Names) -> str:
    parts = [_element(item, names) for item in sequence.items]
    parts = [p for p in parts if p != '""'] or ['""']
    return " ".join(parts)


def _alternatives(alternatives: Alternatives, names: _Names) -> str:
    return " | ".join(_sequence(s, names) for s in alternatives.sequences)


def gbnf_to_char_lark(grammar: Grammar, root: str = "root", options: str = "{}") -> str:
    """``grammar`` as llguidance Lark text (``%llguidance options`` first), ``root`` as its start."""
    if root not in grammar.rules:
        raise CharLarkError(f"the grammar has no rule {root!r}")
    names = _Names(grammar, root)
    lines = [f"%llguidance {options}", ""]
    for name, alternatives in grammar.rules.items():
        lines.append(f"{names[name]}: {_alternatives(alternatives, names)}")
    return "\n".join(lines) + "\n"
