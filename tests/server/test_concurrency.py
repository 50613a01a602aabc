"""``llamact serve --parallel 8``: concurrent clients, a bounded load, and a client that goes away."""

from __future__ import annotations

import http.client
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from server_live import HOST, LiveServer, openai_client

pytestmark = [pytest.mark.model, pytest.mark.slow]

QUESTIONS = ["Say hello.", "What is 2+2?", "Name a color.", "Tell me a fact about cats.", "What is the sun?",
             "Name a fruit.", "Count to five.", "What is water?"]


def metrics(live: LiveServer) -> dict[str, float]:
    status, body = live.request("GET", "/metrics")
    assert status == 200
    values: dict[str, float] = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.split()
            values[name.removeprefix("llamacpp:")] = float(value)
    return values


def streamed_text(live: LiveServer, question: str, max_tokens: int = 16) -> tuple[str, str | None]:
    client = openai_client(live)
    text, finish = "", None
    for chunk in client.chat.completions.create(model="any", messages=[{"role": "user", "content": question}],
                                                max_tokens=max_tokens, temperature=0, stream=True):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    return text, finish


def test_eight_streaming_clients_get_what_each_gets_alone(parallel_server: LiveServer) -> None:
    alone = [streamed_text(parallel_server, q) for q in QUESTIONS]
    with ThreadPoolExecutor(len(QUESTIONS)) as pool:
        together = list(pool.map(lambda q: streamed_text(parallel_server, q), QUESTIONS))
    assert together == alone
    assert all(text and finish for text, finish in together)


def test_bounded_load_loses_nothing(parallel_server: LiveServer) -> None:
    before = metrics(parallel_server)["requests_total"]
    client = openai_client(parallel_server)

    def ask(i: int) -> Any:
        return client.chat.completions.create(model="any", max_tokens=2, temperature=0,
                                              messages=[{"role": "user", "content": f"Say {i}."}])

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(ask, range(32)))
    assert all(a.choices[0].finish_reason in ("stop", "length") and a.usage.completion_tokens >= 1 for a in answers)
    assert len({a.id for a in answers}) == 32
    assert metrics(parallel_server)["requests_total"] - before == 32


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
def test_a_client_gone_mid_answer_frees_its_slot(parallel_server: LiveServer, stream: bool) -> None:
    """Its end-of-generation tokens banned, the request would fill its slot; the client hangs up (after
    two events, or once its request holds a slot when it is not streamed): the request is cancelled
    (never finished) and its slot freed."""
    status, body = parallel_server.request("POST", "/tokenize", json.dumps(
        {"content": "<|im_end|><|endoftext|>", "parse_special": True}).encode())
    assert status == 200
    banned = [[token, False] for token in json.loads(body)["tokens"]]
    before = metrics(parallel_server)
    conn = http.client.HTTPConnection(HOST, parallel_server.port, timeout=300)
    conn.request("POST", "/v1/chat/completions", body=json.dumps({
        "messages": [{"role": "user", "content": "Write a long story."}], "stream": stream, "max_tokens": 2000,
        "logit_bias": banned}).encode(), headers={"Content-Type": "application/json"})
    if stream:
        response = conn.getresponse()
        events = 0
        while events < 2:
            if response.readline().startswith(b"data: "):
                events += 1
    else:
        while metrics(parallel_server)["requests_processing"] == 0:
            pass
    conn.close()
    # wait until nothing runs (events, not time): cancelled, or -- were the disconnect missed -- finished
    # when its slot is full, which the counters then tell apart
    while (after := metrics(parallel_server))["requests_processing"] > 0:
        pass
    assert after["requests_cancelled_total"] == before["requests_cancelled_total"] + 1
    assert after["requests_total"] == before["requests_total"]   # it never finished
    # the slot serves the next request
    text, finish = streamed_text(parallel_server, "Say hello.", max_tokens=4)
    assert text and finish


def test_a_repeated_prompt_is_found_in_a_slots_cache(parallel_server: LiveServer) -> None:
    client = openai_client(parallel_server)
    messages = [{"role": "user", "content": "Name a planet."}]
    first = client.chat.completions.create(model="any", messages=messages, max_tokens=4, temperature=0)
    again = client.chat.completions.create(model="any", messages=messages, max_tokens=4, temperature=0)
    assert again.usage.prompt_tokens == first.usage.prompt_tokens
    # all but the last prompt token (its logits are needed) come from the slot that served the first
    assert again.usage.prompt_tokens_details.cached_tokens == again.usage.prompt_tokens - 1
    assert again.choices[0].message.content == first.choices[0].message.content


def test_logprobs_on_a_slot_are_the_single_slot_servers(parallel_server: LiveServer, server: LiveServer) -> None:
    def ask(live: LiveServer) -> Any:
        return openai_client(live).chat.completions.create(
            model="any", messages=[{"role": "user", "content": "Name a color."}], max_tokens=6, temperature=0,
            logprobs=True, top_logprobs=3).choices[0].logprobs.content

    on_slot, alone = ask(parallel_server), ask(server)
    assert len(on_slot) == len(alone) >= 2
    for got, expected in zip(on_slot, alone, strict=True):
        assert got.token == expected.token and abs(got.logprob - expected.logprob) < 2e-3
        assert [t.token for t in got.top_logprobs] == [t.token for t in expected.top_logprobs]
        assert len(got.top_logprobs) == 3
