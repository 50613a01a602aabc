"""llamact.peg.executor against upstream's ``common_peg_arena::parse`` (the oracle).

* Every corpus stream (the parser arenas upstream's chat templates produce, and their synthesised
  outputs): the raw parse result and AST at every UTF-8-safe prefix, from a fresh parse and from
  one IncrementalParser fed the prefixes in order, must equal the oracle's (compared by digest of
  the compact JSON; a mismatch is re-asked in full for the message).
* Hand-made arenas for every node kind, on inputs at the edges upstream cares about (partial
  literals, escapes, truncated and invalid UTF-8, lenient and not).
* Properties (hypothesis): random inputs built from an arena's own literals plus random bytes
  (invalid UTF-8 included) parse as upstream does; random appends give the same results
  incrementally as fresh; random arenas never raise anything but a LlamaException.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamact.errors import LlamaException
from llamact.parity.components import parse_result_digest as digest
from llamact.parity.components import parse_result_json as result_json
from llamact.parity.corpus import Corpus, build_corpus
from llamact.parity.oracle import OracleClient, OracleError
from llamact.peg import Arena, Literal, build_peg_parser, load_arena
from llamact.peg.executor import CompiledParser, IncrementalParser, parse

pytestmark = pytest.mark.parity

LLAMA_CPP = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp"
FAST_TEMPLATES = ["Qwen-Qwen3-0.6B", "google-gemma-4-31B-it", "MiniMax-M3", "Qwen3-Coder", "LFM2-8B-A1B"]


def _streams(oracle: OracleClient, templates: list[str]) -> list[tuple[str, Any, bytes, int]]:
    return _corpus_streams(build_corpus(oracle, LLAMA_CPP, templates=templates))


def _corpus_streams(corpus: Corpus) -> list[tuple[str, Any, bytes, int]]:
    out = []
    for case in corpus.cases.get("chat_parse", []):
        if not case.id.endswith("/final") or not case.input.get("parser"):
            continue
        prompt = (case.input.get("generation_prompt") or "").encode("utf-8")
        out.append((case.id, case.input["parser"], prompt + case.input["text"].encode("utf-8"), len(prompt)))
    return out


def _check_stream(oracle: OracleClient, case_id: str, parser: Any, data: bytes, start: int) -> int:
    expected = oracle.request("peg_parse_stream", parser=parser, text_hex=data.hex(), **{"from": start})
    assert not isinstance(expected, OracleError), expected
    compiled = CompiledParser(load_arena(parser))
    incremental = IncrementalParser(compiled)
    for step in expected:
        end = step["end"]
        fresh, resumed = parse(compiled, data[:end]), incremental.parse(data[:end])
        if digest(fresh) != step["digest"] or digest(resumed) != step["digest"]:
            full = oracle.request("peg_parse", parser=parser, text_hex=data[:end].hex())
            assert result_json(fresh) == full, f"{case_id}@{end}: fresh parse differs"
            assert result_json(resumed) == full, f"{case_id}@{end}: incremental parse differs"
    return len(expected)


def test_corpus_streams_fast_subset(oracle: OracleClient) -> None:
    streams = _streams(oracle, FAST_TEMPLATES)
    assert len(streams) >= 20
    assert sum(_check_stream(oracle, *s) for s in streams) > 2000


@pytest.mark.slow
def test_corpus_streams_full(oracle: OracleClient, full_corpus: Corpus) -> None:
    streams = _corpus_streams(full_corpus)
    assert len(streams) >= 300
    assert sum(_check_stream(oracle, *s) for s in streams) > 40000


def _mutated(data: bytes, fragments: list[bytes], rng: random.Random) -> bytes:
    """A synthesised output damaged as a model might: fragments of markers inserted, spans
    dropped or repeated, stray non-UTF-8 bytes."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op, i = rng.random(), rng.randint(0, len(out))
        if op < 0.4:
            out[i:i] = rng.choice(fragments) if rng.random() < 0.9 else bytes([rng.randint(0x80, 0xFF)])
        elif op < 0.7:
            del out[i:i + rng.randint(1, 8)]
        else:
            out[i:i] = out[rng.randint(0, len(out)):][:rng.randint(1, 12)]
    return bytes(out)


@pytest.mark.slow
def test_mutated_corpus_streams(oracle: OracleClient, full_corpus: Corpus) -> None:
    """Outputs that do not follow the format (what a small model produces) parse as upstream's
    at every prefix too, fresh and resumed."""
    streams = _corpus_streams(full_corpus)
    fragments = sorted({s.encode() for _, parser, _, _ in streams for p in parser["parsers"]
                        for s in [p.get("literal")] + list(p.get("delimiters", [])) if s})
    fragments += [b" ", b"\n", b"{", b"}", b'"', b"\\", "é".encode(), b"\xe4\xb8"]
    rng = random.Random(20261130)
    total = sum(_check_stream(oracle, case_id, parser, _mutated(data, fragments, rng), 0)
                for case_id, parser, data, _ in streams)
    assert total > 40000


# -- hand-made arenas ------------------------------------------------------------------------


def _lit(s: str) -> dict[str, Any]:
    return {"type": "literal", "literal": s}


def _chars(pattern: str, ranges: list[tuple[int, int]], negated: bool, lo: int, hi: int) -> dict[str, Any]:
    return {"type": "chars", "pattern": pattern, "ranges": [{"start": a, "end": b} for a, b in ranges],
            "negated": negated, "min_count": lo, "max_count": hi}


def _arena(parsers: list[dict[str, Any]], root: int | None = None,
           rules: dict[str, int] | None = None) -> dict[str, Any]:
    return {"parsers": parsers, "rules": rules or {}, "root": len(parsers) - 1 if root is None else root}


def _tagged(inner: dict[str, Any], tag: str = "t") -> dict[str, Any]:
    return _arena([inner, {"type": "tag", "child": 0, "tag": tag}])


ARENAS: dict[str, dict[str, Any]] = {
    "literal": _tagged(_lit("<tool_call>")),
    "literal_multibyte": _tagged(_lit("é中😀")),
    "sequence": _arena([_lit("a"), _lit("bc"), {"type": "tag", "child": 1, "tag": "b"},
                        {"type": "sequence", "children": [0, 2, 0]}]),
    "choice": _arena([_lit("abc"), _lit("ab"), {"type": "tag", "child": 1, "tag": "x"},
                      {"type": "choice", "children": [0, 2]}]),
    "repetition": _arena([_lit("ab"), {"type": "tag", "child": 0, "tag": "x"},
                          {"type": "repetition", "child": 1, "min_count": 2, "max_count": 4}]),
    "optional_empty": _arena([{"type": "epsilon"}, {"type": "repetition", "child": 0, "min_count": 0,
                                                    "max_count": -1}]),
    "lookahead": _arena([_lit("x"), {"type": "and", "child": 0}, {"type": "not", "child": 0}, {"type": "any"},
                         {"type": "sequence", "children": [2, 3, 1, 3]}]),
    "start_end": _arena([{"type": "start"}, {"type": "any"}, {"type": "end"},
                         {"type": "sequence", "children": [0, 1, 2]}]),
    "space": _tagged({"type": "space"}),
    "chars_digits": _tagged(_chars("[0-9]", [(48, 57)], False, 2, 5)),
    "chars_negated": _tagged(_chars("[^<>]", [(60, 60), (62, 62)], True, 1, -1)),
    "chars_unicode": _tagged(_chars("[é-ü中]", [(0xE9, 0xFC), (0x4E2D, 0x4E2D)], False, 0, -1)),
    "chars_optional": _tagged(_chars("[+-]", [(43, 43), (45, 45)], False, 0, 1)),
    "string": _arena([_lit('"'), {"type": "string", "delimiter": '"'}, {"type": "tag", "child": 1, "tag": "s"},
                      {"type": "sequence", "children": [0, 2, 0]}]),
    "string_single": _tagged({"type": "string", "delimiter": "'"}),
    "until": _tagged({"type": "until", "delimiters": ["</think>", "<tool_call>", "<t"]}),
    "until_unicode": _tagged({"type": "until", "delimiters": ["中文", "😀!"]}),
    "rest": _tagged({"type": "until", "delimiters": []}),
    "atomic": _arena([_lit("<a>"), {"type": "tag", "child": 0, "tag": "open"}, {"type": "atomic", "child": 1},
                      {"type": "until", "delimiters": ["</a>"]}, {"type": "tag", "child": 3, "tag": "body"},
                      {"type": "sequence", "children": [2, 4]}]),
    "rules": _arena([_lit("["), {"type": "ref", "name": "list"}, _lit(","), _lit("]"), _lit("x"),
                     {"type": "choice", "children": [1, 4]},
                     {"type": "sequence", "children": [2, 5]},
                     {"type": "repetition", "child": 6, "min_count": 0, "max_count": -1},
                     {"type": "sequence", "children": [0, 5, 7, 3]},
                     {"type": "rule", "name": "list", "child": 8, "trigger": False}],
                    rules={"list": 9}),
}

INPUTS: list[bytes] = [
    b"", b"<", b"<tool", b"<tool_call>", b"<tool_call>x", b"a", b"abc", b"abca", b"abab", b"ababab", b"ababababab",
    b"xy", b"yx", b"x", b"12", b"123456", b"1", b"<x>", b"ab<", b"ab>cd", b" \t\n\x0b\x0c\rz",
    b'"a\\"b\\u00e9\\n"', b'"a\\', b'"a\\u12', b'"a\\u12G"', b'"a\\q"', b"'a\\'b'", b"it\\\"s",
    b"text</think>rest", b"text</th", b"text<t", b"<ttt", "中文 😀! 中".encode(), "中文"[:1].encode() + b"\xe6",
    "é中😀".encode(), "é中😀".encode()[:-1], "éüö中".encode(), b"<a>body</a>", b"<a", b"<a>bo",
    b"[x,[x,x],x]", b"[x,[x", b"[", b"[x,", b"+", b"-", b"+1",
    b"\xff", b"a\xffb", b"\xc3", b"a\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\x80", b"\xf8abc", b"\x80\x80x",
    b"ab\xe2\x82\xac", b"</th\xffink>", b"\xf0\x9f\x98", b"text\xe4\xb8</think>",
]


@pytest.mark.parametrize("name", sorted(ARENAS))
@pytest.mark.parametrize("lenient", [True, False])
def test_hand_made_arenas(oracle: OracleClient, name: str, lenient: bool) -> None:
    arena_json = ARENAS[name]
    compiled = CompiledParser(load_arena(arena_json))
    for data in INPUTS:
        expected = oracle.request("peg_parse", parser=arena_json, text_hex=data.hex(), lenient=lenient)
        assert not isinstance(expected, OracleError), (name, data, expected)
        assert result_json(parse(compiled, data, lenient=lenient)) == expected, (name, data, lenient)


def test_start_offset(oracle: OracleClient) -> None:
    arena_json = ARENAS["until"]
    for start in range(0, 8):
        expected = oracle.request("peg_parse", parser=arena_json, text="abc</think>", start=start)
        assert result_json(parse(load_arena(arena_json), "abc</think>", start=start)) == expected


def test_arena_errors_are_typed() -> None:
    no_root = Arena(parsers=(Literal("a"),), rules={})
    with pytest.raises(LlamaException, match="No root parser set"):
        parse(no_root, "a")
    missing = load_arena(_arena([{"type": "ref", "name": "nowhere"}]))
    with pytest.raises(LlamaException, match="Rule not found: nowhere"):
        parse(missing, "a")
    cycle = load_arena(_arena([{"type": "sequence", "children": [0]}], root=0))
    with pytest.raises(LlamaException, match="nests deeper"):
        parse(cycle, "a")


def test_incremental_restarts_when_text_is_not_extended() -> None:
    arena = load_arena(ARENAS["until"])
    inc = IncrementalParser(arena)
    first = inc.parse("hello</think>")
    assert first.end == 5
    again = inc.parse("bye")  # not an extension: starts over
    assert result_json(again) == result_json(parse(arena, "bye"))


# -- properties ------------------------------------------------------------------------------


def _fragments(arena_json: dict[str, Any]) -> list[bytes]:
    frags = {b"", b" ", b"\n", b"x", b"\xff", b"\xe4\xb8", "é".encode(), b"\\", b'"', b"{", b"}", b"0", b"1"}
    for p in arena_json["parsers"]:
        for s in [p.get("literal")] + list(p.get("delimiters", [])):
            if s:
                b = s.encode("utf-8")
                frags.update({b, b[: len(b) // 2]})
    return sorted(frags)


PROPERTY_ARENAS = sorted(ARENAS)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_inputs_match_upstream(oracle: OracleClient, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(PROPERTY_ARENAS))
    arena_json = ARENAS[name]
    pieces = data.draw(st.lists(st.sampled_from(_fragments(arena_json)), max_size=12))
    text = b"".join(pieces)
    lenient = data.draw(st.booleans())
    expected = oracle.request("peg_parse", parser=arena_json, text_hex=text.hex(), lenient=lenient)
    assert result_json(parse(load_arena(arena_json), text, lenient=lenient)) == expected


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_appends_give_fresh_results(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(PROPERTY_ARENAS))
    arena_json = ARENAS[name]
    compiled = CompiledParser(load_arena(arena_json))
    inc = IncrementalParser(compiled, lenient=data.draw(st.booleans()))
    text = b""
    for piece in data.draw(st.lists(st.sampled_from(_fragments(arena_json)), min_size=1, max_size=10)):
        text += piece
        assert result_json(inc.parse(text)) == result_json(parse(compiled, text, lenient=inc.lenient))


_NODE = st.one_of(
    st.builds(lambda s: {"type": "literal", "literal": s}, st.text(max_size=3)),
    st.builds(lambda c: {"type": "sequence", "children": c}, st.lists(st.integers(0, 7), max_size=3)),
    st.builds(lambda c: {"type": "choice", "children": c}, st.lists(st.integers(0, 7), max_size=3)),
    st.builds(lambda c, a, b: {"type": "repetition", "child": c, "min_count": a, "max_count": b},
              st.integers(0, 7), st.integers(0, 2), st.sampled_from([-1, 0, 1, 3])),
    st.builds(lambda k, c: {"type": k, "child": c}, st.sampled_from(["and", "not", "atomic"]), st.integers(0, 7)),
    st.builds(lambda c, t: {"type": "tag", "child": c, "tag": t}, st.integers(0, 7), st.sampled_from(["a", "b"])),
    st.builds(lambda d: {"type": "until", "delimiters": d}, st.lists(st.text(max_size=3), max_size=2)),
    st.builds(lambda d: {"type": "string", "delimiter": d}, st.sampled_from(['"', "'"])),
    st.sampled_from([{"type": "any"}, {"type": "space"}, {"type": "epsilon"}, {"type": "end"}, {"type": "start"},
                     {"type": "ref", "name": "r"}, {"type": "ref", "name": "missing"}]),
)


@settings(max_examples=300, deadline=None)
@given(nodes=st.lists(_NODE, min_size=8, max_size=8), text=st.binary(max_size=24), lenient=st.booleans())
def test_random_arenas_never_raise_untyped(nodes: list[dict[str, Any]], text: bytes, lenient: bool) -> None:
    arena_json = {"parsers": nodes + [{"type": "rule", "name": "r", "child": 0, "trigger": False}],
                  "rules": {"r": 8}, "root": 8}
    try:
        parse(load_arena(arena_json), text, lenient=lenient)
    except LlamaException:
        pass


def test_deep_nesting(oracle: OracleClient) -> None:
    arena = build_peg_parser(lambda p: p.json() + p.end())
    shallow = "[" * 120 + '{"a": 1}' + "]" * 120
    expected = oracle.request("peg_parse", parser=arena.to_json(), text=shallow, lenient=False)
    assert result_json(parse(arena, shallow, lenient=False)) == expected
    # deeper than the oracle's answer can travel as JSON: success over the whole input, as upstream's
    deep = "[" * 1500 + "1" + "]" * 1500
    result = parse(arena, deep, lenient=False)
    assert (result.type, result.end) == ("success", len(deep))
    # past the recursion budget: a typed error, never a crash
    with pytest.raises(LlamaException, match="nests deeper"):
        parse(arena, "[" * 20000, lenient=True)


def test_recursion_limit_is_restored_after_parses_in_threads() -> None:
    import sys
    import threading

    arena = build_peg_parser(lambda p: p.json() + p.end())
    before = sys.getrecursionlimit()
    results: list[str] = []

    def work() -> None:
        for _ in range(20):
            results.append(parse(arena, "[" * 800 + "1" + "]" * 800, lenient=False).type)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["success"] * 80
    assert sys.getrecursionlimit() == before
