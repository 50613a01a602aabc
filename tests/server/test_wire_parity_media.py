"""Images on the wire: ``llamact serve --mmproj`` and llama-server ``--mmproj`` (the same random
projector for SmolLM2, one slot and one thread each, llama-server's media marker pinned to mtmd's
default) answer an image request with the same events, streamed and not, the same rendered prompt,
token count and /props modalities; the official OpenAI client sends images as llama-server reads them;
a server whose projector lacks a modality refuses it in llama-server's words (400 where it says 500:
docs/design.md deviation 12). ``--parallel 2`` answers two image requests at once."""

from __future__ import annotations

import base64
import concurrent.futures
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from server_live import LiveServer, openai_client, sse_events

from llamact.chat.media import audio_part, image_part
from llamact.json_types import Json
from llamact.parity.llama_server import HOST, LlamaServer, ServerConfig, find_llama_server
from llamact.parity.projectors import write_projector

pytestmark = [pytest.mark.parity, pytest.mark.model, pytest.mark.slow]


def _image(seed: int) -> Json:
    return image_part(np.random.default_rng(seed).integers(0, 256, (40, 48, 3), dtype=np.uint8))


MESSAGES = [{"role": "user", "content": [{"type": "text", "text": "What is in this picture?"}, _image(1)]}]
BODY: Json = {"messages": MESSAGES, "max_tokens": 10, "temperature": 0, "cache_prompt": False}


def _normalized(event: Json) -> Json:
    if not isinstance(event, dict):
        return event
    return {k: v for k, v in event.items() if k not in ("id", "created", "system_fingerprint", "timings")}


@pytest.fixture(scope="module")
def mmproj(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_projector(tmp_path_factory.mktemp("mmproj") / "smollm2-mlp.gguf", 576, "mlp")


@pytest.fixture(scope="module")
def servers(smollm2_path: Path, mmproj: Path) -> Iterator[tuple[LlamaServer, LiveServer]]:
    upstream = LlamaServer(ServerConfig(smollm2_path, n_ctx=4096, extra_args=("--mmproj", str(mmproj))),
                           find_llama_server())
    ours = LiveServer("--model", str(smollm2_path), "--threads", "1", "--ctx-size", "4096", "--mmproj", str(mmproj))
    with upstream, ours:
        yield upstream, ours


def _post(live: LiveServer, path: str, body: Json) -> tuple[int, Json]:
    status, data = live.request("POST", path, json.dumps(body).encode())
    return status, json.loads(data)


def test_streamed_events_equal_llama_server(servers: tuple[LlamaServer, LiveServer]) -> None:
    upstream, ours = servers
    body = {**BODY, "stream": True, "stream_options": {"include_usage": True}}
    expected = [_normalized(e) for e in sse_events(HOST, upstream.port, "/v1/chat/completions", body)]
    got = [_normalized(e) for e in sse_events(HOST, ours.port, "/v1/chat/completions", body)]
    assert expected[-1] == "[DONE]" and len(expected) > 3
    assert got == expected


def test_whole_reply_prompt_and_count_equal_llama_server(servers: tuple[LlamaServer, LiveServer]) -> None:
    upstream, ours = servers
    want = upstream.post("/v1/chat/completions", BODY)
    status, got = _post(ours, "/v1/chat/completions", BODY)
    assert status == 200
    assert got["choices"] == want["choices"] and got["usage"] == want["usage"]
    assert _post(ours, "/apply-template", {"messages": MESSAGES})[1] == upstream.post("/apply-template",
                                                                                      {"messages": MESSAGES})
    count = _post(ours, "/v1/chat/completions/input_tokens", {"messages": MESSAGES})[1]
    assert count["input_tokens"] == upstream.post("/v1/chat/completions/input_tokens",
                                                   {"messages": MESSAGES})["input_tokens"]


def test_props_say_what_the_projector_takes(servers: tuple[LlamaServer, LiveServer]) -> None:
    upstream, ours = servers
    want = json.loads(upstream._request("GET", "/props", None)[1])
    got = json.loads(ours.request("GET", "/props")[1])
    assert got["modalities"] == want["modalities"] == {"vision": True, "video": False, "audio": False}
    assert got["media_marker"] == want["media_marker"] == "<__media__>"


def test_a_modality_the_projector_lacks(servers: tuple[LlamaServer, LiveServer]) -> None:
    upstream, ours = servers
    clip = audio_part(np.zeros(1600, np.float32))
    body = {"messages": [{"role": "user", "content": [clip]}], "max_tokens": 4}
    status, got = _post(ours, "/v1/chat/completions", body)
    want_status, want = upstream._request("POST", "/v1/chat/completions", body)
    assert (status, want_status) == (400, 500)
    assert got["error"]["message"] == json.loads(want)["error"]["message"]


def test_the_openai_client_sends_images(servers: tuple[LlamaServer, LiveServer]) -> None:
    upstream, ours = servers
    client = openai_client(ours)
    reply = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=10, temperature=0,
                                           extra_body={"cache_prompt": False})
    assert reply.choices[0].message.content == upstream.post("/v1/chat/completions",
                                                             BODY)["choices"][0]["message"]["content"]


def test_parallel_slots_take_images(smollm2_path: Path, mmproj: Path) -> None:
    server = LiveServer("--model", str(smollm2_path), "--threads", "1", "--ctx-size", "4096", "--parallel", "2",
                        "--mmproj", str(mmproj))
    with server:
        bodies = [{**BODY, "messages": [{"role": "user", "content": [_image(seed), {"type": "text", "text": "?"}]}],
                   "stream": True} for seed in (2, 3)]
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda b: list(sse_events(HOST, server.port, "/v1/chat/completions", b)),
                                    bodies))
        for events in answers:
            assert events[-1] == "[DONE]"
            assert events[-2]["choices"][0]["finish_reason"] in ("length", "stop")


def test_raw_media_bytes_are_not_sent_back(servers: tuple[LlamaServer, LiveServer]) -> None:
    """Nothing of the image's base64 comes back in an answer (a 400 names the problem, not the data)."""
    _upstream, ours = servers
    data = base64.b64encode(b"x" * 300).decode()
    bogus = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + data}}
    status, got = _post(ours, "/v1/chat/completions", {"messages": [{"role": "user", "content": [bogus]}]})
    assert status == 400 and "eHh4eHh4" not in json.dumps(got)
    assert "not an image or audio file" in got["error"]["message"]
