"""GBNF (llamact's parsed form) -> llguidance's Lark.

    conversion = gbnf_to_lark(parse_gbnf(text), root="root")   conversion.text, .lexemes, .fallback
    lark = gbnf_to_char_lark(parse_gbnf(text), root="root")    one code point per lexeme

``gbnf_to_lark`` keeps whole lexemes where llguidance's greedy lexer cannot change what the grammar
allows (``lexeme_plan``: regular runs become one terminal each, split only where a lexeme could be
read on into another); when the plan is over its work bounds it falls back to ``gbnf_to_char_lark``.

Why not ``llguidance.gbnf_to_lark``: it makes every rule made only of text one lexeme whatever
follows it, and llguidance's lexer is greedy -- a lexeme that can still grow is never cut short to
let other lexemes match the same bytes. llama.cpp's grammar has no lexer: it matches code point by
code point. The two disagree wherever a multi-character lexeme shares a prefix with text other rules
accept at the same place, as in every template grammar that lets content come before the call
(``until-N ::= [^<] until-N | [<] until-N-01 ...`` beside ``"<|tools_prefix|>"``: after ``<|`` the
lexer is inside the long lexeme and refuses ``<|im_start|>`` as free text, which llama.cpp allows).
``gbnf_to_char_lark`` makes every rule a parser rule and every lexeme exactly one code point, so no
lexeme can grow past another's boundary. The differential test measures both.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

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
from .lexeme_lang import OverBudget
from .lexeme_plan import Lexeme, LexemePlan, PGroup, PRef, PRepeat, Sym, UnfitGrammar, plan_lexemes

__all__ = ["CharLarkError", "LarkConversion", "gbnf_to_char_lark", "gbnf_to_lark"]

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
        if (" " in inner and not inner.startswith("(")) or inner[-1] in "*+?}":
            inner = f"({inner})"   # a sequence, or a repetition of a repetition (x*? is no Lark)
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


# -- whole lexemes ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class LarkConversion:
    text: str
    lexemes: int              # lexemes in the plan (0: one code point per lexeme)
    splits: int               # lexemes the plan had to split
    fallback: str | None      # why the grammar went one code point per lexeme (None: it did not)


_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_ASCII_ESCAPES = {cp: _hex(cp) for cp in range(128) if chr(cp) not in _PLAIN}


def _regex_literal(codepoints: tuple[int, ...]) -> str:
    if max(codepoints) < 128:
        return "/" + "".join(map(chr, codepoints)).translate(_ASCII_ESCAPES) + "/"
    out = []
    for cp in codepoints:
        if cp > MAX_CODEPOINT or _SURROGATES[0] <= cp <= _SURROGATES[1]:
            raise CharLarkError(f"the grammar holds the code point U+{cp:X}, which no UTF-8 text contains")
        out.append(chr(cp) if chr(cp) in _PLAIN else _hex(cp))
    return "/" + "".join(out) + "/"


def _repeat(inner: str, lo: int, hi: int | None) -> str:
    bare = (inner.startswith("(") and inner.endswith(")")) or (" " not in inner and inner[-1] not in "*+?}")
    inner = inner if bare else f"({inner})"   # a repetition of a repetition: x* ? is no Lark
    if (lo, hi) == (0, None):
        return f"{inner}*"
    if (lo, hi) == (1, None):
        return f"{inner}+"
    if (lo, hi) == (0, 1):
        return f"{inner}?"
    if hi is None:
        return f"{inner}{{{lo},}}"
    return f"{inner}{{{lo},{hi}}}"


class _Emitter:
    def __init__(self, plan: LexemePlan) -> None:
        self.plan = plan
        self.grammar = plan.grammar
        self.lines: list[str] = []
        self._terms: dict[str, str] = {}
        self._undefined: list[str] = []
        self._rule_names: dict[str, str] = {}
        self._lexeme_terms = itertools.count()
        self._groups = itertools.count()

    def rule_name(self, name: str) -> str:
        hit = self._rule_names.get(name)
        if hit is None:
            clean = re.sub(r"[^a-z0-9_]", "_", name.lower())
            hit = "start" if name == self.plan.start else f"r{len(self._rule_names)}_{clean}"[:60]
            self._rule_names[name] = hit
        return hit

    # terminals: regular GBNF rules, once each, composed by llguidance into the lexemes' regexes;
    # named when first referred to, defined from a work list (a chain of 600 rules is a loop)
    def term(self, name: str) -> str:
        hit = self._terms.get(name)
        if hit is None:
            clean = re.sub(r"[^A-Z0-9_]", "_", name.upper())
            hit = f"T{len(self._terms)}_{clean}"[:60]
            self._terms[name] = hit
            self._undefined.append(name)
        return hit

    def _define_terms(self) -> None:
        while self._undefined:
            name = self._undefined.pop()
            body = " | ".join(self.term_seq(s.items) for s in self.grammar.rules[name].sequences)
            self.lines.append(f"{self._terms[name]}: {body}")

    def term_seq(self, items: tuple[object, ...]) -> str:
        parts = [self.term_item(i) for i in items]
        parts = [p for p in parts if p != '""']
        return " ".join(parts) or '""'

    def term_item(self, item: object) -> str:
        if isinstance(item, Literal):
            return _regex_literal(item.codepoints) if item.codepoints else '""'
        if isinstance(item, CharClass):
            return _char_class(item)
        if isinstance(item, AnyChar):
            return "/(?s:.)/"
        if isinstance(item, RuleRef):
            return self.term(item.name)
        if isinstance(item, Group):
            return "(" + " | ".join(self.term_seq(s.items) for s in item.alternatives.sequences) + ")"
        if isinstance(item, Repeat):
            if item.max == 0:
                return '""'
            return _repeat(self.term_item(item.item), item.min, item.max)
        raise CharLarkError(f"unknown grammar element {type(item).__name__}")

    def lexeme(self, lex: Lexeme) -> str:
        if len(lex.items) == 1 and not isinstance(lex.items[0], (Group, Repeat)):
            return self.term_item(lex.items[0])
        name = f"L{next(self._lexeme_terms)}"
        self.lines.append(f"{name}: {self.term_seq(lex.items)}")
        return name

    def sym(self, sym: Sym) -> str:
        if isinstance(sym, Lexeme):
            return self.lexeme(sym)
        if isinstance(sym, PRef):
            return self.rule_name(sym.name)
        if isinstance(sym, PGroup):
            return "(" + self.alts(sym.alts) + ")"
        assert isinstance(sym, PRepeat)
        if sym.max == 0:
            return '""'
        return _repeat(self.sym(sym.sym), sym.min, sym.max)

    def alts(self, alts: list[list[Sym]]) -> str:
        out = []
        for seq in alts:
            parts = [p for p in (self.sym(s) for s in seq) if p != '""']
            out.append(" ".join(parts) or '""')
        return " | ".join(out) if out else '""'

    def emit(self, options: str) -> str:
        for name, alts in self.plan.rules.items():
            self.lines.append(f"{self.rule_name(name)}: {self.alts(alts)}")
        self._define_terms()
        return "\n".join([f"%llguidance {options}", ""] + self.lines) + "\n"


def gbnf_to_lark(grammar: Grammar, root: str = "root", options: str = "{}") -> LarkConversion:
    """``grammar`` as llguidance Lark text with whole lexemes where they keep llama.cpp's verdicts
    (``lexeme_plan``), one code point per lexeme where the plan is over its work bounds."""
    if root not in grammar.rules:
        raise CharLarkError(f"the grammar has no rule {root!r}")
    try:
        plan = plan_lexemes(grammar, root)
    except UnfitGrammar as exc:
        raise CharLarkError(str(exc)) from None
    except (OverBudget, RecursionError) as exc:
        reason = str(exc) if isinstance(exc, OverBudget) else "the grammar nests too deep for the lexeme analysis"
        return LarkConversion(gbnf_to_char_lark(grammar, root, options), 0, 0, reason)
    return LarkConversion(_Emitter(plan).emit(options), plan.lexemes, plan.splits, None)
