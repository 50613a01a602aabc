"""``llamact serve --ray``: a local Ray cluster (127.0.0.1) with two replicas of SmolLM2 on one thread
each, beside a plain ``llamact serve`` with the same settings. The same routes answer the same bytes
(ids and clocks aside), and the prefix router sends each conversation's later turns to the replica
that holds its earlier ones: every later turn finds its whole previous prompt in that replica's
cache, with two conversations interleaved on two replicas."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_live import LiveServer

pytestmark = [pytest.mark.model, pytest.mark.slow]

SETTINGS = ("--threads", "1", "--parallel", "2", "--ctx-size", "2048")


class RayServer(LiveServer):
    """``llamact serve --ray``: Ray's start and stop take longer than a server's."""

    def stop(self) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=90)   # Serve and the local cluster come down in order
            except subprocess.TimeoutExpired:
                pass
        super().stop()


@pytest.fixture(scope="module")
def plain(smollm2_path: Path) -> Iterator[LiveServer]:
    with LiveServer("--model", str(smollm2_path), *SETTINGS) as live:
        yield live


@pytest.fixture(scope="module")
def on_ray(smollm2_path: Path) -> Iterator[LiveServer]:
    with RayServer("--model", str(smollm2_path), *SETTINGS, "--ray", "--ray-replicas", "2",
                   start_timeout=300) as live:
        yield live


def post(live: LiveServer, path: str, body: Any, raw: bytes | None = None) -> tuple[int, Any]:
    status, answer = live.request("POST", path, raw if raw is not None else json.dumps(body).encode())
    try:
        return status, json.loads(answer)
    except ValueError:
        return status, answer


def without_clocks(answer: Any) -> Any:
    if isinstance(answer, dict):
        return {k: without_clocks(v) for k, v in answer.items() if k not in ("id", "created", "timings")}
    if isinstance(answer, (list, tuple)):
        return [without_clocks(v) for v in answer]
    return answer


def test_the_routes_answer_as_llamact_serve_answers(plain: LiveServer, on_ray: LiveServer) -> None:
    chat = {"messages": [{"role": "user", "content": "Name a color."}], "max_tokens": 12, "temperature": 0,
            "cache_prompt": False}
    cases: list[tuple[str, str, Any, bytes | None]] = [
        ("POST", "/v1/chat/completions", chat, None),
        ("POST", "/completion", {"prompt": "The sky is", "n_predict": 6, "temperature": 0, "cache_prompt": False},
         None),
        ("POST", "/tokenize", {"content": "Hello world", "with_pieces": True}, None),
        ("POST", "/apply-template", {"messages": chat["messages"]}, None),
        ("POST", "/v1/chat/completions", None, b"{not json"),                  # 400, the server's words
        ("POST", "/v1/chat/completions", {"messages": "nope"}, None),
        ("POST", "/no/such/route", {}, None),                                   # 404
    ]
    for method, path, body, raw in cases:
        assert method == "POST"
        expected, got = post(plain, path, body, raw), post(on_ray, path, body, raw)
        assert without_clocks(got) == without_clocks(expected), path
    for path in ("/health", "/v1/models", "/props", "/slots"):
        (status_a, a), (status_b, b) = plain.request("GET", path), on_ray.request("GET", path)
        assert status_a == status_b == 200, path
        a, b = json.loads(a), json.loads(b)
        if path == "/v1/models":
            for answer in (a, b):
                answer["data"][0].pop("created")
        if path == "/slots":   # each replica's own slots, as a replica reports them
            a, b = [slot["id"] for slot in a], [slot["id"] for slot in b]
        assert a == b, path


def test_a_stream_arrives_as_the_server_writes_it(plain: LiveServer, on_ray: LiveServer) -> None:
    body = json.dumps({"messages": [{"role": "user", "content": "Count to five."}], "max_tokens": 16,
                       "temperature": 0, "stream": True, "cache_prompt": False}).encode()

    def events(live: LiveServer) -> list[Any]:
        status, raw = live.request("POST", "/v1/chat/completions", body)
        assert status == 200
        out = []
        for block in raw.decode().split("\n\n"):
            if block.startswith("data: "):
                data = block[6:]
                out.append(data if data == "[DONE]" else without_clocks(json.loads(data)))
        return out

    assert events(on_ray) == events(plain)


def test_each_conversation_returns_to_the_replica_holding_its_turns(on_ray: LiveServer) -> None:
    systems = {name: f"You are {name}, a terse assistant. " + " ".join(f"Rule {i}: answer in few words."
                                                                     for i in range(12)) for name in ("Ann", "Bob")}
    history = {name: [{"role": "system", "content": text}] for name, text in systems.items()}
    previous: dict[str, int] = {}
    for turn in range(4):
        for name in history:
            history[name].append({"role": "user", "content": f"{name} asks question {turn}: name a number."})
            status, answer = post(on_ray, "/v1/chat/completions",
                                  {"messages": history[name], "max_tokens": 8, "temperature": 0})
            assert status == 200, answer
            usage = answer["usage"]
            if turn:   # the whole previous prompt was in this replica's cache
                assert usage["prompt_tokens_details"]["cached_tokens"] >= previous[name] - 4, (name, turn, usage)
            previous[name] = usage["prompt_tokens"]
            history[name].append(answer["choices"][0]["message"])
