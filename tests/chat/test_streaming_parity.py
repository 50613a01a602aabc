"""ChatStreamParser in upstream mode against llama-server's streaming, step by step (the oracle).

Model outputs are synthesised through each template as the parity corpus does (every assistant
output of the scenario matrix: content, reasoning, one call, typed call, parallel calls). The
oracle's ``chat_parse_stream`` runs upstream's ``update_chat_msg`` logic over the same text cut at
the same places (parse, skip empty, stable ids, ``compute_diffs``); each of our steps must give the
same diffs, or the same error with upstream's message. Cuts: every character (from the empty
text, as the corpus streams), and token-sized pieces of 1-6 characters.
The scoreboard's ``msg_diffs`` row replays every template's streams through the same parser.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from stream_checks import apply_answer, compare_upstream, template_source

from llamact.chat.output_parser import ChatParseError
from llamact.chat.streaming import ChatStreamParser
from llamact.errors import LlamaStateException
from llamact.parity.corpus import synthesise_output
from llamact.parity.oracle import OracleClient, OracleError
from llamact.parity.scenarios import ASSISTANT_OUTPUTS
from llamact.parity.stream_replay import counter_ids, delta_json, template_result, token_pieces

pytestmark = pytest.mark.parity

# one or more templates of every family: specialized builders and autoparser layouts
TEMPLATES = [
    "Qwen-Qwen3-0.6B", "Qwen-Qwen2.5-7B-Instruct", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", "Qwen3-Coder",
    "Qwen3.5-4B", "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "StepFun3.5-Flash", "ByteDance-Seed-OSS",
    "openai-gpt-oss-120b", "google-gemma-4-31B-it", "MiniMax-M2", "MiniMax-M3", "GLM-4.6", "Kimi-K2-Thinking",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "deepseek-ai-DeepSeek-V3.1", "deepseek-ai-DeepSeek-V3.2",
    "meta-llama-Llama-3.1-8B-Instruct", "mistralai-Mistral-Nemo-Instruct-2407", "Mistral-Small-3.2-24B-Instruct-2506",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use", "LFM2-8B-A1B", "upstage-Solar-Open-100B",
    "meetkai-functionary-medium-v3.2", "ibm-granite-granite-4.0", "Apertus-8B-Instruct", "tencent-Hy3",
    "inclusionai-ling-3.0-flash", "openbmb-MiniCPM5-1B", "Kimi-K3", "HuggingFaceTB-SmolLM3-3B",
]


@pytest.fixture(scope="module")
def streams(oracle: OracleClient) -> list[tuple[str, Any, str]]:
    """(stream id, apply answer, output text) for every template x assistant output upstream renders."""
    out = []
    for name in TEMPLATES:
        source = template_source(name)
        for output in ASSISTANT_OUTPUTS:
            synthesised = synthesise_output(oracle, source, output)
            if synthesised is not None:
                answer, text, _ = synthesised
                out.append((f"{name}/{output.name}", answer, text))
    return out


def test_every_character_as_upstream(oracle: OracleClient, streams: list[tuple[str, Any, str]]) -> None:
    total = 0
    failures: list[str] = []
    for stream_id, answer, text in streams:
        steps, bad = compare_upstream(oracle, answer, text, [""] + list(text))
        total += len(steps)
        failures += [f"{stream_id}: {b}" for b in bad[:2]]
    print(f"\nupstream mode, per character: {total - len(failures)} / {total} steps equal over {len(streams)} streams")
    assert len(streams) >= 140
    assert not failures, "\n".join(failures[:10])


def test_token_pieces_as_upstream(oracle: OracleClient, streams: list[tuple[str, Any, str]]) -> None:
    rng = random.Random(12)
    total = 0
    failures: list[str] = []
    errors = 0
    for stream_id, answer, text in streams:
        for _ in range(2):
            pieces = token_pieces(text, rng)
            steps, bad = compare_upstream(oracle, answer, text, pieces)
            total += len(steps)
            failures += [f"{stream_id} {pieces}: {b}" for b in bad[:2]]
            errors += sum(1 for step in steps if "error" in step or "diffs_error" in step)
    print(f"\nupstream mode, token-sized pieces: {total - len(failures)} / {total} steps equal")
    assert not failures, "\n".join(failures[:10])
    assert errors > 0  # upstream's own failures (parse errors, "Invalid diff") are among the steps


CONTINUATIONS = ["Qwen-Qwen3-0.6B", "Qwen3.5-4B", "google-gemma-4-31B-it", "openai-gpt-oss-120b", "LFM2-8B-A1B"]


@pytest.mark.parametrize("template", CONTINUATIONS)
def test_continuation_starts_after_the_prefill(oracle: OracleClient, template: str) -> None:
    """Upstream's task_result_state starts from common_chat_parse("", true): the prefilled
    assistant text is not streamed again (unless echo)."""
    prefill = {"role": "assistant", "content": "The weather in Paris is"}
    answer = apply_answer(oracle, template, messages=[{"role": "user", "content": "Weather?"}, prefill],
                          add_generation_prompt=False, continue_final_message=True)
    result = template_result(answer)
    text = " sunny today."
    fields = dict(parser=answer["parser"], format=answer["format"], generation_prompt=answer["generation_prompt"])
    start = oracle.request("chat_parse", text="", is_partial=True, **fields)
    after = oracle.request("chat_parse", text=text, is_partial=True, **fields)
    assert not isinstance(start, OracleError) and not isinstance(after, OracleError)
    expected = oracle.request("msg_diffs", previous=start, new=after)
    parser = ChatStreamParser(result, upstream_compat=True, is_continuation=True, tool_call_id=counter_ids())
    assert parser.message.to_dict() == start
    assert [delta_json(d) for d in parser.feed(text)] == expected
    echo = ChatStreamParser(result, upstream_compat=True, is_continuation=True, echo=True)
    assert [delta_json(d) for d in echo.feed(text)] == oracle.request("msg_diffs", previous={}, new=after)


def test_final_parse_failure_is_typed_as_upstream(oracle: OracleClient) -> None:
    """Where llama-server's final parse throws (its stream ends with a server error), finish
    raises ChatParseError with upstream's message; an empty message is skipped, not an error."""
    answer = apply_answer(oracle, "Qwen-Qwen2.5-7B-Instruct",
                          tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])
    text = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>\nmore'
    expected = oracle.request("chat_parse", parser=answer["parser"], format=answer["format"],
                              generation_prompt=answer["generation_prompt"], text=text, is_partial=False)
    assert isinstance(expected, OracleError)
    parser = ChatStreamParser(template_result(answer), upstream_compat=True)
    for piece in token_pieces(text, random.Random(3)):
        parser.feed(piece)
    with pytest.raises(ChatParseError) as info:
        parser.finish("eog")
    assert info.value.message == expected.message
    with pytest.raises(LlamaStateException):
        parser.feed("x")


def test_cancelled_does_no_final_parse(oracle: OracleClient) -> None:
    """llama-server sends no final result for a cancelled task: no final parse, no error."""
    answer = apply_answer(oracle, "Qwen-Qwen2.5-7B-Instruct",
                          tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])
    parser = ChatStreamParser(template_result(answer), upstream_compat=True)
    parser.feed('<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>\nmore')
    assert parser.finish("cancelled") == []
    assert parser.finish_reason == "cancelled"


def test_non_streamed_request_parses_once(oracle: OracleClient) -> None:
    """``stream=False`` is llama-server's non-streamed request: one final parse of the whole output.
    Where that parse is empty (Qwen3-Coder drops an unknown function's call), the response carries
    the raw text as content (server-task.cpp to_json_oaicompat_chat); a streamed one carries nothing."""
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    answer = apply_answer(oracle, "Qwen3-Coder", tools=tools)
    fields = dict(parser=answer["parser"], format=answer["format"], generation_prompt=answer["generation_prompt"])
    text = "<tool_call>\n<function=nope>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
    assert oracle.request("chat_parse", text=text, is_partial=False, **fields)["content"] == ""
    whole = ChatStreamParser(template_result(answer), upstream_compat=True, stream=False)
    assert all(whole.feed(piece) == [] for piece in token_pieces(text, random.Random(0)))
    assert whole.finish("eog") == []
    assert whole.message.empty() and whole.response_message.content == text
    good = "Sure.\n" + text.replace("nope", "get_weather")
    expected = oracle.request("chat_parse", text=good, is_partial=False, **fields)
    whole = ChatStreamParser(template_result(answer), upstream_compat=True, stream=False, tool_call_id=counter_ids())
    for piece in token_pieces(good, random.Random(0)):
        whole.feed(piece)
    deltas = whole.finish("eog")
    assert whole.response_message.content == expected["content"]
    assert [(c["name"], c["arguments"]) for c in expected["tool_calls"]] == \
        [(c.name, c.arguments) for c in whole.message.tool_calls]
    assert [delta_json(d) for d in deltas] == oracle.request("msg_diffs", previous={}, new=dict(
        expected, tool_calls=[dict(c, id="call_0") for c in expected["tool_calls"]]))
