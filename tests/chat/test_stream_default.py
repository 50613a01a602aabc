"""docs/design.md deviation 5 (streamed content and thinking equal the final message) and the rest of
ChatStreamParser's contract, with upstream's behaviour from the oracle beside each.

The property tests feed random outputs (pieces of every family's markers, whitespace, escapes,
tool-call envelopes) in random token splits to many templates, with and without tools: in the
default mode the concatenated deltas equal the final message (content, thinking, calls), and in
upstream mode every step equals the oracle's.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stream_checks import apply_answer, compare_upstream, stream_default, stream_upstream

from llamact.chat.deltas import ChatDelta
from llamact.chat.output_parser import ChatParseError
from llamact.chat.peg_builder import build_chat_peg_parser
from llamact.chat.result import ChatTemplateResult
from llamact.chat.streaming import ChatStreamParser, gen_tool_call_id
from llamact.errors import LlamaInferenceException, LlamaStateException
from llamact.parity.corpus import synthesise_output
from llamact.parity.oracle import OracleClient
from llamact.parity.scenarios import ASSISTANT_OUTPUTS
from llamact.parity.stream_replay import counter_ids, template_result, token_pieces

pytestmark = pytest.mark.parity

WEATHER: dict[str, Any] = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}

TEMPLATES = [
    "Qwen-Qwen3-0.6B", "Qwen-Qwen2.5-7B-Instruct", "Qwen3-Coder", "Qwen3.5-4B", "ByteDance-Seed-OSS",
    "openai-gpt-oss-120b", "google-gemma-4-31B-it", "MiniMax-M3", "Kimi-K2-Thinking", "GLM-4.6",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "deepseek-ai-DeepSeek-V3.1", "meta-llama-Llama-3.1-8B-Instruct",
    "mistralai-Mistral-Nemo-Instruct-2407", "mistralai-Ministral-3-14B-Reasoning-2512", "upstage-Solar-Open-100B",
    "LFM2.5-8B-A1B", "CohereForAI-c4ai-command-r7b-12-2024-tool_use", "NVIDIA-Nemotron-Nano-v2", "Apertus-8B-Instruct",
]


def _result(oracle: OracleClient, template: str, tools: list[Any] | None = None, **inputs: Any) -> ChatTemplateResult:
    return template_result(apply_answer(oracle, template, tools=tools, **inputs))


# -- the corpus: streamed = final, final = upstream's but for the deviations ------------------------

# where the default final message differs from upstream's on the corpus outputs, and why
CORPUS_DEVIATIONS = {
    # deviation 2: these templates render a boolean as True (Seed-OSS also dicts with single
    # quotes); validated against the schema the typed call is read, upstream drops or refuses it
    f"{t}/{o}": "deviation 2" for t in ("Qwen3-Coder", "Qwen3.5-4B", "ByteDance-Seed-OSS")
    for o in ("typed_call", "parallel_calls")
}


def test_corpus_streams_equal_their_final_message(oracle: OracleClient) -> None:
    rng = random.Random(5)
    compared = differing = recovered_17 = 0
    for template in TEMPLATES:
        source = (template_source_path(template)).read_text(encoding="utf-8")
        for output in ASSISTANT_OUTPUTS:
            synthesised = synthesise_output(oracle, source, output)
            if synthesised is None:
                continue
            answer, text, _ = synthesised
            stream_id = f"{template}/{output.name}"
            pieces = token_pieces(text, rng)
            upstream_final = oracle.request("chat_parse", parser=answer["parser"], format=answer["format"],
                                            generation_prompt=answer["generation_prompt"], text=text,
                                            is_partial=False)
            default = stream_default(template_result(answer), text, pieces, tools=output.tools)
            assert default.matches_message(), stream_id
            assert not default.parser.diverged, stream_id
            compared += 1
            if not isinstance(upstream_final, dict):
                # upstream fails: a deviation parses it, or (17) the reply is what could be read, the
                # parse error reported beside it
                recovery = default.parser.recovery
                assert stream_id in CORPUS_DEVIATIONS or (recovery is not None and recovery.parse_error), stream_id
                recovered_17 += stream_id not in CORPUS_DEVIATIONS
                continue
            same = (default.message.content == upstream_final["content"]
                    and default.message_calls == [(c["name"], c["arguments"]) for c in upstream_final["tool_calls"]])
            if not same:
                differing += 1
                assert stream_id in CORPUS_DEVIATIONS, (stream_id, default.message.to_dict(), upstream_final)
    assert compared >= 80
    assert differing > 0


def template_source_path(name: str) -> Any:
    from stream_checks import TEMPLATES_DIR

    return TEMPLATES_DIR / f"{name}.jinja"


# -- hold-back, each beside upstream's stream -----------------------------------------------------


def test_trailing_whitespace_waits_for_more_text(oracle: OracleClient) -> None:
    result = _result(oracle, "Qwen-Qwen2.5-7B-Instruct")
    pieces = ["Hello  ", "\n", "world.\n\n"]
    parser = ChatStreamParser(result, tool_call_id=counter_ids())
    steps = [parser.feed(p) for p in pieces] + [parser.finish("eog")]
    assert steps == [[ChatDelta(content="Hello")], [], [ChatDelta(content="  \nworld.")], [ChatDelta(content="\n\n")]]
    upstream = stream_upstream(result, "".join(pieces), pieces)
    assert upstream.content == parser.message.content == "Hello  \nworld.\n\n"


def test_leading_whitespace_waits_for_other_text(oracle: OracleClient) -> None:
    result = _result(oracle, "Qwen-Qwen2.5-7B-Instruct")
    parser = ChatStreamParser(result)
    assert parser.feed(" ") == [] and parser.feed("\n") == []
    rest = parser.feed("Hi") + parser.finish("eog")
    assert "".join(d.content for d in rest) == parser.message.content


def test_a_possible_marker_waits_until_ruled_out(oracle: OracleClient) -> None:
    """Kimi K2's partial parse puts "<|" (the start of a special token inside the thought) in the
    content for one token, then takes it back: upstream streams it, the default stream does not."""
    result = _result(oracle, "Kimi-K2-Thinking")
    text = "<think>ab<|end|> and more</think>Done."
    pieces = list(text)
    upstream = stream_upstream(result, text, pieces)
    assert upstream.content == "<|Done."  # streamed; its final message's content is "Done."
    assert upstream.message.content == "Done."
    default = stream_default(result, text, pieces)
    assert default.content == default.message.content == "Done."
    assert default.thinking == default.message.reasoning_content == "ab<|end|> and more"


def test_a_tool_call_opening_waits_with_tools(oracle: OracleClient) -> None:
    result = _result(oracle, "Qwen-Qwen2.5-7B-Instruct", tools=[WEATHER])
    text = 'Let me check.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    parser = ChatStreamParser(result, tools=[WEATHER], tool_call_id=counter_ids())
    sent = "".join(d.content for piece in list(text) for d in parser.feed(piece))
    assert sent == "Let me check."
    # without the newline upstream's parser takes the envelope as content (not a call): the
    # final parse says so, and the held text comes then
    rest = parser.finish("eog")
    assert sent + "".join(d.content for d in rest) == parser.message.content
    assert parser.message.content.startswith("Let me check.\n<tool_call>")


def test_tool_calls_come_whole_after_validation(oracle: OracleClient) -> None:
    result = _result(oracle, "Qwen-Qwen3-0.6B", tools=[WEATHER])
    text = ('<think>\nCheck.\n</think>\n\nOn it.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
            '\n</tool_call>')
    pieces = token_pieces(text, random.Random(2))
    upstream = stream_upstream(result, text, pieces)
    parser = ChatStreamParser(result, tools=[WEATHER], tool_call_id=counter_ids())
    during = [d for p in pieces for d in parser.feed(p)]
    final = parser.finish("eog")
    assert not any(d.tool_calls for d in during)
    calls = [c for d in final for c in d.tool_calls]
    assert [(c.index, c.id, c.name, c.arguments) for c in calls] == [(0, "call_0", "get_weather", '{"city": "Paris"}')]
    assert upstream.calls == [("get_weather", '{"city": "Paris"}')] and upstream.parser.finish_reason == "tool_calls"
    assert parser.finish_reason == "tool_calls"


@pytest.mark.parametrize("stop", ["max_tokens", "context_full", "cancelled"])
def test_tool_calls_are_withheld_when_generation_is_cut_short(oracle: OracleClient, stop: str) -> None:
    result = _result(oracle, "Qwen-Qwen3-0.6B", tools=[WEATHER])
    text = ('On it.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
            '<tool_call>\n{"na')
    pieces = token_pieces(text, random.Random(4))
    default = stream_default(result, text, pieces, tools=[WEATHER], stop_reason=stop)
    assert default.calls == [] and default.message.tool_calls == []
    assert default.content == default.message.content == "On it.\n"
    assert default.parser.finish_reason == ("cancelled" if stop == "cancelled" else "length")
    if stop != "cancelled":  # upstream's final parse of the cut output keeps the first call
        upstream = stream_upstream(result, text, pieces, stop_reason=stop)
        assert upstream.message.tool_calls and upstream.parser.finish_reason == "length"


def test_a_forced_open_thought_that_never_closes(oracle: OracleClient) -> None:
    """Not an exception here: a thought is trimmed whether it closes or not, so the stream that
    held its leading and trailing whitespace is the final reasoning. (Upstream keeps the trailing
    whitespace it streamed.)"""
    result = _result(oracle, "Qwen3.5-4B")
    text = " \n Hello there. \n\n"
    pieces = [" \n", " Hello", " there.", " \n", "\n"]
    default = stream_default(result, text, pieces)
    assert default.thinking == default.message.reasoning_content == "Hello there."
    assert not default.parser.diverged
    assert stream_upstream(result, text, pieces).thinking == "Hello there. \n\n"


def test_documented_exception_a_parse_that_takes_text_back() -> None:
    """The one way the stream and the final message differ: a parse that later puts text it had
    given as content elsewhere (beyond the hold-back rules). Nothing can be taken back: the stream
    keeps what it sent, the final message is the parse, ``diverged`` names the field. None of the
    vendored templates does this on the property tests' outputs; this parser does on purpose."""
    arena = build_chat_peg_parser(lambda p: p.choice(
        [p.content(p.until("\n")) + p.literal("\nEND"), p.reasoning(p.rest())]) + p.end())
    result = ChatTemplateResult(format="peg-native", family="test", prompt="", generation_prompt="", grammar="",
                                grammar_lazy=False, grammar_triggers=(), preserved_tokens=(), additional_stops=(),
                                supports_thinking=True, thinking_start_tag="", thinking_end_tags=(), parser=arena,
                                message_delimiters=())
    default = stream_default(result, "ab\nX", ["ab", "\nX"])
    assert default.content == "ab" and default.message.content == ""
    assert default.thinking == default.message.reasoning_content == "ab\nX"
    assert default.parser.diverged == frozenset({"content"})


# -- finish reasons, continuation, errors -----------------------------------------------------------


@pytest.mark.parametrize("upstream", [True, False])
@pytest.mark.parametrize(("stop", "with_call", "expected"), [
    ("eog", True, "tool_calls"), ("stop_string", True, "tool_calls"), ("eog", False, "stop"),
    ("stop_string", False, "stop"), ("max_tokens", False, "length"), ("context_full", False, "length"),
    ("max_tokens", True, "length"), ("cancelled", False, "cancelled"),
])
def test_finish_reason_as_llama_server(oracle: OracleClient, upstream: bool, stop: str, with_call: bool,
                                       expected: str) -> None:
    result = _result(oracle, "Qwen-Qwen2.5-7B-Instruct", tools=[WEATHER])
    text = 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' \
        if with_call else "Sure."
    parser = ChatStreamParser(result, tools=[WEATHER], upstream_compat=upstream)
    assert parser.finish_reason is None
    parser.feed(text)
    parser.finish(stop)
    assert parser.finish_reason == expected


def test_continuation_is_not_streamed_again(oracle: OracleClient) -> None:
    prefill = {"role": "assistant", "content": "The weather in Paris is"}
    result = _result(oracle, "Qwen-Qwen3-0.6B", messages=[{"role": "user", "content": "Weather?"}, prefill],
                     add_generation_prompt=False, continue_final_message=True)
    for upstream in (True, False):
        parser = ChatStreamParser(result, upstream_compat=upstream, is_continuation=True)
        deltas = parser.feed(" sunny") + parser.feed(" today.") + parser.finish("eog")
        assert "".join(d.content for d in deltas) == " sunny today."
        assert parser.message.content == "The weather in Paris is sunny today."


def test_final_parse_failure_is_answered_not_raised_and_cut_short_keeps_what_it_had(oracle: OracleClient) -> None:
    """An output the format cannot parse: upstream's final parse fails (llama-server: a 500 or an
    aborted stream), the default stream answers with the text as content and the parse error beside
    it (deviation 17; the streamed content is its prefix); mid-stream the default stream does not fail
    (upstream's partial parse may throw there), and an output cut short keeps what it had."""
    result = _result(oracle, "Mistral-Small-3.2-24B-Instruct-2506", tools=[WEATHER])
    text = 'Sure.[TOOL_CALLS]get_weather[CALL_ID]call_0001[ARGS]{"city": "Paris"}'
    upstream = ChatStreamParser(result, tools=[WEATHER], upstream_compat=True)
    for piece in token_pieces(text, random.Random(0)):
        try:
            upstream.feed(piece)
        except ChatParseError:
            pass
    with pytest.raises(ChatParseError):
        upstream.finish("eog")
    parser = ChatStreamParser(result, tools=[WEATHER])
    sent = [d for piece in token_pieces(text, random.Random(0)) for d in parser.feed(piece)]
    sent += parser.finish("eog")
    assert "".join(d.content for d in sent) == parser.message.content == text
    assert parser.message.tool_calls == [] and parser.finish_reason == "stop"
    assert parser.recovery is not None and parser.recovery.recovered == ()
    assert parser.recovery.parse_error == "The model produced output that does not match the expected peg-native format"
    cut = stream_default(result, text, tools=[WEATHER], stop_reason="max_tokens")
    assert cut.matches_message() and cut.content == "Sure." and cut.parser.recovery is None


def test_misuse_is_typed(oracle: OracleClient) -> None:
    result = _result(oracle, "Qwen-Qwen2.5-7B-Instruct")
    parser = ChatStreamParser(result)
    with pytest.raises(LlamaInferenceException):
        parser.finish("done")
    parser.finish("eog")
    with pytest.raises(LlamaStateException):
        parser.feed("more")
    with pytest.raises(LlamaStateException):
        parser.finish("eog")


# -- property tests ---------------------------------------------------------------------------------

FRAGMENTS = [
    " ", "\n", "\n\n", "  ", "\t", "Hello", "world.", "é🌞", "\\n", "\\r", "\\", "x", "{", "}", '"',
    "<think>", "</think>", "\n</think>", "<seed:think>", "</seed:think>",
    "<tool_call>", "<tool_call>\n", "</tool_call>", "<seed:tool_call>\n", "</seed:tool_call>",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    '{{"name": "get_weather", "arguments": {"city": "Rome"}}}',
    "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n",
    "<function=get_weather>\n<parameter=days>\n2\n</parameter>\n</function>\n", "<function=nope>\n</function>\n",
    "<parameter=city>Oslo</parameter>\n", "<|channel|>analysis<|message|>", "<|channel|>final<|message|>", "<|end|>",
    "<|start|>assistant", "<|channel>thought\n", "<channel|>", "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}",
    "<tool_call|>", "[TOOL_CALLS]", "[ARGS]", "<|tool_calls_section_begin|>", "<｜tool▁calls▁begin｜>",
    "<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|im_end|>", "<|python_tag|>", "[THINK]", "[/THINK]",
]

outputs = st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join)


@pytest.fixture(scope="module")
def results(oracle: OracleClient) -> dict[tuple[str, bool], ChatTemplateResult]:
    return {(t, tools): _result(oracle, t, tools=[WEATHER] if tools else None)
            for t in TEMPLATES for tools in (True, False)}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), text=outputs)
def test_default_stream_equals_its_final_message(results: dict[tuple[str, bool], ChatTemplateResult],
                                                 data: st.DataObject, text: str) -> None:
    template, tools = data.draw(st.sampled_from(sorted(results)))
    stop = data.draw(st.sampled_from(["eog", "eog", "stop_string", "max_tokens"]))
    pieces = token_pieces(text, random.Random(data.draw(st.integers(0, 2**16))))
    try:
        streamed = stream_default(results[(template, tools)], text, pieces, tools=[WEATHER] if tools else None,
                                  stop_reason=stop)
    except ChatParseError:
        assert stop in ("eog", "stop_string")  # only a complete output's final parse may fail
        return
    assert streamed.matches_message(), (streamed.content, streamed.thinking, streamed.message.to_dict())
    assert not streamed.parser.diverged
    assert streamed.early_calls == 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), text=outputs)
def test_upstream_mode_equals_the_oracle(oracle: OracleClient, data: st.DataObject, text: str) -> None:
    template = data.draw(st.sampled_from(TEMPLATES))
    tools = data.draw(st.booleans())
    answer = apply_answer(oracle, template, tools=[WEATHER] if tools else None)
    pieces = token_pieces(text, random.Random(data.draw(st.integers(0, 2**16))))
    _, bad = compare_upstream(oracle, answer, text, pieces)
    assert not bad, bad[:3]


def test_tool_call_ids_are_the_models_else_new(oracle: OracleClient) -> None:
    """A call keeps the id the model wrote; one without gets a new one: by default 32 characters of
    [0-9A-Za-z], as llama-server's gen_tool_call_id. Upstream's stream fixes a call's id when the
    call first appears, so an id the model writes after the name (Mistral Nemo writes it after the
    arguments) is replaced by a random one; the default stream sends calls whole, with the model's."""
    tools = [WEATHER]
    nemo = _result(oracle, "mistralai-Mistral-Nemo-Instruct-2407", tools=tools)
    text = '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abc123XYZ"}]'
    ids = {}
    for upstream in (True, False):
        parser = ChatStreamParser(nemo, tools=tools, upstream_compat=upstream)
        deltas = [d for piece in token_pieces(text, random.Random(0)) for d in parser.feed(piece)]
        deltas += parser.finish("eog")
        ids[upstream] = [c.id for d in deltas for c in d.tool_calls if c.id]
        assert [c.id for c in parser.message.tool_calls] == ids[upstream]
    assert ids[False] == ["abc123XYZ"]
    (random_id,) = ids[True]
    assert len(random_id) == 32 and random_id.isalnum() and random_id.isascii()
    kimi = _result(oracle, "Kimi-K2-Thinking", tools=tools)
    text = ('<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>'
            '{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>')
    for upstream in (True, False):
        parser = ChatStreamParser(kimi, tools=tools, upstream_compat=upstream)
        for piece in token_pieces(text, random.Random(0)):
            parser.feed(piece)
        parser.finish("eog")
        assert [c.id for c in parser.message.tool_calls] == ["functions.get_weather:0"]
    assert gen_tool_call_id() != gen_tool_call_id()
