"""Whole lexemes for llguidance (``grammar.engines.lexeme_plan`` / ``to_lark.gbnf_to_lark``) without a
model: where the plan keeps a lexeme and where it must split one, and, on tricky grammars, llguidance
over a byte vocabulary allowing exactly the next characters ``GbnfAcceptor`` (llamact's model of
llama.cpp's matcher) allows along seeded walks. The proof against llama.cpp itself, over real
vocabularies, is tests/engine/test_grammar_engines_equality.py and scripts/grammar_engine_equality.py."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from llamact.grammar import json_schema_to_grammar, parse_gbnf
from llamact.grammar.acceptor import GbnfAcceptor
from llamact.grammar.engines.lexeme_plan import OverBudget, plan_lexemes
from llamact.grammar.engines.to_lark import CharLarkError, gbnf_to_char_lark, gbnf_to_lark

llg = pytest.importorskip("llguidance")

ALPHABET = [chr(c) for c in range(32, 127)] + ["\n", "\t"]
EOS = 256


class _Bytes:
    """A vocabulary of the 256 bytes and one end token: masks are allowed next bytes."""

    eos_token_id = EOS
    bos_token_id = None
    tokens = [bytes([i]) for i in range(256)] + [b"\xff<eos>"]
    special_token_ids = [EOS]

    def __call__(self, data: bytes) -> list[int]:
        return list(data)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return llg.LLTokenizer(llg.TokenizerWrapper(_Bytes()), eos_token=[EOS])


def _matcher(tokenizer: Any, lark: str) -> Any:
    m = llg.LLMatcher(tokenizer, lark, log_level=0)
    assert not m.is_error(), m.get_error()
    return m


def _llg_allowed(m: Any) -> set[str]:
    bits = np.unpackbits(np.frombuffer(m.compute_bitmask(), np.uint8), bitorder="little")
    out = {chr(b) for b in range(128) if bits[b] and chr(b) in ALPHABET}
    if bits[EOS]:
        out.add("<end>")
    return out


def _walk_equal(tokenizer: Any, gbnf: str, lark: str, drives: tuple[str, ...] = (), walks: int = 12,
                steps: int = 30) -> int:
    """Walks through characters both allow -- each drive as far as it goes, then seeded random
    characters; returns the steps compared (all equal)."""
    acceptor = GbnfAcceptor(parse_gbnf(gbnf))
    rng = random.Random(gbnf)
    compared = 0
    for drive in list(drives) + [""] * walks:
        m = _matcher(tokenizer, lark)
        text = ""
        for step in range(len(drive) + steps):
            ours = {c for c in ALPHABET if acceptor.is_viable_prefix(text + c)}
            if acceptor.accepts(text):
                ours.add("<end>")
            theirs = _llg_allowed(m)
            assert theirs == ours, (text, sorted(theirs - ours), sorted(ours - theirs))
            compared += 1
            chars = sorted(ours - {"<end>"})
            if not chars:
                break
            c = drive[step] if step < len(drive) and drive[step] in ours else rng.choice(chars)
            assert m.consume_token(ord(c)), m.get_error()
            text += c
    return compared


DRIVES = {"until-trigger": ("ab<|x<|tp|>[ab]", "<<|tp|>[z]"), "until-rules": ("xab<|x<<|tp|>[ab]", "x<|tp|>[q]"),
          "ambiguous-text": ("<|tp|>[a<|tp|>[b]",),
          "self-extension": ("xyzabcabc",), "prefix-alternatives": ("abc", "abbbd"),
          "spaces": ("x \n\n \t y",), "enum-prefixes": ('"ab", "abc"',), "nested-optional": ("<ab><b>",),
          "nested-repeats": ("x12ababqqqqab.",),
          "json-value": ('{"a": [1, {"b": "c"}], "d": true}',)}
TRICKY = {
    # free text that holds anything but "<|t" beside the trigger "<|tp|>" (a template's until rules)
    "until-trigger": ('root ::= text "<|tp|>" "[" [a-z]+ "]"\ntext ::= ([^<] text | "<" text1)?\n'
                      'text1 ::= ([^|<] text | "<" text1 | "|" text2)?\ntext2 ::= ([^t<] text | "<" text1)?'),
    # the same written as the templates' until rules: alternatives calling the next rule last (read as
    # left recursion, see _left_linear), an empty one ending the text
    "until-rules": ('root ::= "x" text "<|tp|>" "[" [a-z]+ "]"\ntext ::= "" | [^<] text | [<] text1\n'
                    'text1 ::= "" | [^|<] text | [<] text1 | [|] text2\ntext2 ::= "" | [^t<] text | [<] text1'),
    # free text that may hold the trigger itself: everything after the trigger is free text too
    "ambiguous-text": 'root ::= text "<|tp|>" "[" [a-z]+ "]"\ntext ::= [^<] text | "<" text | ',
    "self-extension": 'root ::= [a-z]+ "abc"',
    "prefix-alternatives": 'root ::= ("ab" | "a") "bc" | "a" "b"+ "d"',
    "spaces": 'root ::= "x" space space "y" space\nspace ::= | " " | "\\n"{1,2} [ \\t]{0,20}',
    "enum-prefixes": 'root ::= ("\\"a\\"" | "\\"ab\\"" | "\\"abc\\"") space ("," space root)?\n'
                     'space ::= | " " | "\\n"{1,2} [ \\t]{0,20}',
    "nested-optional": 'root ::= "<" ("a" | "ab")? "b"? ">" root?',
    # a repetition of a repetition: Lark has no "x*?", the converter brackets the inner one
    "nested-repeats": 'root ::= "x" [0-9]*? ("ab"+)? "q"{2}{1,3} [a-c]*{2} "."',
    "json-value": ('root ::= value\nvalue ::= object | array | string | [0-9]+ | "true" | "false"\n'
                   'object ::= "{" ws (string ws ":" ws value ("," ws string ws ":" ws value)*)? "}"\n'
                   'array ::= "[" ws (value ws ("," ws value ws)*)? "]"\nstring ::= "\\"" [^"\\\\]* "\\""\n'
                   'ws ::= [ \\t\\n]*'),
}


@pytest.mark.parametrize("name", list(TRICKY))
def test_whole_lexemes_allow_what_character_matching_allows(tokenizer: Any, name: str) -> None:
    gbnf = TRICKY[name]
    conversion = gbnf_to_lark(parse_gbnf(gbnf), "root", '{"no_forcing": true}')
    assert conversion.fallback is None
    assert _walk_equal(tokenizer, gbnf, conversion.text, DRIVES[name]) > 50


def test_the_check_is_not_vacuous(tokenizer: Any) -> None:
    """llguidance's own GBNF converter keeps "<|tp|>" whole beside the free text: after "<|" it is
    inside that lexeme and refuses the free text ("<|x") that character matching still allows."""
    gbnf = TRICKY["until-trigger"]
    naive = llg.gbnf_to_lark.gbnf_to_lark(gbnf)
    with pytest.raises(AssertionError):
        _walk_equal(tokenizer, gbnf, naive, DRIVES["until-trigger"], walks=0)
    m = _matcher(tokenizer, naive)
    assert m.consume_tokens(list(b"ab<|"))
    assert "x" not in _llg_allowed(m) and GbnfAcceptor(parse_gbnf(gbnf)).is_viable_prefix("ab<|x")


def test_an_enum_is_one_lexeme() -> None:
    plan = plan_lexemes(parse_gbnf(json_schema_to_grammar({"enum": [f"value-{i}" for i in range(10_000)]})))
    assert (plan.lexemes, plan.splits) == (1, 0)


def test_a_schema_object_is_one_lexeme() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                               "tags": {"type": "array", "items": {"type": "string"}}},
              "required": ["name", "age"]}
    plan = plan_lexemes(parse_gbnf(json_schema_to_grammar(schema)))
    assert plan.lexemes == 1


def test_only_what_free_text_can_read_into_is_split() -> None:
    conversion = gbnf_to_lark(parse_gbnf(TRICKY["until-trigger"]))
    lark = conversion.text
    assert "/\\x{3c}/ /\\x{7c}/ /tp/" not in lark and "/\\x{3c}/ /\\x{7c}/ /t/ /p/ /\\x{7c}/ /\\x{3e}/" in lark
    # after the trigger no free text can be alive: "[" [a-z]+ "]" stays one lexeme
    assert "L0: /\\x{5b}/ /[\\x{61}-\\x{7a}]/+ /\\x{5d}/" in lark


def test_right_linear_rules_become_left_recursion() -> None:
    """llguidance's Earley parser keeps an item per level of a right recursion for every character
    read: the until rules are rewritten as left recursion (the same language), whose items do not
    pile up."""
    lark = gbnf_to_lark(parse_gbnf(TRICKY["until-rules"])).text
    assert "r1_text: r2_text_text | r3_text_text1 | r4_text_text2\n" in lark
    assert 'r2_text_text: "" | r2_text_text /[^\\x{3c}]/ | r3_text_text1 /[^\\x{7c}\\x{3c}]/' in lark
    assert "/[^\\x{3c}]/ r1_text" not in lark


def test_over_the_work_bound_the_conversion_is_one_code_point_per_lexeme(monkeypatch: pytest.MonkeyPatch) -> None:
    import llamact.grammar.engines.to_lark as to_lark

    def over(*args: object, **kwargs: object) -> None:
        raise OverBudget("test bound")

    monkeypatch.setattr(to_lark, "plan_lexemes", over)
    grammar = parse_gbnf(TRICKY["self-extension"])
    conversion = gbnf_to_lark(grammar)
    assert conversion.fallback == "test bound" and conversion.text == gbnf_to_char_lark(grammar, "root", "{}")


def test_token_references_stay_unfit() -> None:
    with pytest.raises(CharLarkError, match="model tokens"):
        gbnf_to_lark(parse_gbnf("root ::= <[12]> [a-z]*"))
