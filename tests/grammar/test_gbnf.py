"""GBNF front end: parsing, validation errors, printing back, and agreement with llama.cpp's parser."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from llamact.grammar.acceptor import GbnfAcceptor
from llamact.grammar.gbnf import (
    Alternatives,
    AnyChar,
    CharClass,
    Element,
    GbnfError,
    Grammar,
    Group,
    Literal,
    Repeat,
    RuleRef,
    Sequence,
    TokenRef,
    format_gbnf,
    parse_gbnf,
)
from llamact.native.model import Model, ModelLoadOptions
from llamact.parity.oracle import OracleError
from llamact.parity.upstream_vectors import json_schema_vectors


def vendor_grammars(repo_root: Path) -> list[Path]:
    paths = sorted((repo_root / "vendor" / "llama.cpp" / "grammars").glob("*.gbnf"))
    assert paths, "no grammars/*.gbnf in the vendored tree"
    return paths


def our_verdict(text: str) -> tuple[bool, str]:
    """Ours, with what llama.cpp checks when it builds a sampler: parse + validate + left recursion."""
    try:
        GbnfAcceptor(parse_gbnf(text))
    except GbnfError as exc:
        return False, exc.reason
    return True, ""


def seq(*items: Element) -> Sequence:
    return Sequence(tuple(items))


def alts(*sequences: Sequence) -> Alternatives:
    return Alternatives(tuple(sequences))


# --- parsing ----------------------------------------------------------------------------------


def test_vendor_grammars_parse_and_round_trip(repo_root: Path) -> None:
    for path in vendor_grammars(repo_root):
        grammar = parse_gbnf(path.read_text(encoding="utf-8"))
        printed = format_gbnf(grammar)
        assert parse_gbnf(printed) == grammar, f"{path.name}:\n{printed}"
        assert format_gbnf(parse_gbnf(printed)) == printed


def test_ast_shapes() -> None:
    g = parse_gbnf('root ::= "a\\x41\\u00e9\\U0001F600" [^a-c\\]x] . <[12]> !<think> (x | ) x*\nx ::= "y"{2,5}')
    a, b, c, d, e, f, h = g.rules["root"].sequences[0].items[:7]
    assert a == Literal((ord("a"), 0x41, 0xE9, 0x1F600))
    assert b == CharClass(((ord("a"), ord("c")), (ord("]"), ord("]")), (ord("x"), ord("x"))), negated=True)
    assert c == AnyChar()
    assert d == TokenRef(12)
    assert e == TokenRef("think", negated=True)
    assert f == Group(alts(seq(RuleRef("x")), seq()))
    assert h == Repeat(RuleRef("x"), 0, None)
    assert g.rules["x"] == alts(seq(Repeat(Literal.of("y"), 2, 5)))


@pytest.mark.parametrize(("text", "expected"), [
    ('root ::= "a"*', Repeat(Literal.of("a"), 0, None)),
    ('root ::= "a"{0,}', Repeat(Literal.of("a"), 0, None)),
    ('root ::= "a"+', Repeat(Literal.of("a"), 1, None)),
    ('root ::= "a"?', Repeat(Literal.of("a"), 0, 1)),
    ('root ::= "a"{3}', Repeat(Literal.of("a"), 3, 3)),
    ('root ::= "a" { 3 , 4 }', Repeat(Literal.of("a"), 3, 4)),
    ('root ::= "a"{2}{3}', Repeat(Repeat(Literal.of("a"), 2, 2), 3, 3)),
    ('root ::= [a-]', CharClass(((97, 97), (45, 45)))),
    ('root ::= [-a]', CharClass(((45, 45), (97, 97)))),
    ('root ::= [--a]', CharClass(((45, 97),))),
    ('root ::= [a-b-c]', CharClass(((97, 98), (45, 45), (99, 99)))),
    ('root ::= [\\--\\]]', CharClass(((45, 93),))),
    ('root ::= [\\t\\n\\r\\\\\\"\\[\\]\\-]', CharClass(tuple((c, c) for c in b'\t\n\r\\"[]-'))),
    ('root ::= ["[]', CharClass(((34, 34), (91, 91)))),
    ('root ::= []', CharClass(())),
    ('root ::= [^]', CharClass((), negated=True)),
    ('root ::= "#not a comment"', Literal.of("#not a comment")),
    ('root ::= "line\nbreak"', Literal.of("line\nbreak")),
    ('root ::= <|im_end|>', TokenRef("|im_end|")),
    ('root ::= x-1\nx-1 ::= "x"', RuleRef("x-1")),
])
def test_single_elements(text: str, expected: Element) -> None:
    grammar = parse_gbnf(text)
    assert grammar.rules["root"] == alts(seq(expected))
    assert parse_gbnf(format_gbnf(grammar)) == grammar


@pytest.mark.parametrize("text", [
    "root ::=",
    'root ::= | "a"',
    'root ::= "a" |',
    'root ::= "a" |\n  "b"',
    'root ::=\n\n  "a"',
    'root ::= (\n  "a"\n  | "b" # comment\n)\n',
    'root ::= ("x"\n{2,\n3})',
    '  # leading comment\n\nroot ::= "a" # trailing\n\n# another\n',
    "root ::= a\r\na ::= \"x\"\r\n",
    "root ::= a\ra ::= \"x\"\r",
    'root\t::=\t"a"\t|\t"b"',
    'root::="a"|"b"',
    'root ::= "a"\nroot ::= "b"',
])
def test_layout_that_parses(text: str) -> None:
    grammar = parse_gbnf(text)
    assert parse_gbnf(format_gbnf(grammar)) == grammar


def test_duplicate_definition_keeps_the_last() -> None:
    assert parse_gbnf('root ::= "a"\nroot ::= "b"').rules["root"] == alts(seq(Literal.of("b")))


def test_root_name_is_configurable() -> None:
    assert parse_gbnf('start ::= "a"', root="start").rules["start"]
    assert parse_gbnf('start ::= "a"', root=None).rules["start"]
    with pytest.raises(GbnfError, match="no 'root' rule"):
        parse_gbnf('start ::= "a"')


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "reason", "line", "column"), [
    ('root ::= "a', "unterminated literal", 1, 10),
    ("root ::= [abc", "unterminated character class", 1, 10),
    ('root ::= "a"\nx ::= foo', "undefined rule 'foo' (referenced in rule 'x')", 2, 7),
    ('root ::= "ok"\n  | "b"', "unexpected '|'", 2, 3),
    ("root ::= [a-z] [z-a]", "character range start U+007A is above its end U+0061", 1, 17),
    ('root ::= "\\q"', "unknown escape '\\q'", 1, 11),
    ('root ::= "\\x4"', "expecting 2 hex chars after '\\x'", 1, 11),
    ('root ::= "a"{3,2}', "minimum above its maximum", 1, 14),
    ('root ::= "a"{2001}', "above llama.cpp's limit of 2000", 1, 14),
    ('root ::= ("a" "b"?){1001}', "2 x 1001 rules", 1, 21),
    ('root ::= ""*', "non-empty item before the repetition", 1, 12),
    ('root\n::= "a"', "unexpected newline; expecting '::='", 1, 5),
    ('root ::= ("a"\n', "unexpected end of input; expecting ')'", 1, 14),
])
def test_errors_point_at_the_place(text: str, reason: str, line: int, column: int) -> None:
    with pytest.raises(GbnfError) as info:
        parse_gbnf(text)
    err = info.value
    assert reason in err.reason
    assert (err.line, err.column) == (line, column), str(err)
    assert err.context.splitlines()[-1] == " " * (column - 1) + "^"
    assert f"line {line}, column {column}" in str(err)


def test_grammar_level_errors() -> None:
    for text in ["", "# nothing\n", "\n\n"]:
        with pytest.raises(GbnfError, match="no rules"):
            parse_gbnf(text)
    with pytest.raises(GbnfError, match="NUL"):
        parse_gbnf('root ::= "a\x00"')


# --- printing: round trip over generated grammars ---------------------------------------------

NAMES = ["root", "a", "b-c", "x1", "2y"]
_code_points = st.one_of(st.integers(0, 0x7F), st.integers(0, 0x10FFFF), st.integers(0x110000, 2**32 - 1))


def _ranges() -> st.SearchStrategy[tuple[tuple[int, int], ...]]:
    pair = st.tuples(_code_points, _code_points).map(lambda p: (min(p), max(p)))
    single = _code_points.map(lambda c: (c, c))
    special = st.sampled_from([ord(c) for c in "-]^[\\\"\n"]).map(lambda c: (c, c))
    return st.lists(st.one_of(pair, single, special), max_size=4).map(tuple)


_token_text = st.text(st.characters(blacklist_characters=">\x00", blacklist_categories=("Cs",)), max_size=6)
_atoms: st.SearchStrategy[Element] = st.one_of(
    st.lists(_code_points, max_size=5).map(lambda cps: Literal(tuple(cps))),
    st.builds(CharClass, _ranges(), st.booleans()),
    st.just(AnyChar()),
    st.sampled_from(NAMES).map(RuleRef),
    st.builds(TokenRef, st.one_of(st.integers(0, 2**32 - 1), _token_text.filter(lambda t: not t.startswith("["))),
              st.booleans()),
)


def _repeat(item: Element, lo: int, span: int | None) -> Element:
    if isinstance(item, Literal) and not item.codepoints or isinstance(item, CharClass) and not item.ranges:
        return item
    if isinstance(item, Repeat) and item.max == 0:
        return item
    return Repeat(item, lo, None if span is None else lo + span)


def _elements(children: st.SearchStrategy[Element]) -> st.SearchStrategy[Element]:
    sequences = st.lists(children, max_size=3).map(lambda items: Sequence(tuple(items)))
    alternatives = st.lists(sequences, min_size=1, max_size=3).map(lambda s: Alternatives(tuple(s)))
    return st.one_of(
        alternatives.map(Group),
        st.builds(_repeat, children, st.integers(0, 4), st.one_of(st.none(), st.integers(0, 3))),
    )


_element = st.recursive(_atoms, _elements, max_leaves=12)
_rule_body = st.lists(st.lists(_element, max_size=4).map(lambda i: Sequence(tuple(i))), min_size=1, max_size=3)
grammars = (
    st.fixed_dictionaries({name: _rule_body.map(lambda s: Alternatives(tuple(s))) for name in NAMES})
    .filter(lambda rules: sum(body.sequences[-1] == Sequence() for body in rules.values()) <= 1)
    .map(Grammar)
)


def test_an_empty_body_is_printed_last() -> None:
    grammar = Grammar({"root": alts(seq()), "a": alts(seq(Literal.of("x")))})
    assert format_gbnf(grammar) == 'a ::= "x"\nroot ::=\n'
    assert parse_gbnf(format_gbnf(grammar)) == grammar
    with pytest.raises(GbnfError, match="empty alternative"):
        format_gbnf(Grammar({"root": alts(seq()), "a": alts(seq(Literal.of("x")), seq())}))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grammars)
def test_format_then_parse_is_identity(grammar: Grammar) -> None:
    text = format_gbnf(grammar)
    try:
        parsed = parse_gbnf(text)
    except GbnfError as exc:
        assume("limit of 2000" not in exc.reason)  # nested repetitions may multiply past upstream's limit
        raise
    assert parsed == grammar, text
    assert format_gbnf(parsed) == text


# --- against llama.cpp's own parser -----------------------------------------------------------


@pytest.fixture(scope="module")
def vocab_model(smollm2_path: Path) -> Iterator[Model]:
    model = Model(smollm2_path, ModelLoadOptions(vocab_only=True))
    yield model
    model.close()


@pytest.fixture(scope="module")
def schema_grammars(oracle, repo_root: Path) -> list[tuple[str, str]]:
    """(vector name, grammar) for every upstream JSON-schema vector the oracle converts."""
    vectors = json_schema_vectors(repo_root / "vendor" / "llama.cpp")
    out = []
    for v in vectors:
        result = oracle.request("json_schema_to_grammar", schema=json.loads(v.schema_text), force_gbnf=True)
        if not isinstance(result, OracleError):
            out.append((v.name, result))
    assert len(out) == sum(v.expect_success for v in vectors)
    return out


@pytest.mark.parity
def test_schema_grammars_parse_and_round_trip(schema_grammars: list[tuple[str, str]]) -> None:
    problems = []
    for name, text in schema_grammars:
        try:
            grammar = parse_gbnf(text)
            GbnfAcceptor(grammar)
        except GbnfError as exc:
            problems.append(f"{name}: {exc}\n{text}")
            continue
        if parse_gbnf(format_gbnf(grammar)) != grammar:
            problems.append(f"{name}: does not round-trip:\n{text}\n->\n{format_gbnf(grammar)}")
    assert not problems, "\n\n".join(problems)


@pytest.mark.parity
@pytest.mark.model
def test_schema_grammars_accepted_by_llama_cpp(schema_grammars: list[tuple[str, str]], vocab_model: Model) -> None:
    from native_check import llama_cpp_accepts_grammar

    problems = []
    for name, text in schema_grammars:
        for variant in (text, format_gbnf(parse_gbnf(text))):
            ok, reason = llama_cpp_accepts_grammar(variant, vocab_model)
            if not ok:
                problems.append(f"{name}: {reason}\n{variant}")
    assert not problems, "\n\n".join(problems)


@pytest.mark.model
def test_vendor_grammars_accepted_by_llama_cpp(repo_root: Path, vocab_model: Model) -> None:
    from native_check import llama_cpp_accepts_grammar

    for path in vendor_grammars(repo_root):
        text = path.read_text(encoding="utf-8")
        for variant in (text, format_gbnf(parse_gbnf(text))):
            assert llama_cpp_accepts_grammar(variant, vocab_model) == (True, ""), path.name


INVALID = [
    'root ::= "a',
    "root ::= foo",
    'root ::= "\\q"',
    'root\n::= "a"',
    'root ::= "a"\n| "b"',
    'x ::= "a"',
    'root ::= ("a"\n',
    'root ::= ""*',
    'root ::= []*',
    'root ::= "a"{0}{2}',
    'root ::= "a"{2001}',
    'root ::= ("a" "b"?){1001}',
    'root ::= "a"{1500}{2}',
    'root ::= "a"{0,99999999999999999999999}',
    "root ::= <[x]>",
    "root ::= ! <a>",
    "root ::= <abc",
    "# only a comment\n",
    'root ::= "\\x4"',
    'root ::= "\\u12"',
    "root ::= [abc",
    "root ::= *",
    'root ::= "a"{,3}',
    'root ::= "a"{2',
    'root ::= "a" )',
    "root ::= ::=",
    'root ::= "a" |\nfoo ::= "b"',
    'root ::= "x" @',
    'root ::= a\na ::= a "x" | "y"',
    'root ::= x\nx ::= y "a"\ny ::= | root',
    'root ::= "a"** "b"',
    # an undefined rule referenced only in a definition given again later: llama.cpp keeps its symbol,
    # and the rules generated after it leave its slot empty ("Undefined rule"), or a generated rule
    # (a group's, a repetition's) keeps the reference ("Undefined rule identifier")
    'root ::= t+\nroot ::= "a"',
    'root ::= (t "x")\nroot ::= "a"',
    'root ::= t "b"?\nroot ::= "a"',
    'root ::= ("x"){0} (t){0}\nroot ::= "a"',
    'root ::= t{1,2}\nroot ::= "a"',
    'root ::= t{0} "a"*',
    'root ::= (t){0}',
    'root ::= ((t) "a"){0}',
]

VALID = [
    "root ::=",
    'root ::= | "a"',
    'root ::= "a" |',
    'root ::=\n  "a"',
    'root ::= (\n "a"\n | "b"\n)*',
    "root ::= [a-] [-a] [\\]\\[\\\\]",
    'root ::= "\\x41\\u00e9\\U0001F600\\t\\n\\r\\\\\\"\\[\\]\\-"',
    'root ::= [] [^] "a"',
    'root ::= x-y 1x\nx-y ::= "a"\n1x ::= "b"',
    'root ::= "a" # c\n# c\n',
    "root ::= <[123]> !<[5]>",
    "root ::= <|im_end|>",
    'root ::= "a"{0,3000}',
    'root ::= "a"{2000}',
    'root ::= ("a"){2000}',
    'root ::= a\r\na ::= "x"\r\n',
    'root ::= a\ra ::= "x"\r',
    'root ::= "a"\nroot ::= "b"',
    'root ::= "a"{2}{3} "b"*?',
    'root ::= "a" . [^"]',
    'root::="a"|"b"',
    'root\t::=\t"a"\t|\t"b"',
    'root ::= ( "a" # comment\n "b" )',
    'root ::= "a"\nunused ::= "b"',
    'root ::= 123\n123 ::= "x"',
    'root ::= "a" "b" { 2 , 3 }',
    'root ::= ("x"\n{2,\n3})',
    # ... but when no rule is added after its symbol, llama.cpp never looks at it
    'root ::= t\nroot ::= "a"',
    'root ::= "a"\nx ::= t\nx ::= "b"',
    'root ::= t{2}\nroot ::= "a"',
    # x{0} drops x: an undefined rule there is never looked at (unless a rule is generated after it)
    "root ::= t{0}",
    'root ::= "a" t{0,0} "b"',
    'root ::= ("a" t{0})',
]

# Stricter than llama.cpp on purpose (see llamact.grammar.gbnf): llama.cpp takes these.
STRICTER = [
    "root ::= [z-a]",
]


@pytest.mark.model
@pytest.mark.parametrize("text", INVALID)
def test_invalid_grammars_rejected_by_both(text: str, vocab_model: Model) -> None:
    from native_check import llama_cpp_accepts_grammar

    ours, reason = our_verdict(text)
    theirs, their_reason = llama_cpp_accepts_grammar(text, vocab_model)
    assert (ours, theirs) == (False, False), f"ours: {reason!r}; llama.cpp: {their_reason!r}"


@pytest.mark.model
@pytest.mark.parametrize("text", VALID)
def test_valid_edge_cases_accepted_by_both(text: str, vocab_model: Model) -> None:
    from native_check import llama_cpp_accepts_grammar

    assert our_verdict(text) == (True, "")
    assert llama_cpp_accepts_grammar(text, vocab_model) == (True, "")
    assert llama_cpp_accepts_grammar(format_gbnf(parse_gbnf(text)), vocab_model) == (True, "")


@pytest.mark.model
@pytest.mark.parametrize("text", STRICTER)
def test_deliberately_stricter_than_llama_cpp(text: str, vocab_model: Model) -> None:
    from native_check import llama_cpp_accepts_grammar

    assert our_verdict(text)[0] is False
    assert llama_cpp_accepts_grammar(text, vocab_model) == (True, "")


@pytest.mark.model
def test_native_check_reports_the_reason(vocab_model: Model) -> None:
    from native_check import llama_cpp_accepts_grammar

    ok, reason = llama_cpp_accepts_grammar("root ::= foo", vocab_model)
    assert not ok and "Undefined rule" in reason
