"""Wire parity: the same streamed requests sent to upstream's llama-server and to ``llamact serve``
(greedy, one slot, the same context and thread count) give the same server-sent events, once the
fields that differ by nature are removed: ids (completion and tool call), timestamps, fingerprints,
timings. Chat completions (streamed: with the request's ``upstream_compat``; not streamed: the
server's default, where no deviation is involved) and raw completions (streamed and not)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_live import HERMES, QWQ, LiveServer, sse_events

from llamact.json_types import Json
from llamact.parity.llama_server import HOST, LlamaServer, ServerConfig, find_llama_server
from llamact.parity.server_cases import JSON_PERSON, ONE_TOOL, PERSON_SCHEMA, WEATHER_CALLS

pytestmark = [pytest.mark.parity, pytest.mark.model, pytest.mark.slow]

HELLO = [{"role": "user", "content": "Say hello."}]
BASE: Json = {"stream": True, "stream_options": {"include_usage": True}, "temperature": 0, "cache_prompt": False}
OWN_REQUESTS: dict[str, Json] = {
    "plain": {"messages": HELLO, "max_tokens": 16},
    "stop": {"messages": HELLO, "max_tokens": 32, "stop": ["!"]},
    "json_schema": {"messages": JSON_PERSON, "response_format": PERSON_SCHEMA, "max_tokens": 40},
}
HERMES_REQUESTS: dict[str, Json] = {
    "required_tool": {"messages": WEATHER_CALLS, "tools": ONE_TOOL, "tool_choice": "required", "max_tokens": 40},
}


def normalized(event: Json) -> Json:
    if not isinstance(event, dict):
        return event
    out = {k: v for k, v in event.items() if k not in ("id", "created", "system_fingerprint", "timings")}
    for choice in out.get("choices", []):
        for call in choice.get("delta", {}).get("tool_calls", []):
            call.pop("id", None)
    return out


def events(host_port: tuple[str, int], body: Json, headers: dict[str, str] | None = None) -> list[Json]:
    """A streamed chat request's events. llamact is asked for llama-server's own events
    (``upstream_compat``, which llama-server ignores): its default stream holds text back and sends
    calls whole (docs/design.md deviations 5 and 17), so its chunks are not upstream's."""
    body = {**BASE, "upstream_compat": True, **body}
    return [normalized(e) for e in sse_events(*host_port, "/v1/chat/completions", body, headers)]


@pytest.fixture(scope="module")
def upstream(smollm2_path: Path, template_file: Any) -> Iterator[dict[str, LlamaServer]]:
    servers = {"own": LlamaServer(ServerConfig(smollm2_path), find_llama_server()),
               "hermes": LlamaServer(ServerConfig(smollm2_path, template_file(HERMES)), find_llama_server()),
               "qwq": LlamaServer(ServerConfig(smollm2_path, template_file(QWQ)), find_llama_server())}
    try:
        for s in servers.values():
            s.start()
        yield servers
    finally:
        for s in servers.values():
            s.stop()


@pytest.mark.parametrize("name", sorted(OWN_REQUESTS) + sorted(HERMES_REQUESTS))
def test_streamed_events_equal_llama_server(name: str, upstream: dict[str, LlamaServer], server: LiveServer,
                                            hermes_server: LiveServer) -> None:
    if name in OWN_REQUESTS:
        body, ref, ours = OWN_REQUESTS[name], upstream["own"], server
    else:
        body, ref, ours = HERMES_REQUESTS[name], upstream["hermes"], hermes_server
    expected = events((HOST, ref.port), body)
    got = events((HOST, ours.port), body, ours.headers())
    assert expected[-1] == "[DONE]" and len(expected) > 3
    assert got == expected


RAINBOW = "The colors of the rainbow are"
SAY_YES = "<|im_start|>user\nSay only the word yes.<|im_end|>\n<|im_start|>assistant\n"   # ends on its end token
RAW_REQUESTS: dict[str, Json] = {
    "raw_plain": {"prompt": "Once upon a time", "max_tokens": 12},
    "raw_stop": {"prompt": RAINBOW, "max_tokens": 24, "stop": [","]},
    # the end token has an event of its own (and an entry); the usage rides on the last event
    "raw_end_token_n_probs": {"prompt": SAY_YES, "max_tokens": 30, "n_probs": 2},
    # not streamed, the stop string's token count of entries is left out
    "raw_stop_n_probs": {"prompt": RAINBOW, "max_tokens": 24, "stop": [" light"], "n_probs": 2},
    # a grammar forcing characters SmolLM2 spells in several byte tokens: no event for a token that
    # ends inside a character, the entry of the one completing it shows the whole character
    "raw_split_characters": {"prompt": "Write a symbol:", "grammar": 'root ::= "\U0001d538\U0001d539 ok"',
                             "max_tokens": 10, "n_probs": 1},
    "raw_json_schema": {"prompt": "A person as JSON:", "max_tokens": 24,
                        "json_schema": {"type": "object", "properties": {"name": {"type": "string"}},
                                        "required": ["name"]}},
}


def _post_json(port: int, path: str, body: Json, headers: dict[str, str] | None = None) -> tuple[int, Json]:
    conn = http.client.HTTPConnection(HOST, port, timeout=300)
    try:
        conn.request("POST", path, body=json.dumps(body),
                     headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


@pytest.mark.parametrize("name", sorted(RAW_REQUESTS))
def test_raw_completions_equal_llama_server(name: str, upstream: dict[str, LlamaServer], server: LiveServer) -> None:
    """``/v1/completions``, streamed (the events) and not (the body), the same normalisation."""
    body, ref = RAW_REQUESTS[name], upstream["own"]
    streamed = {**BASE, **body}
    expected = [normalized(e) for e in sse_events(HOST, ref.port, "/v1/completions", streamed)]
    got = [normalized(e) for e in sse_events(HOST, server.port, "/v1/completions", streamed, server.headers())]
    assert expected[-1] == "[DONE]" and len(expected) > 3
    assert_equal_but_logprob_values(got, expected)
    plain = {**body, "temperature": 0, "cache_prompt": False}
    status, expected_body = _post_json(ref.port, "/v1/completions", plain)
    got_status, got_body = _post_json(server.port, "/v1/completions", plain, server.headers())
    assert (got_status, status) == (200, 200)
    assert_equal_but_logprob_values(normalized(got_body), normalized(expected_body))


def test_raw_stream_keeps_text_held_for_a_stop_string_when_the_limit_ends_it(
        upstream: dict[str, LlamaServer], server: LiveServer) -> None:
    """A deliberate deviation (README, server section; docs/design.md, deviation 11): the streamed text
    equals the reply not streamed. llama-server holds text that may begin a stop string and drops it
    when max_tokens ends the stream there; llamact delivers it. The stop string is made from the
    reply's own last word (what a greedy reply says differs across CPUs), so its start is held."""
    plain = {"prompt": RAINBOW, "max_tokens": 7, "temperature": 0, "cache_prompt": False}
    _, unstopped = _post_json(upstream["own"].port, "/v1/completions", plain)
    text = unstopped["choices"][0]["text"]
    last_word = text.split()[-1]
    assert text.endswith(" " + last_word) and len(last_word) > 1, text
    body = {**plain, "stop": [last_word + " was never said"]}
    sent = list(sse_events(HOST, server.port, "/v1/completions", {**body, "stream": True}, server.headers()))
    streamed = "".join(e["choices"][0]["text"] for e in sent if isinstance(e, dict))
    _, reference = _post_json(upstream["own"].port, "/v1/completions", body)
    _, ours = _post_json(server.port, "/v1/completions", body, server.headers())
    assert streamed == ours["choices"][0]["text"] == reference["choices"][0]["text"] == text
    their_stream = list(sse_events(HOST, upstream["own"].port, "/v1/completions", {**body, "stream": True}))
    their_streamed = "".join(e["choices"][0]["text"] for e in their_stream if isinstance(e, dict))
    assert text.startswith(their_streamed) and not their_streamed.endswith(last_word), their_streamed


def assert_equal_but_logprob_values(got: Json, expected: Json, tolerance: float = 2e-3) -> None:
    """Equal, except that each ``logprob`` number may differ by ``tolerance`` (the two programs sum the
    softmax in a different order: measured differences are about 1e-4)."""
    if isinstance(expected, dict):
        assert isinstance(got, dict) and got.keys() == expected.keys()
        for key, value in expected.items():
            if key == "logprob":
                assert abs(got[key] - value) <= tolerance, (got[key], value)
            else:
                assert_equal_but_logprob_values(got[key], value, tolerance)
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert_equal_but_logprob_values(g, e, tolerance)
    else:
        assert got == expected


@pytest.mark.parametrize("ask", ["logprobs", "n_probs"])
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
def test_logprobs_equal_llama_server(stream: bool, ask: str, upstream: dict[str, LlamaServer],
                                     server: LiveServer) -> None:
    """OpenAI's ``logprobs`` / ``top_logprobs``, and llama-server's own ``n_probs``."""
    how = {"logprobs": True, "top_logprobs": 3} if ask == "logprobs" else {"n_probs": 3}
    body = {"messages": HELLO, "max_tokens": 8, **how}
    ref = upstream["own"]
    if stream:
        expected = events((HOST, ref.port), body)
        got = events((HOST, server.port), body, server.headers())
        assert sum("logprobs" in e["choices"][0] for e in expected if isinstance(e, dict) and e["choices"]) >= 4
    else:
        plain = {**body, "temperature": 0, "cache_prompt": False}
        status, expected = _post_json(ref.port, "/v1/chat/completions", plain)
        got_status, got = _post_json(server.port, "/v1/chat/completions", plain, server.headers())
        assert (got_status, status) == (200, 200) and len(expected["choices"][0]["logprobs"]["content"]) >= 4
        expected, got = normalized(expected), normalized(got)
    assert_equal_but_logprob_values(got, expected)


def test_a_thinking_budget_ends_the_thought_with_its_message(upstream: dict[str, LlamaServer],
                                                             qwq_server: LiveServer) -> None:
    """QwQ's generation prompt opens a thought; after two tokens of it the budget forces
    ``reasoning_budget_message`` and the end tag, as llama-server does."""
    body = {"messages": HELLO, "max_tokens": 16, "thinking_budget_tokens": 2, "reasoning_budget_message": " Enough."}
    expected = events((HOST, upstream["qwq"].port), body)
    got = events((HOST, qwq_server.port), body, qwq_server.headers())
    thought = "".join(e["choices"][0]["delta"].get("reasoning_content", "")
                      for e in expected if isinstance(e, dict) and e.get("choices"))
    assert "Enough." in thought, thought
    assert got == expected


def test_apply_template_equals_llama_server(upstream: dict[str, LlamaServer], server: LiveServer) -> None:
    body = {"messages": HELLO + [{"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Again."}],
            "reasoning_budget_message": "ignored here", "thinking_budget_tokens": 3}
    status, expected = _post_json(upstream["own"].port, "/apply-template", body)
    got_status, got = _post_json(server.port, "/apply-template", body, server.headers())
    assert (got_status, got) == (status, expected) == (200, expected)
    assert "Again." in expected["prompt"]
    status, details = _post_json(server.port, "/template-details", body, server.headers())
    assert status == 200 and details["prompt"] == expected["prompt"]


@pytest.fixture(scope="module")
def upstream_defaults(smollm2_path: Path) -> Iterator[LlamaServer]:
    """llama-server with its own sampling defaults (the parity servers run with --temp 0 --seed 0) and
    its /metrics route on."""
    server = LlamaServer(ServerConfig(smollm2_path, extra_args=("--temp", "0.8", "--seed", "-1", "--metrics")),
                         find_llama_server())
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _get(port: int, path: str, headers: dict[str, str] | None = None) -> bytes:
    conn = http.client.HTTPConnection(HOST, port, timeout=60)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        assert response.status == 200, path
        return response.read()
    finally:
        conn.close()


# what each server can do, not what it computes: llama-server's page (turned off in the harness) and
# its per-process media marker; llamact serves the page at / and /metrics always, and has no media input
CAPABILITIES = ("endpoint_metrics", "ui", "media_marker")


def test_props_equal_llama_server(upstream_defaults: LlamaServer, server: LiveServer) -> None:
    expected = json.loads(_get(upstream_defaults.port, "/props"))
    got = json.loads(_get(server.port, "/props", server.headers()))
    assert got.pop("chat_template_family")   # llamact's addition (SmolLM2's template: "autoparser")
    assert got.pop("llamact")["model_params"]["n_ctx"] == 4096   # llamact's: what the engine was loaded with
    for key in CAPABILITIES:
        assert key in got
        got.pop(key), expected.pop(key)
    assert got == expected


def _metric_lines(text: bytes) -> list[str]:
    return [line.rsplit(" ", 1)[0] if not line.startswith("#") else line
            for line in text.decode().splitlines() if line]


def test_metrics_names_equal_llama_server(upstream_defaults: LlamaServer, server: LiveServer) -> None:
    """The same metrics, help texts, types and order (values differ with each server's history);
    llamact's own two counters come after llama-server's, then the inference gateway's gauges
    (tests/server/test_gateway_metrics.py; the LoRA one only with adapters)."""
    expected = _metric_lines(_get(upstream_defaults.port, "/metrics"))
    got = _metric_lines(_get(server.port, "/metrics", server.headers()))
    assert got[:len(expected)] == expected
    assert [line for line in got[len(expected):] if not line.startswith("#")] == [
        "llamacpp:requests_total", "llamacpp:requests_cancelled_total", "vllm:num_requests_waiting",
        "vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
        'vllm:cache_config_info{block_size="1",num_gpu_blocks="4096"}']


# Templates that refuse a conversation: Gemma 2's goes through the autoparser, which upstream wraps in
# std::invalid_argument (400); GPT-OSS has a family handler, whose template failure is a plain
# std::exception (500).
REFUSALS = {
    "google-gemma-2-2b-it": ([{"role": "user", "content": "Hi"}, {"role": "user", "content": "Again"}],
                             400, "invalid_request_error", "Conversation roles must alternate"),
    "openai-gpt-oss-120b": ([{"role": "user", "content": "Hi"}, {"role": "tool", "content": "42"}],
                            500, "server_error", "Message has tool role, but there was no previous assistant"),
}


@pytest.mark.parametrize("template", sorted(REFUSALS))
def test_a_conversation_the_template_refuses_fails_as_in_llama_server(template: str, smollm2_path: Path,
                                                                      template_file: Any) -> None:
    """The same status, error type and message text for a conversation the template refuses, as
    llama-server answers it (llamact answered 400 / 501 whatever the kind of failure); a malformed
    request is 400 with upstream's text."""
    messages, code, kind, text = REFUSALS[template]
    path_of = template_file(template)
    body = {"messages": messages, "max_tokens": 4}
    ref = LlamaServer(ServerConfig(smollm2_path, path_of), find_llama_server())
    ref.start()
    try:
        with LiveServer("--model", str(smollm2_path), "--threads", "1", "--chat-template-file", str(path_of)) as live:
            for path in ("/v1/chat/completions", "/apply-template"):
                status, expected = _post_json(ref.port, path, body)
                got_status, got = _post_json(live.port, path, body)
                assert (got_status, got["error"]["type"]) == (status, expected["error"]["type"]) == (code, kind), \
                    (path, got, expected)
                assert text in expected["error"]["message"] and text in got["error"]["message"]
            status, expected = _post_json(ref.port, "/v1/chat/completions", {"messages": "not a list"})
            got_status, got = _post_json(live.port, "/v1/chat/completions", {"messages": "not a list"})
            assert (got_status, got["error"]["type"], got["error"]["message"]) == \
                (status, expected["error"]["type"], expected["error"]["message"]) == \
                (400, "invalid_request_error", "Expected 'messages' to be an array")
    finally:
        ref.stop()


def test_a_request_llama_server_refuses_with_500_is_a_400_with_its_text(upstream: dict[str, LlamaServer],
                                                                         server: LiveServer) -> None:
    """A deliberate difference (docs/design.md, "Where this record and the direction differ"): llama-server
    answers a malformed tool list with 500 (its std::runtime_error); llamact with 400
    invalid_request_error -- a request error, not to be retried -- and the same message."""
    body = {"messages": HELLO, "tools": [{"function": {"name": "f"}}], "max_tokens": 4}
    status, expected = _post_json(upstream["own"].port, "/v1/chat/completions", body)
    got_status, got = _post_json(server.port, "/v1/chat/completions", body, server.headers())
    assert (status, expected["error"]["type"]) == (500, "server_error")
    assert (got_status, got["error"]["type"]) == (400, "invalid_request_error")
    assert got["error"]["message"] == expected["error"]["message"]
