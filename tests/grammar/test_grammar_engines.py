"""The grammar seam without a model: the choice of engine, the GBNF -> Lark conversion (one code point
per lexeme), lazy triggers read as llama-grammar.cpp reads them, llguidance's limits in place of
llama.cpp's. (With a model: tests/engine/test_grammar_engines_model.py; the differential proof:
tests/engine/test_grammar_engines_equality.py.)"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from llamact import GenerationParams
from llamact.engine import grammar_engines as glue
from llamact.errors import LlamaInferenceException
from llamact.grammar import json_schema_to_grammar, parse_gbnf
from llamact.grammar.engines import (
    ENGINE_NAMES,
    PROVEN_CLASSES,
    LazyMatcher,
    TriggerPatternError,
    check_engine_name,
    compile_trigger_patterns,
    engine_limits,
    grammar_class,
)
from llamact.grammar.engines.to_lark import CharLarkError, gbnf_to_char_lark
from llamact.grammar.limits import GrammarLimitError, check_grammar_limits, default_limits


def test_engine_names_are_checked_where_they_are_set() -> None:
    assert ENGINE_NAMES == ("auto", "llguidance", "llama")
    assert GenerationParams().grammar_engine == "auto"
    for name in ENGINE_NAMES:
        assert check_engine_name(name) == name
        assert GenerationParams(grammar_engine=name).grammar_engine == name
    with pytest.raises(LlamaInferenceException, match="grammar_engine must be one of auto, llguidance, llama"):
        GenerationParams(grammar_engine="xgrammar")


def test_grammar_classes() -> None:
    assert grammar_class("template", lazy=True) == "template-lazy"
    assert grammar_class("template", lazy=False) == "template"
    assert grammar_class("user", lazy=False) == "user"
    assert PROVEN_CLASSES <= {"template-lazy", "template", "user"}


def test_auto_runs_template_grammars_on_llguidance_and_a_callers_on_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 42: the template classes (tool calls under every tool_choice, response_format) are proven
    equal and their suites pass on llguidance, so ``auto`` takes it; a caller's own grammar stays on
    llama.cpp's engine (deviation 20 aside, its limits are the ones the caller wrote for)."""
    assert PROVEN_CLASSES == {"template-lazy", "template"}
    monkeypatch.setattr(glue, "PROVEN_CLASSES", PROVEN_CLASSES)   # the shipped one, whatever the run's engine
    for cls in ("template-lazy", "template"):
        choice = glue.choose_grammar_engine("auto", cls)
        assert choice.engine == "llguidance", choice
    assert glue.choose_grammar_engine("auto", "user").engine == "llama"


def test_every_lexeme_is_one_code_point() -> None:
    """A literal becomes its characters and a class one regex: no lexeme can grow past another's
    boundary (llguidance's lexer is greedy; llama.cpp's grammar has none)."""
    lark = gbnf_to_char_lark(parse_gbnf('root ::= "<|tools|>" x | [^<] root\nx ::= [a-zé]{2,3} "€"'), "root",
                             '{"no_forcing": true}')
    assert lark.splitlines()[0] == '%llguidance {"no_forcing": true}'
    assert "start: /\\x{3c}/ /\\x{7c}/ /\\x{74}/" in lark
    assert "/[\\x{61}-\\x{7a}\\x{e9}]/{2,3} /\\x{20ac}/" in lark
    assert "/[^\\x{3c}]/ start" in lark
    body = "\n".join(lark.splitlines()[2:])
    assert '"' not in body.replace('""', "")   # no string lexeme: every char is a one-character regex


def test_what_lark_cannot_say_is_refused_for_this_engine() -> None:
    with pytest.raises(CharLarkError, match="model tokens"):
        gbnf_to_char_lark(parse_gbnf("root ::= <[12]> [a-z]*"))
    with pytest.raises(CharLarkError, match="U\\+110000"):
        gbnf_to_char_lark(parse_gbnf('root ::= "\\U00110000"'))


def test_empty_alternatives_and_bounded_repeats() -> None:
    lark = gbnf_to_char_lark(parse_gbnf('root ::= ( | "a" ) "b"{0} "c"?  [0-9]{3,} x\nx ::= '))
    assert 'start: ("" | /\\x{61}/) /\\x{63}/? /[\\x{30}-\\x{39}]/{3,} r1_x' in lark
    assert "r1_x: " in lark


def test_llguidance_keeps_size_and_nesting_limits_only() -> None:
    """llama.cpp's per-token costs (alternatives, expanded elements) do not bind llguidance, whose own
    parser limits do; the text's size and nesting still bound the front end's parse."""
    limits = engine_limits(default_limits())
    assert limits.max_alternatives is None and limits.max_elements is None
    assert limits.max_bytes == default_limits().max_bytes and limits.max_depth == default_limits().max_depth
    enum = json_schema_to_grammar({"enum": [f"value-{i}" for i in range(2000)]})
    with pytest.raises(GrammarLimitError, match="max_alternatives"):
        check_grammar_limits(enum)
    check_grammar_limits(enum, limits)
    with pytest.raises(GrammarLimitError, match="max_depth"):
        check_grammar_limits("root ::= " + "(" * 2000 + '"a"' + ")" * 2000, limits)


class _Recorder:
    """An inner matcher that records what it read."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.data: list[bytes] = []

    def allows(self, token: int) -> bool:
        return token == 7

    def allowed(self) -> np.ndarray:
        return np.arange(10) == 7

    def accept(self, token: int) -> None:
        self.tokens.append(token)

    def accept_bytes(self, data: bytes) -> None:
        self.data.append(data)

    def reset(self) -> None:
        self.tokens, self.data = [], []

    def copy(self) -> _Recorder:
        return self


PIECES = {1: b"Sure, ", 2: b"<tool", 3: b"_call>{", 4: b"<tool_call>", 5: b"x"}


def _lazy(patterns: tuple[str, ...], tokens: frozenset[int] = frozenset()) -> tuple[LazyMatcher, _Recorder]:
    inner = _Recorder()
    return LazyMatcher(inner, 10, PIECES.__getitem__, compile_trigger_patterns(patterns), tokens), inner


def test_a_lazy_grammar_allows_everything_until_its_trigger() -> None:
    lazy, inner = _lazy((r"[\s\S]*?(<tool_call>)[\s\S]*",))
    assert lazy.allows(3) and lazy.allowed().all()
    lazy.accept(1)
    lazy.accept(2)
    assert lazy.awaiting and inner.data == []
    lazy.accept(3)   # "<tool" + "_call>{" completes the trigger: the grammar reads from the group on
    assert not lazy.awaiting and inner.data == [b"<tool_call>{"]
    assert not lazy.allows(3) and lazy.allows(7) and lazy.allowed().sum() == 1
    lazy.accept(5)
    assert inner.tokens == [5]


def test_a_trigger_token_is_read_whole() -> None:
    lazy, inner = _lazy((), frozenset({4}))
    lazy.accept(1)
    lazy.accept(4)
    assert not lazy.awaiting and inner.tokens == [4] and inner.data == []


def test_an_anchored_pattern_is_tried_whole_first_then_searched() -> None:
    # llama_grammar_trigger_pattern::find: ^...$ as a full match, then a search; no group -> the match
    lazy, inner = _lazy(("^Sure, <tool_call>{$",))
    for token in (1, 4):
        lazy.accept(token)
    assert lazy.awaiting
    lazy, inner = _lazy(("<tool",))
    lazy.accept(1)
    lazy.accept(2)
    assert inner.data == [b"<tool"]


def test_a_pattern_python_cannot_read_is_refused() -> None:
    with pytest.raises(TriggerPatternError):
        compile_trigger_patterns(("(?<name>x)[",))


def test_the_choice_is_logged_once_per_grammar(caplog: pytest.LogCaptureFixture) -> None:
    from llamact.grammar.engines import EngineChoice, log_choice

    with caplog.at_level(logging.INFO, logger="llamact.grammar"):
        for _ in range(3):
            log_choice('root ::= "once"', EngineChoice("llama", "a reason"))
    assert [r.getMessage() for r in caplog.records].count("grammar engine llama (15 bytes of GBNF): a reason") == 1


def test_saved_params_are_checked_with_their_grammar_engines_limits() -> None:
    """``check_params`` (a saved session's settings, read back) checks a grammar against the limits of
    the engine it names: an enum over llama.cpp's alternatives limit is refused for ``llama`` and
    taken for ``llguidance``, whose own parser limits bound it (the merge with main's check once
    applied llama.cpp's limits to every grammar there)."""
    from llamact import GenerationParams
    from llamact.engine.sampling import check_params
    from llamact.grammar.limits import GrammarLimitError

    enum = "root ::= " + " | ".join(f'"v{i}"' for i in range(2000))
    check_params(GenerationParams(grammar=enum, grammar_engine="llguidance"), 49152)
    with pytest.raises(GrammarLimitError, match="alternatives"):
        check_params(GenerationParams(grammar=enum, grammar_engine="llama"), 49152)
