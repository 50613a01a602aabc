"""Faithfulness of llamact.parity.upstream_vectors: upstream's C++ unit-test vectors as Python data.

Three kinds of evidence that the extraction is right:

* counts: the number of vectors equals an independent textual count of the call sites (a grep,
  minus the commented-out lines), so no call is dropped or invented;
* spot checks: vectors compared with literal values read by hand from the C++ files, chosen for
  the tricky parts (line continuations, unicode escapes and UTF-8 text, nested arrays/objects,
  float vs integer, key order, raw strings), plus synthetic C++ exercising the rest of the lexer
  (raw-string delimiters, splices, octal/hex/universal escapes, comments, json::parse, errors);
* the oracle (upstream's own code): every jinja vector renders to its expected text and every
  schema vector converts to its expected grammar (after upstream's ``trim``) or fails as upstream
  expects. A wrong extraction would show as a mismatch here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llamact.parity.oracle import OracleClient, OracleError
from llamact.parity.upstream_vectors import (
    JINJA_TEST_FILE,
    JSON_SCHEMA_TEST_FILE,
    JSON_SCHEMA_TO_GRAMMAR_TEST_FILE,
    JinjaVector,
    SchemaErrorVector,
    SchemaVector,
    UpstreamVectorError,
    jinja_vectors,
    json_schema_error_vectors,
    json_schema_may_be_string_vectors,
    json_schema_value_types_vectors,
    json_schema_vectors,
    normalize_grammar,
)

# Vectors upstream's own harness skips: test_template_cpp catches jinja::not_implemented_exception
# and calls t.skip(). The oracle must refuse exactly these, with that exception (runtime_error,
# "NotImplemented: ..."); every other vector must render to its expected text.
UPSTREAM_NOT_IMPLEMENTED: dict[str, str] = {
    "tojson sort_keys=true": "tojson sort_keys=true not implemented",
    "is sameas": "sameas test not implemented",
    "is escaped": "escaped test not implemented",
    "is filter": "filter test not implemented",
    "string.replace() with count": "String replace with count argument not implemented",
    "string.format() manual numbering": "format() only supports simple '{}' placeholders",
    "string.format() named fields": "format() only supports simple '{}' placeholders",
    "string.format() escaped braces": "format() only supports simple '{}' placeholders",
    "array|map with filter": "map: filter-mapping not implemented",
    "array|min attribute": "min: attribute not implemented",
    "array|max attribute": "max: attribute not implemented",
}


@pytest.fixture(scope="module")
def upstream(repo_root: Path) -> Path:
    return repo_root / "vendor" / "llama.cpp"


@pytest.fixture(scope="module")
def jinja(upstream: Path) -> list[JinjaVector]:
    return jinja_vectors(upstream)


@pytest.fixture(scope="module")
def schemas(upstream: Path) -> list[SchemaVector]:
    return json_schema_vectors(upstream)


@pytest.fixture(scope="module")
def schema_errors(upstream: Path) -> list[SchemaErrorVector]:
    return json_schema_error_vectors(upstream)


def _by_name(vectors: list[JinjaVector], name: str) -> JinjaVector:
    found = [v for v in vectors if v.name == name]
    assert len(found) == 1, f"{len(found)} vectors named {name!r}"
    return found[0]


def _uncommented_count(text: str, pattern: str) -> int:
    """Lines holding ``pattern`` that are not ``//`` comments (the files have no ``/*`` comments)."""
    assert "/*" not in text
    count = 0
    for line in text.splitlines():
        pos = line.find(pattern)
        if pos >= 0 and "//" not in line[:pos]:
            count += line.count(pattern)
    return count


# -- counts ----------------------------------------------------------------------------------------


def test_jinja_count_matches_the_call_sites(upstream: Path, jinja: list[JinjaVector]) -> None:
    text = (upstream / JINJA_TEST_FILE).read_text(encoding="utf-8")
    all_calls = text.count("test_template(t,")
    live_calls = _uncommented_count(text, "test_template(t,")
    assert all_calls - live_calls == 1  # "array.insert()", commented out upstream
    assert len(jinja) == live_calls
    assert len(jinja) == 290  # at the pin
    assert "array.insert()" not in {v.name for v in jinja}
    # every vector comes from its own call line, in file order
    lines = [v.line for v in jinja]
    assert lines == sorted(set(lines))
    source_lines = text.splitlines()
    assert all(source_lines[line - 1].strip().startswith("test_template(t,") for line in lines)
    # the functions that run only outside python mode hold no test_template call
    groups = {v.group for v in jinja}
    assert groups.isdisjoint({"test_hasher", "test_stats", "test_caps", "test_string_parts", "test_fuzzing"})
    assert len(groups) == 14


def test_schema_counts_match_the_call_sites(upstream: Path, schemas: list[SchemaVector],
                                            schema_errors: list[SchemaErrorVector]) -> None:
    text = (upstream / JSON_SCHEMA_TO_GRAMMAR_TEST_FILE).read_text(encoding="utf-8")
    assert len(schemas) == _uncommented_count(text, "test({") == 81
    statuses = re.findall(r"test\(\{\s*(SUCCESS|FAILURE)\s*,", text)
    assert [s == "SUCCESS" for s in statuses] == [v.expect_success for v in schemas]
    assert sum(not v.expect_success for v in schemas) == 3

    text = (upstream / JSON_SCHEMA_TEST_FILE).read_text(encoding="utf-8")
    assert len(schema_errors) == _uncommented_count(text, "assert_error(t,") == 22
    may_be = text[text.index("static void test_may_be_string"):text.index("static std::string dump(")]
    assert len(json_schema_may_be_string_vectors(upstream)) == may_be.count("check(t,") == 16
    value_types = text[text.index("static void test_value_types"):text.index("static void test_errors")]
    assert len(json_schema_value_types_vectors(upstream)) == value_types.count("check(t,") == 11


# -- spot checks against the C++ literals ------------------------------------------------------------


def test_jinja_spot_checks(jinja: list[JinjaVector]) -> None:
    v = jinja[0]
    assert (v.name, v.group) == ("trim_blocks removes newline after tag", "test_whitespace_control")
    assert v.template == "{% if true %}\nhello\n{% endif %}\n"
    assert v.context == {}
    assert v.expected == "hello\n"

    v = _by_name(jinja, "for loop with trim_blocks")
    assert v.context == {"items": [1, 2, 3]}
    assert v.expected == "1\n2\n3\n"

    # {{"data", {...}}}: a braced pair value is an object; json::array with a braced object inside
    v = _by_name(jinja, "tojson ensure_ascii=true nested object")
    assert v.group == "test_filters"
    assert v.context == {"data": {"text": "\u2713", "items": ["\u00e9", {"snowman": "\u2603"}]}}
    assert v.expected == '{"text": "\\u2713", "items": ["\\u00e9", {"snowman": "\\u2603"}]}'

    # UTF-8 in the source (an astral character) and \n inside a value
    v = _by_name(jinja, "tojson ensure_ascii=true preserves existing escapes")
    assert v.context == {"data": {"emoji": "\U0001F600", "line": "a\nb"}}
    assert v.expected == '{"emoji": "\\ud83d\\ude00", "line": "a\\nb"}'

    # key order is the source order, not sorted
    v = _by_name(jinja, "tojson sort_keys=true")
    assert list(v.context["data"]) == ["b", "a"]
    assert v.expected == '{"a": 1, "b": 2}'

    # backslash-newline continuations inside one string literal
    v = _by_name(jinja, "macro with caller")
    assert v.group == "test_macros"
    assert v.template.startswith(
        "{%- macro nest_dict(o, i, ff='') %}\n  {{- caller(ff) }}\n  {%- for k, v in o|items %}\n"
    )
    assert v.template.endswith("{{- f + ' {' }}\n{% endcall %}\n{{- '}' }}")
    assert "\\" not in v.template
    assert v.template.count("\n") == 19  # 20 source lines, the last without \n
    assert v.expected == (
        "Dict {\n    root1: 1\n    root2: {\n        nest1: 1\n        nest2: {\n            nest3: 2\n"
        "        }\n    }\n}"
    )

    v = _by_name(jinja, "trim")
    assert v.template == "{{ '  \r\n\thello\t\n\r  '|trim }}"

    # numbers: negative int, negative float, a float that is integral stays a float
    v = _by_name(jinja, "unary plus variable")
    assert v.context == {"n": -3} and type(v.context["n"]) is int
    v = _by_name(jinja, "unary plus float")
    assert v.context == {"x": -1.5} and v.expected == "-1.5"
    v = _by_name(jinja, "is 1.0 truthy")
    assert type(v.context["y"]) is float and v.context["y"] == 1.0
    v = _by_name(jinja, "is 0.0 falsy")
    assert type(v.context["y"]) is float

    # nested json::array, nullptr inside an array
    v = _by_name(jinja, "array|tojson nested")
    assert v.context == {"arr": [[1, 2], [3, 4]]}
    assert v.expected == "[[1, 2], [3, 4]]"
    v = _by_name(jinja, "is undefined key falsy")
    assert v.context == {"y": [None]}

    # json({{...}}) elements and a trailing comma in the braced list
    v = _by_name(jinja, "array|join attribute")
    assert v.context == {"arr": [{"name": "a", "age": 1}, {"name": "b", "age": 2}, {"name": "c", "age": 3}]}
    assert [list(x) for x in v.context["arr"]] == [["name", "age"]] * 3
    v = _by_name(jinja, "array|max attribute")
    assert v.context == {"items": [{"x": 2}, {"x": 1}]}
    assert v.expected == "{'x': 2}"


def test_schema_spot_checks(schemas: list[SchemaVector], schema_errors: list[SchemaErrorVector],
                            upstream: Path) -> None:
    v = schemas[0]
    assert (v.name, v.expect_success) == ("min 0", True)
    # R"""( ... )""": the text exactly as in the source, indentation and all
    assert v.schema_text == '{\n            "type": "integer",\n            "minimum": 0\n        }'
    assert v.schema == {"type": "integer", "minimum": 0}
    assert v.expected_grammar == (
        '\n            root ::= ([0] | [1-9] [0-9]{0,15})\n'
        '            space ::= | " " | "\\n"{1,2} [ \\t]{0,20}\n        '
    )
    assert v.normalized_expected == 'root ::= ([0] | [1-9] [0-9]{0,15})\nspace ::= | " " | "\\n"{1,2} [ \\t]{0,20}'

    v = next(s for s in schemas if s.name == "empty schema (any value)")
    assert v.schema_text == "{}"  # a plain (not raw) literal

    v = next(s for s in schemas if s.name == "regexp with escaped hyphen outside a character class")
    assert '"pattern": "^a\\\\-b$"' in v.schema_text  # raw: the JSON text keeps its two backslashes
    assert v.schema["pattern"] == "^a\\-b$"
    assert 'root ::= "\\"" ("a\\-b") "\\""' in v.normalized_expected

    failures = [s for s in schemas if not s.expect_success]
    assert [s.name for s in failures] == ["unknown type", "invalid type", "regexp with unbalanced parentheses"]
    assert all(s.expected_grammar == "" for s in failures)
    assert failures[1].schema == {"type": 123}

    e = schema_errors[0]
    assert (e.test, e.group, e.schema_text, e.message_contains) == (
        "not a schema", "test_errors", "[]", "#: schema must be an object")
    e = next(e for e in schema_errors if e.schema_text == '{"$ref": ""}')
    assert (e.test, e.message_contains) == ("ref", "#: unsupported $ref ,")

    may_be = json_schema_may_be_string_vectors(upstream)
    assert (may_be[0].test, may_be[0].schema_text, may_be[0].expected) == ("leaves", '{"type": "string"}', True)
    assert (may_be[5].schema_text, may_be[5].expected) == ('{"const": 123}', False)
    types = json_schema_value_types_vectors(upstream)
    assert types[1].expected == ("number", "integer")
    assert types[2].expected == ("null", "boolean", "number", "integer", "string", "array", "object")  # all()
    assert types[9].expected == ()  # {}


def test_normalize_grammar_is_upstreams_trim() -> None:
    assert normalize_grammar("\n\t  a ::= b\n   c ::= d  \n\r ") == "a ::= b\nc ::= d"
    assert normalize_grammar("a\n\n\t\n  b") == "a\n\n\nb"
    assert normalize_grammar("a  b \t") == "a  b"  # only leading whitespace of a line goes
    assert normalize_grammar("") == ""


# -- the lexer and the common_json rules, on synthetic C++ ------------------------------------------


def _write_jinja(tmp_path: Path, body: str) -> Path:
    path = tmp_path / JINJA_TEST_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "static void test_template(testing & t, const std::string & name, const std::string & tmpl,"
        " const json & vars, const std::string & expect);\n"
        "static void test_synthetic(testing & t) {\n" + body + "}\n",
        encoding="utf-8",
    )
    return tmp_path


SYNTHETIC = r'''
    test_template(t, "raw", R"""(a"b\n)""", json::parse(R"({"k": [1, -2.5e3, true, null], "s": "x\u00e9"})"),
        R"x(o)"k)x");
    /* test_template(t, "block comment", "", json::object(), ""); */
    // test_template(t, "line comment", "", json::object(), "");
    // a comment continued by a splice \
    test_template(t, "hidden by a splice", "", json::object(), "");
    test_template(t, "escapes", "\x41\101\0\u00e9\U0001F600\t\\\"\'\?", {
        {"a", {{"b", json::array({1, {{"c", nullptr}}, json::array(), json::object()})}}},
        {"e", {}}, {"n", json::array({{}})}, {"a", 2},
    }, u8"é" "z");
    test_tem\
plate(t, "splices", "ab\
cd", json{{"n", -3}, {"f", 1.0}, {"g", 1.5f}, {"h", 0x10}, {"o", 010}, {"big", 1'000'000ull}}, "x" \
        "y");
    test_template(t, std::string("parse"), "t", json::parse("{\"b\": 1, \"a\": [2]}"), std::string("e"));
'''


def test_synthetic_cpp(tmp_path: Path) -> None:
    vectors = jinja_vectors(_write_jinja(tmp_path, SYNTHETIC))
    assert [v.name for v in vectors] == ["raw", "escapes", "splices", "parse"]
    assert {v.group for v in vectors} == {"test_synthetic"}
    raw, esc, spl, parse = vectors
    assert raw.template == 'a"b\\n'
    assert raw.context == {"k": [1, -2500.0, True, None], "s": "x\u00e9"}
    assert raw.expected == 'o)"k'
    assert esc.template == "AA\0\u00e9\U0001F600\t\\\"'?"
    # a repeated key keeps its first position and takes the last value; {} is an empty object as a
    # pair's value and null as an array element
    assert esc.context == {"a": 2, "e": {}, "n": [None]}
    assert list(esc.context) == ["a", "e", "n"]
    assert esc.expected == "\u00e9z"
    assert spl.line == SYNTHETIC.splitlines().index("    test_tem\\") + 3
    assert spl.template == "abcd"
    assert spl.context == {"n": -3, "f": 1.0, "g": 1.5, "h": 16, "o": 8, "big": 1000000}
    assert type(spl.context["f"]) is float
    assert spl.expected == "xy"
    assert (parse.name, parse.expected) == ("parse", "e")
    assert list(parse.context) == ["b", "a"]

    esc_nested = jinja_vectors(_write_jinja(tmp_path, '    test_template(t, "n", "", {{"a", {{"b", '
                                            'json::array({1, {{"c", nullptr}}, json::array()})}}}}, "");\n'))
    assert esc_nested[0].context == {"a": {"b": [1, {"c": None}, []]}}


@pytest.mark.parametrize("call, message", [
    ('test_template(t, "v", "x", vars, "");', "unsupported expression"),
    ('test_template(t, "v", "x", {"a", 1}, "");', "{key, value} pairs only"),
    ('test_template(t, "v", "x", {{"a", 1, 2}}, "");', "exactly two elements"),
    ('test_template(t, "v", "x", json::object(), "" + s);', "expected ')'"),
    ('test_template(t, "v", "x", json::parse("{"), "");', "not valid JSON"),
    ('test_template(t, "v", "\\q", json::object(), "");', "unknown escape"),
    ('test_template(t, "v", "\\xff", json::object(), "");', "not valid UTF-8"),
    ('test_template(t, "v", L"x", json::object(), "");', "wide or UTF-16/32"),
])
def test_unreadable_calls_raise_naming_the_line(tmp_path: Path, call: str, message: str) -> None:
    root = _write_jinja(tmp_path, "\n\n    " + call + "\n")
    with pytest.raises(UpstreamVectorError, match=re.escape(message)) as info:
        jinja_vectors(root)
    assert f"{JINJA_TEST_FILE}:5:" in str(info.value)  # the call's line in the synthetic file


def test_calls_inside_preprocessor_conditionals_are_refused(tmp_path: Path) -> None:
    root = _write_jinja(tmp_path, '#if 0\n    test_template(t, "v", "x", json::object(), "");\n#endif\n')
    with pytest.raises(UpstreamVectorError, match="preprocessor conditional") as info:
        jinja_vectors(root)
    assert f"{JINJA_TEST_FILE}:4:" in str(info.value)
    # a conditional elsewhere (like upstream's #ifdef _WIN32 in test_template_py) is fine
    root = _write_jinja(tmp_path, '#ifdef _WIN32\n    int x = 1;\n#else\n    int x = 2;\n#endif\n'
                                  '    test_template(t, "v", "x", json::object(), "");\n')
    assert [v.name for v in jinja_vectors(root)] == ["v"]


# -- against upstream's code (the oracle) ----------------------------------------------------------


@pytest.mark.parity
def test_jinja_vectors_render_as_upstream_expects(oracle: OracleClient, jinja: list[JinjaVector]) -> None:
    # nothing reads the wall clock (the oracle would fix it anyway), so no vector is excluded for it
    assert not any("strftime_now" in v.template or "now" in v.context for v in jinja)
    assert set(UPSTREAM_NOT_IMPLEMENTED) <= {v.name for v in jinja}
    matched, skipped, problems = 0, 0, []
    for v in jinja:
        result = oracle.request("jinja_render", template=v.template, context=v.context)
        if v.name in UPSTREAM_NOT_IMPLEMENTED:
            if (isinstance(result, OracleError) and result.kind == "runtime_error"
                    and result.message == "NotImplemented: " + UPSTREAM_NOT_IMPLEMENTED[v.name]):
                skipped += 1
            else:
                problems.append(f"line {v.line} {v.name!r}: expected upstream's skip, got {result!r}")
        elif isinstance(result, OracleError):
            problems.append(f"line {v.line} {v.name!r}: {result.kind}: {result.message}")
        elif result != v.expected:
            problems.append(f"line {v.line} {v.name!r}: rendered {result!r}, expected {v.expected!r}")
        else:
            matched += 1
    assert not problems, "\n".join(problems)
    assert (matched, skipped) == (len(jinja) - len(UPSTREAM_NOT_IMPLEMENTED), len(UPSTREAM_NOT_IMPLEMENTED))


@pytest.mark.parity
def test_schema_vectors_convert_as_upstream_expects(oracle: OracleClient, schemas: list[SchemaVector]) -> None:
    problems = []
    for v in schemas:
        # the runner: json_schema_to_grammar(common_json::parse(tc.schema), true)
        result = oracle.request("json_schema_to_grammar", schema=v.schema, force_gbnf=True)
        if v.expect_success:
            if isinstance(result, OracleError):
                problems.append(f"line {v.line} {v.name!r}: {result.kind}: {result.message}")
            elif normalize_grammar(result) != v.normalized_expected:
                problems.append(f"line {v.line} {v.name!r}:\n{result}\n!=\n{v.normalized_expected}")
        elif not (isinstance(result, OracleError) and result.kind == "invalid_argument"):
            # FAILURE means std::invalid_argument; any other exception would abort upstream's test
            problems.append(f"line {v.line} {v.name!r}: expected invalid_argument, got {result!r}")
    assert not problems, "\n".join(problems)


@pytest.mark.parity
def test_schema_error_vectors_fail_as_upstream_expects(oracle: OracleClient,
                                                       schema_errors: list[SchemaErrorVector]) -> None:
    # upstream parses with common_chat_schema_from_json; json_schema_to_grammar does the same first
    # and rethrows its runtime_error as invalid_argument("JSON schema conversion failed:\n" + what())
    problems = []
    for v in schema_errors:
        result = oracle.request("json_schema_to_grammar", schema=v.schema, force_gbnf=True)
        if not (isinstance(result, OracleError) and result.kind == "invalid_argument"
                and v.message_contains in result.message):
            problems.append(f"line {v.line} {v.schema_text}: expected {v.message_contains!r}, got {result!r}")
    assert not problems, "\n".join(problems)
