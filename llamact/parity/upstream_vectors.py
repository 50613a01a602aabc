"""Upstream llama.cpp's own unit-test vectors, read as plain data from the vendored C++ test sources.

What enters: the path of a llama.cpp tree (the vendored pin, ``vendor/llama.cpp``). Nothing is
compiled or run: the C++ test files are read as text, tokenized by a small lexer for the subset of
C++ they use (string literals with every escape form, raw strings, adjacent-literal concatenation,
backslash-newline splices, comments, preprocessor lines, numbers) and the data arguments of the
test calls are evaluated by a tiny interpreter for ``common_json`` construction.

What leaves:

* :func:`jinja_vectors` -- every ``test_template(t, NAME, TEMPLATE, VARS, EXPECT);`` call of
  ``tests/test-jinja.cpp`` as a :class:`JinjaVector` (the vars as a JSON-compatible ``dict`` in
  source key order). Calls inside comments are not calls and are not returned. The functions that
  only run outside python mode (hasher, stats, caps, string parts, fuzzing) hold no
  ``test_template`` call, so every vector runs in upstream's normal (C++) mode.
* :func:`json_schema_vectors` -- every ``test({STATUS, NAME, SCHEMA, GRAMMAR})`` case of
  ``tests/test-json-schema-to-grammar.cpp`` as a :class:`SchemaVector`; :func:`normalize_grammar`
  is upstream's ``trim`` used by ``TestCase::verify`` on both sides of the comparison.
* :func:`json_schema_error_vectors`, :func:`json_schema_may_be_string_vectors`,
  :func:`json_schema_value_types_vectors` -- the plain-data checks of ``tests/test-json-schema.cpp``
  (``assert_error(t, SCHEMA, NEEDLE)``, and the ``check(t, SCHEMA, EXPECTED)`` calls of
  ``test_may_be_string`` / ``test_value_types``). The rest of that file asserts on the C++ node
  structure (``root<common_chat_schema_integer>(...)``, field by field) and is code, not data.

``VARS`` follow ``common_json`` (tests/test-jinja.cpp has ``using json = common_json;``), whose
brace rule is simpler than nlohmann's: every non-empty braced list in value position is an object
whose elements are ``{key, value}`` pairs (``{{"a", 1}}`` is ``{"a": 1}``; an array needs
``json::array({...})``, a bare ``{"a", 1}`` does not compile). Empty braces are ``null`` where a
``common_json`` or an array element is initialised from them and ``{}`` (an empty object) as the
value of a pair, which is what overload resolution picks for ``common_json`` /
``common_json_value`` / ``common_json_item``. Duplicate keys keep the first position and the last
value (ordered_json's ``operator[]``), as a Python dict does.

Anything the extractor does not understand raises :class:`UpstreamVectorError` naming the file and
line: a call site is never silently dropped, so the number of vectors is the number of calls.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cpp_source import (
    CallSite,
    Cursor,
    Token,
    UpstreamVectorError,
    call_sites,
    end_statement,
    parse_json_text,
    read_source,
    tokenize_cpp,
)

__all__ = [
    "JINJA_TEST_FILE",
    "JSON_SCHEMA_TEST_FILE",
    "JSON_SCHEMA_TO_GRAMMAR_TEST_FILE",
    "JinjaVector",
    "SchemaErrorVector",
    "SchemaMayBeStringVector",
    "SchemaValueTypesVector",
    "SchemaVector",
    "Token",
    "UpstreamVectorError",
    "jinja_vectors",
    "json_schema_error_vectors",
    "json_schema_may_be_string_vectors",
    "json_schema_value_types_vectors",
    "json_schema_vectors",
    "normalize_grammar",
    "tokenize_cpp",
]

JINJA_TEST_FILE = "tests/test-jinja.cpp"
JSON_SCHEMA_TO_GRAMMAR_TEST_FILE = "tests/test-json-schema-to-grammar.cpp"
JSON_SCHEMA_TEST_FILE = "tests/test-json-schema.cpp"

# common_chat_schema::value_type in its declaration order (json-schema.h), as type_name() spells them
SCHEMA_VALUE_TYPES: tuple[str, ...] = ("null", "boolean", "number", "integer", "string", "array", "object")



# -------------------------------------------------------------------------------------------------
# vectors
# -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JinjaVector:
    """One ``test_template`` call: render ``template`` with ``context`` as globals, expect ``expected``."""

    name: str
    group: str  # the enclosing ``static void test_xxx(testing & t)``
    template: str
    context: dict[str, Any]
    expected: str
    line: int  # 1-based line of the ``test_template`` token


@dataclass(frozen=True)
class SchemaVector:
    """One ``test({...})`` case of test-json-schema-to-grammar.cpp.

    ``schema_text`` and ``expected_grammar`` are the literals' values exactly (the runner parses
    ``schema_text`` with ``common_json::parse`` and calls ``json_schema_to_grammar(schema, true)``;
    ``std::invalid_argument`` means FAILURE). Upstream compares ``trim(actual) == trim(expected)``.
    """

    name: str
    expect_success: bool
    schema_text: str
    expected_grammar: str
    line: int

    @property
    def schema(self) -> Any:
        return parse_json_text(self.schema_text)

    @property
    def normalized_expected(self) -> str:
        return normalize_grammar(self.expected_grammar)


@dataclass(frozen=True)
class SchemaErrorVector:
    """``assert_error(t, SCHEMA, NEEDLE)``: parsing SCHEMA throws, and ``what()`` contains NEEDLE."""

    test: str  # the enclosing ``t.test("...")`` name
    group: str
    schema_text: str
    message_contains: str
    line: int

    @property
    def schema(self) -> Any:
        return parse_json_text(self.schema_text)


@dataclass(frozen=True)
class SchemaMayBeStringVector:
    """``check(t, SCHEMA, EXPECTED)`` in ``test_may_be_string``: ``root->may_be_string() == EXPECTED``."""

    test: str
    schema_text: str
    expected: bool
    line: int

    @property
    def schema(self) -> Any:
        return parse_json_text(self.schema_text)


@dataclass(frozen=True)
class SchemaValueTypesVector:
    """``check(t, SCHEMA, {TYPES})`` in ``test_value_types``: ``root->value_types()`` is exactly
    ``expected`` (type names in :data:`SCHEMA_VALUE_TYPES` order)."""

    test: str
    schema_text: str
    expected: tuple[str, ...]
    line: int

    @property
    def schema(self) -> Any:
        return parse_json_text(self.schema_text)


def normalize_grammar(text: str) -> str:
    """Upstream's ``trim`` (test-json-schema-to-grammar.cpp): strip ``" \\n\\r\\t"`` at both ends,
    then drop the spaces and tabs that start each line (``std::regex("(^|\\n)[ \\t]+")``, where
    ``^`` is the start of the text only)."""
    ws = " \n\r\t"
    start = 0
    while start < len(text) and text[start] in ws:
        start += 1
    end = len(text)
    while end > start and text[end - 1] in ws:
        end -= 1
    return re.sub(r"(^|\n)[ \t]+", r"\1", text[start:end])


# -------------------------------------------------------------------------------------------------
# the extractors
# -------------------------------------------------------------------------------------------------


def _calls(llama_cpp_dir: Path, file: str, callee: str) -> Iterator[tuple[CallSite, Cursor, Token]]:
    """Each call of ``callee`` in ``file``: its site, a cursor just past its ``(`` and the callee's
    token (whose line the vectors record)."""
    tokens, rel = read_source(llama_cpp_dir, file)
    for site in call_sites(tokens, callee, rel):
        cur = Cursor(tokens, site.index, rel, f"{callee} call at line {tokens[site.index].line}")
        call = cur.next()
        cur.expect("(")
        yield site, cur, call


def jinja_vectors(llama_cpp_dir: Path) -> list[JinjaVector]:
    """Every ``test_template(t, NAME, TEMPLATE, VARS, EXPECT);`` of tests/test-jinja.cpp, in order."""
    out: list[JinjaVector] = []
    for site, cur, call in _calls(llama_cpp_dir, JINJA_TEST_FILE, "test_template"):
        cur.expect("t")
        cur.expect(",")
        name = cur.string()
        cur.expect(",")
        template = cur.string()
        cur.expect(",")
        context = cur.json_value("json")
        cur.expect(",")
        expected = cur.string()
        end_statement(cur)
        if not isinstance(context, dict):
            raise cur.error("the vars are not a JSON object", call)
        out.append(JinjaVector(name, site.group, template, context, expected, call.line))
    return out


def json_schema_vectors(llama_cpp_dir: Path) -> list[SchemaVector]:
    """Every ``test({STATUS, NAME, SCHEMA, GRAMMAR});`` of tests/test-json-schema-to-grammar.cpp.

    The ``TestCase tc {...}`` built by hand in ``main`` ("sub-schema $ref") is not a ``test`` call:
    it converts a sub-schema through the builder API, not a JSON schema, and is not returned.
    """
    out: list[SchemaVector] = []
    for _, cur, call in _calls(llama_cpp_dir, JSON_SCHEMA_TO_GRAMMAR_TEST_FILE, "test"):
        cur.expect("{")
        status = cur.next()
        if status.kind != "ident" or status.text not in ("SUCCESS", "FAILURE"):
            raise cur.error("expected SUCCESS or FAILURE", status)
        cur.expect(",")
        name = cur.string()
        cur.expect(",")
        schema_text = cur.string()
        cur.expect(",")
        grammar = cur.string()
        if cur.at(","):
            cur.next()
        cur.expect("}")
        end_statement(cur)
        out.append(SchemaVector(name, status.text == "SUCCESS", schema_text, grammar, call.line))
    return out


def json_schema_error_vectors(llama_cpp_dir: Path) -> list[SchemaErrorVector]:
    """Every ``assert_error(t, SCHEMA, NEEDLE);`` of tests/test-json-schema.cpp."""
    out: list[SchemaErrorVector] = []
    for site, cur, call in _calls(llama_cpp_dir, JSON_SCHEMA_TEST_FILE, "assert_error"):
        cur.expect("t")
        cur.expect(",")
        schema_text = cur.string()
        cur.expect(",")
        needle = cur.string()
        end_statement(cur)
        out.append(SchemaErrorVector(site.subtest, site.group, schema_text, needle, call.line))
    return out


def _check_calls(llama_cpp_dir: Path, group: str,
                 read_expected: Callable[[Cursor], Any]) -> list[tuple[str, str, Any, int]]:
    out: list[tuple[str, str, Any, int]] = []
    for site, cur, call in _calls(llama_cpp_dir, JSON_SCHEMA_TEST_FILE, "check"):
        if site.group != group:
            continue
        cur.expect("t")
        cur.expect(",")
        schema_text = cur.string()
        cur.expect(",")
        expected = read_expected(cur)
        end_statement(cur)
        out.append((site.subtest, schema_text, expected, call.line))
    return out


def json_schema_may_be_string_vectors(llama_cpp_dir: Path) -> list[SchemaMayBeStringVector]:
    """The ``check(t, SCHEMA, true|false)`` calls of ``test_may_be_string`` (tests/test-json-schema.cpp)."""

    def read_bool(cur: Cursor) -> bool:
        tok = cur.next()
        if tok.kind != "ident" or tok.text not in ("true", "false"):
            raise cur.error("expected true or false", tok)
        return tok.text == "true"

    return [SchemaMayBeStringVector(test, schema, expected, line)
            for test, schema, expected, line in _check_calls(llama_cpp_dir, "test_may_be_string", read_bool)]


def json_schema_value_types_vectors(llama_cpp_dir: Path) -> list[SchemaValueTypesVector]:
    """The ``check(t, SCHEMA, TYPES)`` calls of ``test_value_types`` (tests/test-json-schema.cpp);
    TYPES is ``{ common_chat_schema::TYPE_X, ... }`` or ``common_chat_schema::type_set::all()``."""

    def type_name(cur: Cursor) -> str:
        cur.expect("common_chat_schema")
        cur.expect("::")
        tok = cur.next()
        name = tok.text[5:].lower() if tok.kind == "ident" and tok.text.startswith("TYPE_") else ""
        if name not in SCHEMA_VALUE_TYPES:
            raise cur.error("expected common_chat_schema::TYPE_...", tok)
        return name

    def read_types(cur: Cursor) -> tuple[str, ...]:
        names: set[str] = set()
        if cur.at("{"):
            cur.next()
            while not cur.at("}"):
                names.add(type_name(cur))
                if not cur.at("}"):
                    cur.expect(",")
            cur.expect("}")
        else:
            for text in ("common_chat_schema", "::", "type_set", "::", "all", "(", ")"):
                cur.expect(text)
            names = set(SCHEMA_VALUE_TYPES)
        return tuple(t for t in SCHEMA_VALUE_TYPES if t in names)

    return [SchemaValueTypesVector(test, schema, expected, line)
            for test, schema, expected, line in _check_calls(llama_cpp_dir, "test_value_types", read_types)]
