"""Focused checks of llamact.grammar's pieces: rule-name deduplication, integer ranges, GBNF
literal escaping, nlohmann number formatting, the builder and the schema model.

Expectations come from the oracle (upstream's own converter) or from an independent truth (the
set of integers a range grammar accepts, upstream's own test-json-schema.cpp vectors).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

from llamact.errors import LlamaUnsupportedException
from llamact.grammar import GrammarBuilder, gbnf_format_literal, json_schema_to_grammar, schema_from_json
from llamact.grammar.int_ranges import INT64_MAX, INT64_MIN, build_min_max_int
from llamact.grammar.json_value import dump, normalize
from llamact.parity.upstream_vectors import (
    json_schema_error_vectors,
    json_schema_may_be_string_vectors,
    json_schema_value_types_vectors,
)

LLAMA_CPP = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp"


def rules(grammar: str) -> dict[str, str]:
    out = {}
    for line in grammar.splitlines():
        name, _, body = line.partition(" ::= ")
        out[name] = body
    return out


# -- integer ranges: the accepted set is an independent truth ------------------------------------


def gbnf_to_regex(body: str) -> str:
    """The tiny GBNF subset build_min_max_int writes, as a Python regex."""
    out = []
    for tok in re.findall(r'"[^"]*"|\[[^\]]*\]|\{[^}]*\}|[()|]|\S', body):
        out.append(re.escape(tok[1:-1]) if tok.startswith('"') else tok)
    return "".join(out)


RANGES = [(0, 9), (1, 10), (5, 5), (10, 99), (12, 345), (-10, 10), (-100, -5), (-5, 0), (7, 1234), (0, 100000),
          (99, 101), (-1, 1), (1000, 1000)]


@pytest.mark.parametrize("lo,hi", RANGES)
def test_min_max_int_accepts_exactly_the_range(lo: int, hi: int) -> None:
    regex = re.compile(gbnf_to_regex(build_min_max_int(lo, hi)))
    for n in range(min(lo, -20) - 50, max(hi, 20) + 50):
        assert bool(regex.fullmatch(str(n))) == (lo <= n <= hi), n


UPSTREAM_MIN_BUG = pytest.mark.xfail(
    strict=True, reason="upstream's build_min_max_int forgets the length of a minimum whose tail starts with 0 "
    "(minimum 100 accepts 10); llamact keeps byte parity with it")


@pytest.mark.parametrize("lo", [0, 1, 7, 10, 37, pytest.param(100, marks=UPSTREAM_MIN_BUG), 999, -1, -5, -123])
def test_min_only_accepts_exactly_the_range(lo: int) -> None:
    regex = re.compile(gbnf_to_regex(build_min_max_int(lo, INT64_MAX)))
    for n in range(-1200, 1200):
        assert bool(regex.fullmatch(str(n))) == (n >= lo), n
    assert not regex.fullmatch("01") and not regex.fullmatch("-0" if lo > 0 else "007")


@pytest.mark.parametrize("hi", [0, 9, 100, -1, -42])
def test_max_only_accepts_exactly_the_range(hi: int) -> None:
    regex = re.compile(gbnf_to_regex(build_min_max_int(INT64_MIN, hi)))
    for n in range(-1200, 1200):
        assert bool(regex.fullmatch(str(n))) == (n <= hi), n


# -- the rest against the oracle -----------------------------------------------------------------


@pytest.mark.parity
@pytest.mark.parametrize("bounds", [{"minimum": 3}, {"maximum": -7}, {"minimum": -50, "maximum": 50},
                                    {"exclusiveMinimum": 0.5, "exclusiveMaximum": 1000}])
def test_int_range_rule_matches_oracle(oracle, bounds: dict[str, Any]) -> None:
    schema = {"type": "integer", **bounds}
    expected = rules(oracle.request("json_schema_to_grammar", schema=schema))["root"]
    doc = schema_from_json(schema)
    assert expected == "(" + build_min_max_int(doc.root.minimum, doc.root.maximum) + ")"  # type: ignore[attr-defined]


LITERALS = ["plain", 'quote " inside', "back\\slash", "new\nline\r", "tab\t", "\x00\x01\x1f\x7f",
            "caf\u00e9 \U0001f600", "]-[", ""]


@pytest.mark.parity
@pytest.mark.parametrize("text", LITERALS)
def test_string_literal_escaping_matches_oracle(oracle, text: str) -> None:
    expected = rules(oracle.request("json_schema_to_grammar", schema={"const": text}))["root"]
    assert gbnf_format_literal(dump(text)) == expected
    assert json_schema_to_grammar({"const": text}) == oracle.request("json_schema_to_grammar",
                                                                      schema={"const": text})


@pytest.mark.parity
@pytest.mark.parametrize("value", [0, -1, 2**63 - 1, -(2**63), 2**64 - 1, 2**64, 1.0, -0.0, 0.1, 1e15, 1e16, 1e-5,
                                   0.0001, 1.5e-7, 948448863428139.8, 5e-324, True, None, [1, "a"], {"k": [2.5]}])
def test_constant_formatting_matches_oracle(oracle, value: Any) -> None:
    expected = rules(oracle.request("json_schema_to_grammar", schema={"const": value}))["root"]
    assert gbnf_format_literal(dump(normalize(value))) == expected


@pytest.mark.parity
def test_dedup_naming_matches_oracle(oracle) -> None:
    """Properties whose names escape to the same rule name get numeric suffixes, equal bodies share."""
    props = {"x y": {"const": 1}, "x-y": {"const": 2}, "x!y": {"const": 1}, "x?y": {"const": 3}, "x.y": {"const": 2}}
    expected = rules(oracle.request("json_schema_to_grammar", schema={"type": "object", "properties": props}))
    builder = GrammarBuilder()
    names = [builder.add_rule(name, dump(schema["const"]).join('""')) for name, schema in props.items()]
    assert names == ["x-y", "x-y0", "x-y", "x-y1", "x-y0"]
    assert {n: expected[n] for n in names} == {n: rules(builder.grammar())[n] for n in names}


@pytest.mark.parity
def test_builder_add_schema_equals_converter(oracle) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^[a-z]{2,3}$"}},
              "additionalProperties": {"type": "integer"}}
    builder = GrammarBuilder()
    assert builder.add_json_schema("root", schema) == "root"
    assert builder.grammar() == oracle.request("json_schema_to_grammar", schema=schema)


def test_unsupported_pattern_warns_and_accepts_any_string(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="llamact.grammar"):
        grammar = json_schema_to_grammar({"type": "string", "pattern": "^\\d+$"})
    assert "root ::= string" in grammar.splitlines()
    assert any("unsupported escape: \\d" in r.getMessage() for r in caplog.records)


def test_invalid_pattern_names_its_path() -> None:
    with pytest.raises(LlamaUnsupportedException) as info:
        json_schema_to_grammar({"type": "object", "properties": {"p": {"type": "string", "pattern": "^(a$"}}})
    assert "Invalid pattern ^(a$: unbalanced parentheses" in info.value.message
    assert info.value.details["path"] == "#/properties/p/pattern"


def test_schema_error_names_keyword_and_pointer() -> None:
    with pytest.raises(LlamaUnsupportedException) as info:
        json_schema_to_grammar({"type": "object", "properties": {"foo": {"type": "text"}}})
    assert info.value.details["keyword"] == "type"
    assert "#/properties/foo/type" in info.value.message


# -- the schema model against upstream's test-json-schema.cpp vectors ---------------------------


@pytest.mark.parametrize("vec", json_schema_error_vectors(LLAMA_CPP), ids=lambda v: f"line{v.line}")
def test_model_errors_match_upstream_vectors(vec) -> None:
    with pytest.raises(LlamaUnsupportedException) as info:
        schema_from_json(vec.schema)
    assert vec.message_contains in info.value.message


@pytest.mark.parametrize("vec", json_schema_may_be_string_vectors(LLAMA_CPP), ids=lambda v: f"line{v.line}")
def test_model_may_be_string_matches_upstream_vectors(vec) -> None:
    assert schema_from_json(vec.schema).root.may_be_string() == vec.expected


@pytest.mark.parametrize("vec", json_schema_value_types_vectors(LLAMA_CPP), ids=lambda v: f"line{v.line}")
def test_model_value_types_match_upstream_vectors(vec) -> None:
    assert schema_from_json(vec.schema).root.value_types() == frozenset(vec.expected)
