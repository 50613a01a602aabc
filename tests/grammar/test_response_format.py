"""response_format shapes (docs/design.md deviation 8: unrecognised shapes raise before generation)."""

from __future__ import annotations

import pytest

from llamact.errors import LlamaUnsupportedException
from llamact.grammar.response_format import ResponseFormat, parse_response_format

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ResponseFormat("text")),
        ({"type": "text"}, ResponseFormat("text")),
        ({"type": "json_object"}, ResponseFormat("json_object", {})),
        ({"type": "json_object", "schema": SCHEMA}, ResponseFormat("json_object", SCHEMA)),
        ({"type": "json_schema", "json_schema": {"schema": SCHEMA}}, ResponseFormat("json_schema", SCHEMA)),
        (
            {"type": "json_schema", "json_schema": {"name": "n", "description": "d", "strict": True, "schema": SCHEMA}},
            ResponseFormat("json_schema", SCHEMA, "n", "d", True),
        ),
        (SCHEMA, ResponseFormat("json_schema", SCHEMA)),  # the plain-schema shortcut
        ({"type": ["string", "null"]}, ResponseFormat("json_schema", {"type": ["string", "null"]})),
        ({"anyOf": [{"type": "string"}]}, ResponseFormat("json_schema", {"anyOf": [{"type": "string"}]})),
    ],
)
def test_recognised_shapes(value: object, expected: ResponseFormat) -> None:
    got = parse_response_format(value)
    assert got == expected
    assert got.constrained == (expected.schema is not None)


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("json", "must be a JSON object"),
        ([SCHEMA], "must be a JSON object"),
        ({"type": "xml"}, "not a recognised shape"),
        ({"type": "regex", "pattern": "a+"}, "not a recognised shape"),
        ({}, "not a recognised shape"),
        ({"type": 7}, "not a recognised shape"),
        ({"type": "json_schema"}, 'needs a "json_schema" object'),
        ({"type": "json_schema", "json_schema": {"name": "x"}}, 'needs a "schema"'),
        ({"type": "json_schema", "json_schema": {"schema": "{}"}}, "json_schema.schema must be a JSON object"),
        ({"type": "json_schema", "json_schema": {"schema": {}, "strict": "yes"}}, "strict"),
        ({"type": "json_schema", "json_schema": {"schema": {}, "name": 3}}, "name"),
        ({"type": "json_object", "schema": []}, "schema must be a JSON object"),
        ({"type": "json_object", "json_schema": {}}, 'takes only "schema"'),
        ({"type": "text", "schema": {}}, 'takes no other fields'),
    ],
)
def test_unrecognised_shapes_raise_before_generation(value: object, needle: str) -> None:
    with pytest.raises(LlamaUnsupportedException) as info:
        parse_response_format(value)
    assert needle in str(info.value)
    assert "accepted shapes" in str(info.value)  # the message says what would work


def test_text_has_no_grammar() -> None:
    assert parse_response_format({"type": "text"}).grammar() is None


def test_a_schema_the_converter_cannot_represent_raises_before_generation() -> None:
    fmt = parse_response_format({"type": "json_schema", "json_schema": {"schema": {"type": "bogus"}}})
    with pytest.raises(LlamaUnsupportedException) as info:
        fmt.grammar()
    assert "bogus" in str(info.value)


def test_a_representable_schema_gives_its_grammar() -> None:
    from llamact.grammar import json_schema_to_grammar

    fmt = parse_response_format({"type": "json_object", "schema": SCHEMA})
    assert fmt.grammar() == json_schema_to_grammar(SCHEMA)


def test_a_schema_whose_grammar_would_hang_llama_cpp_is_refused() -> None:
    # upstream converts this to `[^"\\\\] ...{5,2}`, on which llama.cpp's grammar parser loops
    fmt = parse_response_format({"type": "string", "minLength": 5, "maxLength": 2})
    with pytest.raises(LlamaUnsupportedException, match="cannot use"):
        fmt.grammar()
