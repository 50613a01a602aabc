"""llamact.peg (arena JSON and GBNF generation) against upstream's own code (the oracle).

Every parser arena the corpus holds (the arenas upstream's chat templates produce, each asked
for lazily and not) goes through ``load_arena`` -> ``arena_to_gbnf``: the grammar must be
byte-identical to the oracle's ``peg_grammar`` answer, and ``Arena.to_json()`` must give back the
JSON it was loaded from. Hand-made arenas cover what templates do not (every quantifier form,
two-digit automaton states, non-ASCII character classes, an empty delimiter), and malformed
arenas must be refused with PegArenaError where upstream refuses them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llamact.errors import LlamaException
from llamact.parity.corpus import Case, Corpus, build_corpus
from llamact.parity.oracle import OracleClient, OracleError
from llamact.peg import Arena, PegArenaError, arena_to_gbnf, load_arena

pytestmark = pytest.mark.parity

LLAMA_CPP = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp"
# templates whose arenas together hold every node kind (gbnf only appears in Gemma 4's)
FAST_TEMPLATES = ["GLM-4.6", "google-gemma-4-31B-it", "Qwen-Qwen3-0.6B"]


def _check_case(case: Case) -> None:
    parser = case.input["parser"]
    arena = load_arena(parser)
    source = json.loads(parser) if isinstance(parser, str) else parser
    assert json.loads(json.dumps(arena.to_json())) == source, f"{case.id}: arena JSON does not round-trip"
    assert arena_to_gbnf(arena, lazy=case.input["lazy"]) == case.expected, case.id


def _peg_cases(oracle: OracleClient, templates: list[str] | None) -> list[Case]:
    return build_corpus(oracle, LLAMA_CPP, templates=templates).cases.get("peg_grammar", [])


def test_template_arenas_fast_subset(oracle: OracleClient) -> None:
    cases = _peg_cases(oracle, FAST_TEMPLATES)
    assert len(cases) >= 10
    kinds = {p["type"] for case in cases for p in case.input["parser"]["parsers"]}
    assert {"ac", "until", "gbnf", "schema", "rule", "ref", "chars", "string", "tag"} <= kinds
    for case in cases:
        _check_case(case)


@pytest.mark.slow
def test_template_arenas_full_corpus(full_corpus: Corpus) -> None:
    cases = full_corpus.cases.get("peg_grammar", [])
    assert len(cases) >= 600
    for case in cases:
        _check_case(case)


# -- hand-made arenas ------------------------------------------------------------------------


def _rule(name: str, child: int, trigger: bool = False) -> dict[str, Any]:
    return {"type": "rule", "name": name, "child": child, "trigger": trigger}


def _chars(pattern: str, lo: int, hi: int) -> dict[str, Any]:
    return {"type": "chars", "pattern": pattern, "ranges": [{"start": 48, "end": 57}], "negated": False,
            "min_count": lo, "max_count": hi}


HAND_MADE: dict[str, dict[str, Any]] = {
    "quantifiers": {
        "parsers": [
            {"type": "literal", "literal": "a\"\\\n\t"},
            {"type": "sequence", "children": [0, 0]},
            {"type": "repetition", "child": 1, "min_count": 0, "max_count": 1},
            {"type": "repetition", "child": 0, "min_count": 0, "max_count": -1},
            {"type": "repetition", "child": 1, "min_count": 1, "max_count": -1},
            {"type": "repetition", "child": 0, "min_count": 3, "max_count": -1},
            {"type": "repetition", "child": 0, "min_count": 1, "max_count": 1},
            {"type": "repetition", "child": 0, "min_count": 4, "max_count": 4},
            {"type": "repetition", "child": 0, "min_count": 2, "max_count": 5},
            _chars("[0-9]", 0, 1), _chars("[0-9]", 0, -1), _chars("[0-9]", 1, -1), _chars("[0-9]", 2, -1),
            _chars("[0-9]", 1, 1), _chars("[0-9]", 3, 3), _chars("[0-9]", 1, 7),
            {"type": "start"}, {"type": "end"}, {"type": "any"}, {"type": "space"},
            {"type": "string", "delimiter": "'"},
            {"type": "and", "child": 0}, {"type": "not", "child": 0},
            {"type": "choice", "children": [1, 0, 20]},
            {"type": "choice", "children": [23, 18]},
            {"type": "sequence", "children": [16, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 19, 21, 22, 24, 1,
                                              17]},
        ],
        "rules": {},
        "root": 25,
    },
    "automata": {
        "parsers": [
            {"type": "until", "delimiters": ["</tool_call>", "<|im_end|>", "\u00e9\u4e2d\U0001f600-]", "ab"]},
            {"type": "ac", "child": 0, "delimiters": ["[END]", "\\x", "\r\n\u00ff", "abcabd"]},
            {"type": "ac", "child": 0, "delimiters": ["", "x"]},
            {"type": "until", "delimiters": []},
            {"type": "tag", "child": 0, "tag": "content"},
            {"type": "atomic", "child": 1},
            {"type": "gbnf", "child": 3, "grammar": "[a-z]+ \"!\""},
            {"type": "schema", "child": 4, "name": "args", "raw": True},
            {"type": "sequence", "children": [7, 5, 2, 6]},
            _rule("body", 8, trigger=True),
            {"type": "ref", "name": "body"},
            {"type": "literal", "literal": "<tool_call>"},
            {"type": "sequence", "children": [11, 10]},
            _rule("call", 12, trigger=True),
            {"type": "ref", "name": "call"},
            {"type": "choice", "children": [14, 3]},
            _rule("unused", 11),
        ],
        "rules": {"body": 9, "call": 13, "unused": 16},
        "root": 15,
    },
}


@pytest.mark.parametrize("name", sorted(HAND_MADE))
@pytest.mark.parametrize("lazy", [False, True])
def test_hand_made_arenas(oracle: OracleClient, name: str, lazy: bool) -> None:
    arena_json = HAND_MADE[name]
    expected = oracle.request("peg_grammar", parser=arena_json, lazy=lazy)
    assert not isinstance(expected, OracleError), expected
    arena = load_arena(arena_json)
    assert arena_to_gbnf(arena, lazy=lazy) == expected
    assert arena.to_json() == arena_json
    assert load_arena(json.dumps(arena_json)) == arena


MALFORMED: list[Any] = [
    {"rules": {}, "root": 0},
    {"parsers": [], "root": 0},
    {"parsers": [{"type": "epsilon"}], "rules": {}},
    {"parsers": [{"type": "bogus"}], "rules": {}, "root": 0},
    {"parsers": [{"literal": "x"}], "rules": {}, "root": 0},
    {"parsers": [{"type": "literal", "literal": 3}], "rules": {}, "root": 0},
    {"parsers": [{"type": "repetition", "child": 0, "min_count": 1}], "rules": {}, "root": 0},
    {"parsers": [{"type": "string", "delimiter": ""}], "rules": {}, "root": 0},
    {"parsers": [{"type": "ac", "child": 0, "delimiters": []}], "rules": {}, "root": 0},
    {"parsers": [{"type": "chars", "pattern": "[a]", "ranges": [{"start": 97}], "negated": False, "min_count": 1,
                  "max_count": 1}], "rules": {}, "root": 0},
    {"parsers": [{"type": "epsilon"}], "rules": {"r": 5}, "root": 0},
    {"parsers": [{"type": "epsilon"}], "rules": {}, "root": 3},
]


@pytest.mark.parametrize("index", range(len(MALFORMED)))
def test_malformed_arenas_are_refused(oracle: OracleClient, index: int) -> None:
    arena_json = MALFORMED[index]
    assert isinstance(oracle.request("peg_grammar", parser=arena_json, lazy=False), OracleError)
    with pytest.raises(PegArenaError) as info:
        load_arena(arena_json)
    assert isinstance(info.value, LlamaException)
    assert info.value.message.startswith("invalid PEG arena JSON: ")


def test_dangling_references_raise() -> None:
    arena = load_arena({"parsers": [{"type": "ref", "name": "missing"}, {"type": "sequence", "children": [0, 9]}],
                        "rules": {}, "root": 1})
    assert isinstance(arena, Arena)
    with pytest.raises(PegArenaError, match="Rule not found: missing"):
        arena_to_gbnf(arena)
    with pytest.raises(PegArenaError, match="out of range"):
        arena_to_gbnf(load_arena({"parsers": [{"type": "tag", "child": 4, "tag": "t"}], "rules": {}, "root": 0}))
