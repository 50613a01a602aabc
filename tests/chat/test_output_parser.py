"""ChatOutputParser (upstream's common_chat_peg_parse) and TaggedPegParser against the oracle.

Streams from the corpus are fed prefix by prefix to one resumable ChatOutputParser; every message
(and every parse error) must equal the oracle's chat_parse_stream step. The content-only fallback,
the generation-prompt prefix and arbitrary text (never anything but a message or a
LlamaException) are checked too. Tagged parsers (the autoparser's probes) must pick the same start
and extract the same tags as upstream's parse at each start.
"""

from __future__ import annotations

import functools
import itertools
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llamact.chat.diffs import ChatDiffError, compute_diffs, set_tool_call_ids
from llamact.chat.messages import ChatMessage
from llamact.chat.output_parser import ChatOutputParser, ChatParseError, parse_chat_output
from llamact.chat.tagged_parser import build_tagged_peg_parser
from llamact.errors import LlamaException
from llamact.parity.corpus import Corpus, build_corpus
from llamact.parity.oracle import OracleClient, OracleError
from llamact.peg.builder import ParserBuilder

pytestmark = pytest.mark.parity

LLAMA_CPP = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp"
TEMPLATES = ["Qwen-Qwen3-0.6B", "google-gemma-4-31B-it", "MiniMax-M3", "LFM2-8B-A1B", "openai-gpt-oss-120b",
             "upstage-Solar-Open-100B"]


@pytest.fixture(scope="module")
def streams(oracle: OracleClient) -> list[dict[str, Any]]:
    corpus = build_corpus(oracle, LLAMA_CPP, templates=TEMPLATES)
    return [c.input for c in corpus.cases["chat_parse"] if c.id.endswith("/final")]


def test_streams_match_upstream_step_by_step(oracle: OracleClient, streams: list[dict[str, Any]]) -> None:
    assert len(streams) >= 25
    errors = 0
    for inp in streams:
        request = {k: inp[k] for k in ("parser", "format", "generation_prompt", "reasoning_format", "text")}
        steps = oracle.request("chat_parse_stream", **request)
        assert not isinstance(steps, OracleError), steps
        parser = ChatOutputParser(inp["parser"], inp["format"], inp["generation_prompt"])
        data = inp["text"].encode("utf-8")
        for step in steps:
            text = data[:step["end"]].decode("utf-8")
            if "error" in step:
                errors += 1
                with pytest.raises(ChatParseError) as info:
                    parser.parse(text, step["is_partial"])
                assert info.value.message == step["error"]
            else:
                assert parser.parse(text, step["is_partial"]).to_dict() == step["message"], (inp["stream"], step)
    assert errors > 0  # Solar-Open's partial prefixes fail upstream too


@pytest.mark.parametrize("parser", [None, ""])
def test_no_parser_is_content_only(oracle: OracleClient, parser: Any) -> None:
    for text in ["", "plain text", "<think>x</think>y", "é🌞"]:
        for partial in (True, False):
            expected = oracle.request("chat_parse", parser=parser, format="Content-only", text=text,
                                      is_partial=partial)
            got = parse_chat_output(text, partial, parser, "Content-only")
            assert got.to_dict() == expected


def test_generation_prompt_is_parsed_first(oracle: OracleClient, streams: list[dict[str, Any]]) -> None:
    with_prompt = [s for s in streams if s["generation_prompt"]]
    assert with_prompt
    for inp in with_prompt[:5]:
        for text in ["", "</think>", "Answer.", inp["text"]]:
            expected = oracle.request("chat_parse", parser=inp["parser"], format=inp["format"],
                                      generation_prompt=inp["generation_prompt"], text=text, is_partial=True)
            got = parse_chat_output(text, True, inp["parser"], inp["format"], inp["generation_prompt"])
            assert got.to_dict() == expected


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_arbitrary_text_gives_a_message_or_a_typed_error(streams: list[dict[str, Any]], data: st.DataObject) -> None:
    inp = data.draw(st.sampled_from(streams))
    pieces = data.draw(st.lists(st.one_of(st.text(max_size=6), st.sampled_from(
        ["<think>", "</think>", "<tool_call>", "</tool_call>", "{", "}", '"', "\\", "<|", "|>", "[", "]"])),
        max_size=15))
    parser = ChatOutputParser(inp["parser"], inp["format"], inp["generation_prompt"])
    text = ""
    for piece in pieces:
        text += piece
        try:
            parser.parse(text, True)
        except LlamaException:
            pass
    try:
        parser.parse(text, False)
    except LlamaException:
        pass


# -- tagged parsers --------------------------------------------------------------------------


def _tags_from_oracle(answer: dict[str, Any], data: bytes) -> dict[str, str]:
    """Upstream's tag mapper over the oracle's AST, written independently: last text per tag."""
    tags: dict[str, str] = {}

    def walk(node: dict[str, Any]) -> None:
        if node["tag"]:
            tags[node["tag"]] = data[node["start"]:node["end"]].decode() if node["start"] < len(data) else ""
        for child in node["children"]:
            walk(child)

    for node in answer["nodes"]:
        walk(node)
    return tags


def _wrapped(p: ParserBuilder) -> Any:
    return p.tag("pre", p.marker() + p.space()) + p.literal("THINK") + p.tag("post", p.space() + p.marker() +
                                                                             p.space()) + p.rest()


def _delimited(p: ParserBuilder) -> Any:
    return p.literal("THINK") + p.space() + p.optional(p.tag("post", p.marker() + p.space()) + p.rest())


@pytest.mark.parametrize("build", [_wrapped, _delimited])
@pytest.mark.parametrize("text", ["<think>THINK</think>Answer", "xx [T] THINK [/T] rest", "no marker here", "",
                                  "<a>THINK", "é<b>THINK <c> tail"])
def test_tagged_parse_anywhere_matches_upstream(oracle: OracleClient, build: Any, text: str) -> None:
    tagged = build_tagged_peg_parser(build)
    arena_json = tagged.compiled.arena.to_json()
    data = text.encode()
    got = tagged.parse_anywhere_and_extract(text)
    for start in range(max(len(data), 1)):
        answer = oracle.request("peg_parse", parser=arena_json, text=text, lenient=False, start=start)
        if answer["type"] == "success" or start >= len(data) - 1:
            break
    assert (got.result.type, got.result.start, got.result.end) == (answer["type"], answer["start"], answer["end"])
    assert got.tags == _tags_from_oracle(answer, data)
    strict = tagged.parse_and_extract(text)
    answer = oracle.request("peg_parse", parser=arena_json, text=text, lenient=False)
    assert (strict.result.type, strict.result.end, strict.tags) == (answer["type"], answer["end"],
                                                                    _tags_from_oracle(answer, data))


def test_deeply_nested_arguments(oracle: OracleClient) -> None:
    corpus = build_corpus(oracle, LLAMA_CPP, templates=["google-gemma-4-31B-it"])
    inp = next(c.input for c in corpus.cases["chat_parse"] if "/one_call@" in c.id and c.id.endswith("/final"))
    for depth in (50, 1000):
        value = "[" * depth + "1" + "]" * depth
        text = f'<|tool_call>call:get_weather{{city:{value},unit:<|"|>celsius<|"|>}}<tool_call|>'
        expected = oracle.request("chat_parse", parser=inp["parser"], format=inp["format"],
                                  generation_prompt=inp["generation_prompt"], text=text, is_partial=False)
        got = parse_chat_output(text, False, inp["parser"], inp["format"], inp["generation_prompt"])
        assert got.to_dict() == expected
    with pytest.raises(LlamaException, match="nests deeper"):
        parse_chat_output("<|tool_call>call:get_weather{city:" + "[" * 20000, True, inp["parser"], inp["format"],
                          inp["generation_prompt"])


def _damaged(text: str, fragments: list[str], rng: random.Random) -> str:
    for _ in range(rng.randint(1, 4)):
        op, i = rng.random(), rng.randint(0, len(text))
        if op < 0.5:
            text = text[:i] + rng.choice(fragments) + text[i:]
        elif op < 0.75:
            text = text[:i] + text[i + rng.randint(1, 8):]
        else:
            j = rng.randint(0, len(text))
            text = text[:i] + text[j:j + rng.randint(1, 12)] + text[i:]
    return text


@pytest.mark.slow
def test_damaged_outputs_stream_as_upstream(oracle: OracleClient, full_corpus: Corpus) -> None:
    """Every corpus stream, damaged (marker fragments inserted, spans dropped or repeated), fed to
    one ChatOutputParser prefix by prefix: messages, parse errors and the server's diffs (with
    stable call ids) equal upstream's at every step."""
    corpus = full_corpus
    finals = [c.input for c in corpus.cases["chat_parse"] if c.id.endswith("/final")]
    fragments = sorted({s for f in finals for p in f["parser"]["parsers"]
                        for s in [p.get("literal")] + list(p.get("delimiters", [])) if s})
    fragments += [" ", "\n", "{", "}", '"', "\\", "é", "🌞", "True", "None", "'", ":", ","]
    rng = random.Random(20261130)
    steps_checked = 0
    for inp in finals:
        text = _damaged(inp["text"], fragments, rng)
        request = {k: inp[k] for k in ("parser", "format", "generation_prompt", "reasoning_format")}
        steps = oracle.request("chat_parse_stream", text=text, **request)
        assert not isinstance(steps, OracleError), steps
        parser = ChatOutputParser(inp["parser"], inp["format"], inp["generation_prompt"])
        previous, ids = ChatMessage(), []
        new_id = functools.partial(lambda c: f"call_{next(c)}", itertools.count())
        data = text.encode("utf-8")
        for step in steps:
            steps_checked += 1
            where = (inp["stream"], step["end"], step["is_partial"])
            try:
                message = parser.parse(data[:step["end"]].decode("utf-8"), step["is_partial"])
            except ChatParseError as exc:
                assert step.get("error") == exc.message, where
                continue
            assert message.to_dict() == step["message"], where
            if message.empty():
                continue
            set_tool_call_ids(message, ids, new_id)
            before, previous = previous, message
            try:
                diffs: Any = [d.to_dict() for d in compute_diffs(before, message)]
            except ChatDiffError as exc:
                diffs = {"error": exc.message}
            assert diffs == (step["diffs"] if "diffs" in step else {"error": step["diffs_error"]}), where
    assert steps_checked > 40000
