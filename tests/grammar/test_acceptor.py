"""GbnfAcceptor: upstream's matcher semantics, on hand-written grammars and on the grammars llama.cpp's
JSON-schema converter makes, cross-checked against llama.cpp's own matcher where a model is at hand."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llamact.grammar.acceptor import GbnfAcceptor
from llamact.grammar.gbnf import GbnfError, parse_gbnf
from llamact.native.model import Model, ModelLoadOptions
from llamact.parity.oracle import OracleError


def acceptor(text: str, root: str = "root") -> GbnfAcceptor:
    return GbnfAcceptor(parse_gbnf(text, root=root), root=root)


# --- hand-written grammars --------------------------------------------------------------------


@pytest.mark.parametrize(("grammar", "accepted", "rejected"), [
    ('root ::= "ab"*', ["", "ab", "abab"], ["a", "aba", "b"]),
    ('root ::= "ab"+', ["ab", "abab"], ["", "a"]),
    ('root ::= "a"?', ["", "a"], ["aa"]),
    ('root ::= "a"{2,4}', ["aa", "aaa", "aaaa"], ["a", "aaaaa"]),
    ('root ::= "a"{3}', ["aaa"], ["aa", "aaaa"]),
    ('root ::= "a"{2,}', ["aa", "a" * 50], ["a"]),
    ('root ::= "a"{0}', [""], ["a"]),
    ('root ::= "a"{2}{3}', ["a" * 6], ["a" * 5, "a" * 7]),
    ('root ::= "a"{0,3000}', ["", "a" * 2500], ["b"]),  # above 2000: unbounded, as upstream
    ('root ::= [a-c]+', ["abcabc"], ["abd", ""]),
    ('root ::= [^a-c]', ["d", "é", "\U0001F600"], ["a", "c", ""]),
    ('root ::= .', ["x", "\n", "\U0001F600"], ["", "xy"]),
    ('root ::= [] "a" [^]', ["a"], ["", "aa"]),  # empty classes match the empty string
    ('root ::= "é\\U0001F600"', ["é\U0001F600"], ["e"]),
    ('root ::= x | y\nx ::= "a" y?\ny ::= ("b" | "c")*', ["a", "abc", "", "cb"], ["ba", "d"]),
    ('root ::= <[5]> | "a"', ["a"], [""]),  # token references never match text
    ('root ::= "a" !<[5]>', [], ["a", "ab"]),
    ('root ::= ws "x" ws\nws ::= | " " | "\\n"{1,2} [ \\t]{0,20}', ["x", " x ", "\n\n   x\n"], ["\n\n\nx"]),
])
def test_small_grammars(grammar: str, accepted: list[str], rejected: list[str]) -> None:
    a = acceptor(grammar)
    for text in accepted:
        assert a.accepts(text), text
        assert a.is_viable_prefix(text), text
    for text in rejected:
        assert not a.accepts(text), text


def test_viable_prefixes_and_matched_length() -> None:
    a = acceptor('root ::= "{" [0-9]+ "}"')
    assert a.is_viable_prefix("")
    assert a.is_viable_prefix("{12")
    assert not a.accepts("{12")
    assert not a.is_viable_prefix("{1x")
    assert a.matched_length("{12x}") == 3
    assert a.matched_length("{12}") == 4
    dead = acceptor('root ::= "a" <[7]>')
    assert not dead.is_viable_prefix("a")  # only a token could come next
    assert dead.matched_length("ab") == 0


def test_sentence_prefixes() -> None:
    a = acceptor('root ::= "a" "b"* ("c" | "cd")?')
    assert a.sentence_prefixes("abbcd!") == [1, 2, 3, 4, 5]
    assert a.sentence_prefixes("xa") == []
    assert acceptor('root ::= "a"?').sentence_prefixes("aa") == [0, 1]


def test_other_start_rule() -> None:
    a = acceptor('start ::= "s" x\nx ::= "x"', root="start")
    assert a.accepts("sx")
    assert GbnfAcceptor(parse_gbnf('root ::= x\nx ::= "x"'), root="x").accepts("x")
    with pytest.raises(GbnfError, match="no 'nope' rule"):
        GbnfAcceptor(parse_gbnf('root ::= "a"'), root="nope")


@pytest.mark.parametrize("grammar", [
    'root ::= root "a" | "b"',
    'root ::= a\na ::= b a "x" | "y"\nb ::= "z"?',  # empty only through a repetition rule
    'root ::= a\na ::= b a "x" | "y"\nb ::= c\nc ::= | "z"',  # upstream misses this one (and hangs)
    'root ::= ("a"*)* "b"',
    'root ::= x\nx ::= y "a"\ny ::= | root',
])
def test_left_recursion_is_refused(grammar: str) -> None:
    with pytest.raises(GbnfError, match="left recursion"):
        acceptor(grammar)


def test_right_recursion_is_fine() -> None:
    a = acceptor('root ::= "a" root | "b"')
    assert a.accepts("a" * 200 + "b")


def test_vendor_json_grammar(repo_root: Path) -> None:
    a = GbnfAcceptor(parse_gbnf((repo_root / "vendor/llama.cpp/grammars/json.gbnf").read_text()))
    doc = {"a": [1, -2.5, 3e10, True, None, "x\"y\\u\n"], "b": {"c": {}}, "é": "\U0001F600"}
    for text in (json.dumps(doc), json.dumps(doc, indent=2), json.dumps(doc, ensure_ascii=False)):
        assert a.accepts(text), text
    assert not a.accepts('{"a": 01}')
    assert not a.is_viable_prefix('{"a" 1')


def test_vendor_arithmetic_grammar(repo_root: Path) -> None:
    a = GbnfAcceptor(parse_gbnf((repo_root / "vendor/llama.cpp/grammars/arithmetic.gbnf").read_text()))
    assert a.accepts("(1+2)*3-4/5=x\ny=2\n")
    assert not a.accepts("(1+2)=3\n(")


# --- JSON-schema grammars (from upstream's converter through the oracle) -----------------------

_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x7f"), max_size=12)
_BMP = st.text(st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cs",), blacklist_characters="\x7f"),
               min_size=2, max_size=8)
_NUMBER = st.one_of(st.integers(-10**12, 10**12), st.integers(-10**6, 10**6).map(lambda n: n / 8))
_INT = st.integers(-10**15, 10**15)

_ITEM = st.builds(lambda k, v: {"k": k} if v is None else {"k": k, "v": v}, _TEXT, st.one_of(st.none(), _NUMBER))


def _ordered(required: dict[str, Any], optional: dict[str, Any], order: list[str]) -> dict[str, Any]:
    both = {**required, **optional}
    return {k: both[k] for k in order if k in required} | {k: both[k] for k in order if k in optional}


_PERSON = st.builds(
    lambda name, age, extra: _ordered({"name": name, "age": age}, extra, ["name", "age", "tags", "score"]),
    st.text(st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cs",), blacklist_characters="\x7f"),
            min_size=1, max_size=20),
    st.integers(0, 150),
    st.fixed_dictionaries({}, optional={"tags": st.lists(_TEXT, max_size=5), "score": _NUMBER}),
)

# name -> (schema, strategy of valid values, clearly invalid values)
SCHEMAS: dict[str, tuple[dict[str, Any], st.SearchStrategy[Any], list[Any]]] = {
    "integer": ({"type": "integer"}, _INT, ["1", 1.5, None, 10**17]),
    "bounded integer": ({"type": "integer", "minimum": -5, "maximum": 1000}, st.integers(-5, 1000),
                        [-6, 1001, 12345, "3"]),
    "number": ({"type": "number"}, _NUMBER, ["1", True, [1]]),
    "boolean": ({"type": "boolean"}, st.booleans(), [0, "true", None]),
    "string length": ({"type": "string", "minLength": 2, "maxLength": 8}, _BMP, ["a", "abcdefghi", 12]),
    "enum": ({"enum": ["red", "green", 1, None]}, st.sampled_from(["red", "green", 1, None]), ["blue", 2, False]),
    "array": ({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 4},
              st.lists(_INT, min_size=1, max_size=4), [[], [1, 2, 3, 4, 5], ["1"], 1]),
    "nullable string": ({"anyOf": [{"type": "string"}, {"type": "null"}]}, st.one_of(_TEXT, st.none()),
                        [1, False, ["x"]]),
    "pattern": ({"type": "string", "pattern": "^[a-z]{2,5}-[0-9]+$"},
                st.from_regex(r"[a-z]{2,5}-[0-9]{1,6}", fullmatch=True), ["a-1", "abcdef-1", "ab-", "AB-1"]),
    "tuple": ({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
              st.tuples(_TEXT, _INT).map(list), [[1, "a"], ["a"], ["a", 1, 2]]),
    "map": ({"type": "object", "additionalProperties": {"type": "integer"}},
            st.dictionaries(_TEXT, _INT, max_size=4), [{"a": "1"}, {"a": 1.5}, [1]]),
    "person": ({"type": "object", "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 20}, "age": {"type": "integer", "minimum": 0,
                                                                             "maximum": 150},
        "tags": {"type": "array", "items": {"type": "string"}}, "score": {"type": "number"}},
        "required": ["name", "age"], "additionalProperties": False}, _PERSON,
        [{"name": "a"}, {"name": "a", "age": 151}, {"name": "a", "age": 1, "other": 1}, {"name": 1, "age": 1},
         ]),
    "nested": ({"type": "object", "properties": {
        "id": {"type": "integer"},
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "k": {"type": "string"}, "v": {"type": "number"}}, "required": ["k"], "additionalProperties": False}}},
        "required": ["items", "id"], "additionalProperties": False},
        st.builds(lambda i, items: {"id": i, "items": items}, _INT, st.lists(_ITEM, max_size=3)),
        [{"id": 1}, {"id": 1, "items": [{"v": 1}]}, {"id": "1", "items": []}, {"id": 1, "items": [], "x": 0}]),
}

STYLES: dict[str, Callable[[Any], str]] = {
    "compact": lambda v: json.dumps(v, separators=(",", ":")),
    "spaced": json.dumps,
    "indented": lambda v: json.dumps(v, indent=2),
    "unicode": lambda v: json.dumps(v, ensure_ascii=False),
}


@pytest.fixture(scope="module")
def schema_acceptors(oracle) -> dict[str, tuple[str, GbnfAcceptor]]:
    out = {}
    for name, (schema, _, _) in SCHEMAS.items():
        grammar = oracle.request("json_schema_to_grammar", schema=schema, force_gbnf=True)
        assert not isinstance(grammar, OracleError), (name, grammar)
        out[name] = (grammar, GbnfAcceptor(parse_gbnf(grammar)))
    return out


@pytest.mark.parity
@pytest.mark.parametrize("name", list(SCHEMAS))
def test_schema_grammar_accepts_valid_values(name: str, schema_acceptors: dict[str, tuple[str, GbnfAcceptor]]) -> None:
    grammar, a = schema_acceptors[name]

    @settings(max_examples=40, deadline=None)
    @given(SCHEMAS[name][1])
    def check(value: Any) -> None:
        for style, dump in STYLES.items():
            text = dump(value)
            assert a.accepts(text), f"{style}: {text!r}\n{grammar}"

    check()


@pytest.mark.parity
@pytest.mark.parametrize("name", list(SCHEMAS))
def test_schema_grammar_rejects_invalid_values(name: str,
                                               schema_acceptors: dict[str, tuple[str, GbnfAcceptor]]) -> None:
    grammar, a = schema_acceptors[name]
    for value in SCHEMAS[name][2]:
        for dump in STYLES.values():
            assert not a.accepts(dump(value)), f"{dump(value)!r}\n{grammar}"


def _samples(name: str, n: int = 4) -> list[str]:
    """A few valid documents, the same on every run, in alternating styles."""
    values: list[Any] = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None)
    @given(SCHEMAS[name][1])
    def collect(value: Any) -> None:
        values.append(value)

    collect()
    styles = list(STYLES.values())
    return [styles[i % len(styles)](v) for i, v in enumerate(values)]


@pytest.mark.parity
@pytest.mark.parametrize("name", list(SCHEMAS))
def test_prefixes_are_viable_and_a_wrong_character_is_not(
        name: str, schema_acceptors: dict[str, tuple[str, GbnfAcceptor]]) -> None:
    _, a = schema_acceptors[name]
    for text in _samples(name):
        assert a.accepts(text), text
        for i in range(len(text) + 1):
            assert a.is_viable_prefix(text[:i]), (text, i)
        assert not a.is_viable_prefix(text + "}x")
        assert not a.is_viable_prefix("@" + text)
        assert a.matched_length("@" + text) == 0


# --- against llama.cpp's matcher --------------------------------------------------------------


@pytest.fixture(scope="module")
def vocab_model(smollm2_path: Path) -> Iterator[Model]:
    model = Model(smollm2_path, ModelLoadOptions(vocab_only=True))
    yield model
    model.close()


@pytest.mark.parity
@pytest.mark.model
@pytest.mark.parametrize("name", list(SCHEMAS))
def test_decisions_match_llama_cpp(name: str, schema_acceptors: dict[str, tuple[str, GbnfAcceptor]],
                                   vocab_model: Model) -> None:
    """Feed strings to llama.cpp's grammar sampler as SmolLM2 tokens; ask ours the same questions."""
    from native_check import llama_cpp_grammar_decisions

    grammar, a = schema_acceptors[name]
    texts = list(_samples(name)) + [json.dumps(v) for v in SCHEMAS[name][2]]
    texts += [t[: len(t) // 2] for t in texts] + [t + " x" for t in texts[:2]]
    vocab = vocab_model.vocab
    texts = [t for t in texts if vocab.detokenize(vocab.tokenize(t, add_special=False)) == t]
    assert len(texts) >= 5
    for text in texts:
        ours = (a.is_viable_prefix(text), a.accepts(text))
        theirs = llama_cpp_grammar_decisions(grammar, vocab_model, text)
        assert ours == theirs, f"{text!r}: ours {ours}, llama.cpp {theirs}\n{grammar}"
