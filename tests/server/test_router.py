"""Router mode (issue 27): SmolLM2 and Gemma 3 behind one ``llamact serve`` with ``--models-max 1``,
beside llama-server's own router on the same directory and preset file: the catalogue and its
errors as llama-server answers them, each flag of the preset reaching the engine (read back through
``/props``, equal to llama-server's child), alternating and concurrent requests forcing unloads and
reloads, a model in flight never unloaded, the start and access lines, tools on a template without
tool calls. Everything on 127.0.0.1."""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_live import HOST, LiveServer, sse_events

from llamact.parity.llama_server import LlamaServer, RouterConfig
from llamact.server.wire.task_params import f32

pytestmark = [pytest.mark.model, pytest.mark.parity]

# keys both servers read (llama-server's preset INI); llamact's router gets the same file
PRESET = """[*]
ctx-size = 512

[smollm2]
ctx-size = 768
batch-size = 256
ubatch-size = 128
threads-batch = 1
flash-attn = off
cache-type-k = q8_0
n-gpu-layers = 0
temp = 0.25
top-k = 7
seed = 5
reasoning-format = none
chat-template-kwargs = {"team": "x"}
alias = smol
"""
HELLO = [{"role": "user", "content": "Say hello."}]
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}
JSON_HEADERS = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def catalogue(smollm2_path: Path, gemma3_path: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("router")
    models = root / "models"
    models.mkdir()
    (models / "smollm2.gguf").symlink_to(smollm2_path)
    (models / "gemma3.gguf").symlink_to(gemma3_path)
    preset = root / "presets.ini"
    preset.write_text(PRESET)
    return models, preset


@pytest.fixture(scope="module")
def ours(catalogue: tuple[Path, Path]) -> Iterator[LiveServer]:
    models, preset = catalogue
    with LiveServer("--models-dir", str(models), "--models-preset", str(preset), "--models-max", "1",
                    "--threads", "1") as live:
        yield live


@pytest.fixture(scope="module")
def upstream(catalogue: tuple[Path, Path]) -> Iterator[LlamaServer]:
    models, preset = catalogue
    with LlamaServer(RouterConfig(models, preset, models_max=1)) as server:
        yield server


def call(port: int, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
         ) -> tuple[int, Any, dict[str, str]]:
    conn = http.client.HTTPConnection(HOST, port, timeout=300)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body).encode(),
                     headers=headers if headers is not None else JSON_HEADERS)
        response = conn.getresponse()
        raw = response.read()
        try:
            data = json.loads(raw)
        except ValueError:
            data = raw
        return response.status, data, {k.lower(): v for k, v in response.getheaders()}
    finally:
        conn.close()


def chat(port: int, model: str, **fields: Any) -> tuple[int, Any, dict[str, str]]:
    body = {"model": model, "messages": HELLO, "max_tokens": 4, "temperature": 0, **fields}
    return call(port, "POST", "/v1/chat/completions", body)


def statuses(live: LiveServer) -> dict[str, str]:
    _, data, _ = call(live.port, "GET", "/v1/models")
    return {m["id"]: m["status"]["value"] for m in data["data"]}


def test_the_catalogue_and_its_errors_are_llama_servers(ours: LiveServer, upstream: LlamaServer) -> None:
    _, theirs, _ = call(upstream.port, "GET", "/v1/models")
    _, mine, _ = call(ours.port, "GET", "/v1/models")
    assert sorted(mine) == sorted(theirs) == ["data", "object"]
    by_id = {m["id"]: m for m in theirs["data"]}
    assert {m["id"] for m in mine["data"]} == set(by_id) == {"smollm2", "gemma3"}
    for model in mine["data"]:
        expected = by_id[model["id"]]
        assert sorted(model) == sorted(expected), model["id"]
        assert sorted(model["status"]) == sorted(expected["status"])
        for key in ("aliases", "tags", "object", "owned_by", "architecture", "source", "can_remove"):
            assert model[key] == expected[key], (model["id"], key)
        assert model["status"]["value"] == expected["status"]["value"] == "unloaded"
    # the router's own /props, and the refusals both give
    assert call(ours.port, "GET", "/props")[1] == call(upstream.port, "GET", "/props")[1]
    for method, path, body in (("POST", "/v1/chat/completions", {"messages": HELLO}),
                               ("POST", "/models/unload", {"model": "gemma3"}),
                               ("POST", "/models/unload", {"model": "nope"}),
                               ("GET", "/metrics", None)):
        expected = call(upstream.port, method, path, body)
        got = call(ours.port, method, path, body)
        assert (got[0], got[1]["error"]["message"]) == (expected[0], expected[1]["error"]["message"]), path
    assert call(ours.port, "POST", "/models/load", {"model": "nope"})[0] == \
        call(upstream.port, "POST", "/models/load", {"model": "nope"})[0] == 404
    # an unknown model: llama-server 400 "model 'nope' not found"; llamact OpenAI's 404 (deviation)
    status, theirs_error, _ = chat(upstream.port, "nope")
    assert (status, theirs_error["error"]["message"]) == (400, "model 'nope' not found")
    status, error, _ = chat(ours.port, "nope")
    assert status == 404 and error["error"]["code"] == "model_not_found" and error["error"]["param"] == "model"
    assert "gemma3, smollm2" in error["error"]["message"]


def test_each_preset_flag_reaches_the_engine_as_in_llama_servers_child(ours: LiveServer,
                                                                        upstream: LlamaServer) -> None:
    _, theirs, _ = call(upstream.port, "GET", "/props?model=smollm2")   # loads llama-server's child
    _, mine, _ = call(ours.port, "GET", "/props?model=smol")            # an alias
    params, expected = mine["default_generation_settings"]["params"], theirs["default_generation_settings"]["params"]
    for key in ("temperature", "top_k", "seed", "top_p", "min_p"):
        assert params[key] == expected[key], key
    assert (params["temperature"], params["top_k"], params["seed"]) == (f32(0.25), 7, 5)
    assert mine["default_generation_settings"]["n_ctx"] == theirs["default_generation_settings"]["n_ctx"] == 768
    loaded = mine["llamact"]
    engine = loaded["model_params"]
    assert (loaded["n_ctx"], loaded["n_batch"]) == (768, 256)                  # what llama.cpp made
    assert (engine["n_ubatch"], engine["n_threads"], engine["n_threads_batch"]) == (128, 1, 1)
    assert (engine["flash_attn"], engine["type_k"], engine["n_gpu_layers"]) == (False, "q8_0", 0)
    assert loaded["tools_supported"] is False   # SmolLM2's template has no tool-call format
    # the template sees --chat-template-kwargs; the reasoning format is the preset's
    _, rendered, _ = call(ours.port, "POST", "/apply-template", {"model": "smol", "messages": HELLO})
    assert "Say hello." in rendered["prompt"]
    call(upstream.port, "POST", "/models/unload", {"model": "smollm2"})


def test_alternating_requests_unload_and_reload_each_model(ours: LiveServer) -> None:
    for model, canonical in (("smol", "smollm2"), ("gemma3", "gemma3"), ("smollm2", "smollm2")):
        status, answer, _ = chat(ours.port, model)
        assert status == 200, answer
        assert answer["model"] == canonical
        loaded = [name for name, value in statuses(ours).items() if value == "loaded"]
        assert loaded == [canonical]   # --models-max 1
    log = ours.log_tail(20000)
    assert "model gemma3: unloading (least recently used) to load smollm2 (--models-max 1)" in log
    assert "model smollm2: unloading (least recently used) to load gemma3" in log


def test_a_model_in_flight_is_never_unloaded(ours: LiveServer) -> None:
    long = {"model": "gemma3", "messages": HELLO, "max_tokens": 48, "temperature": 0, "ignore_eos": True,
            "stream": True}
    other: list[Any] = []
    events: list[Any] = []
    ended: dict[str, float] = {}
    for event in sse_events(HOST, ours.port, "/v1/chat/completions", long):
        events.append(event)
        if len(events) == 1:   # gemma3 is generating: ask for the other model now
            def ask() -> None:
                other.append(chat(ours.port, "smollm2"))
                ended["other"] = time.monotonic()
            thread = threading.Thread(target=ask)
            thread.start()
    ended["stream"] = time.monotonic()
    thread.join(120)
    assert events[-1] == "[DONE]" and not any(isinstance(e, dict) and "error" in e for e in events)
    finish = [c["finish_reason"] for e in events if isinstance(e, dict) for c in e["choices"] if c["finish_reason"]]
    assert finish == ["length"]
    # streamed as it was generated, not at the end: 48 tokens in many events (fewer than 48: Gemma
    # writes "<|im_end|>" in plain tokens, and deviation 5 holds a tail that may be a parser literal)
    assert len([e for e in events if isinstance(e, dict) and e["choices"] and e["choices"][0]["delta"].get("content")
                is not None]) >= 12
    assert other[0][0] == 200 and other[0][1]["model"] == "smollm2"
    assert ended["other"] > ended["stream"]   # it waited for the stream to end
    log = ours.log_tail(20000)
    drained = log.rindex("model gemma3: draining (its 1 requests finish first) to load smollm2")
    stream_line = log.index('"POST /v1/chat/completions" 200', drained)
    assert log.index("model gemma3: unloaded", drained) > stream_line   # unloaded after its stream's last event


def test_concurrent_requests_to_both_models_all_answer(ours: LiveServer) -> None:
    answers: list[tuple[str, Any]] = []

    def ask(model: str) -> None:
        answers.append((model, chat(ours.port, model)))
    threads = [threading.Thread(target=ask, args=(m,)) for m in ("smollm2", "gemma3", "smollm2", "gemma3")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert len(answers) == 4
    for model, (status, answer, _) in answers:
        assert status == 200 and answer["model"] == model, answer
    assert sorted(statuses(ours).values()) == ["loaded", "unloaded"]


def test_load_and_unload_routes_and_their_events(ours: LiveServer) -> None:
    loaded = next(name for name, value in statuses(ours).items() if value == "loaded")
    other = "gemma3" if loaded == "smollm2" else "smollm2"
    listener = http.client.HTTPConnection(HOST, ours.port, timeout=60)
    listener.request("GET", "/models/sse")
    events = listener.getresponse()
    assert call(ours.port, "POST", "/models/load", {"model": loaded})[1]["error"]["message"] == \
        "model is already running"
    assert call(ours.port, "POST", "/models/load", {"model": other})[:2] == (200, {"success": True})
    assert statuses(ours) == {other: "loaded", loaded: "unloaded"}
    assert call(ours.port, "POST", "/models/unload", {"model": other})[:2] == (200, {"success": True})
    assert set(statuses(ours).values()) == {"unloaded"}
    seen = []
    while len(seen) < 6:
        line = events.readline().decode().strip()
        if line.startswith("data: "):
            event = json.loads(line[len("data: "):])
            assert event["event"] == "model_status"
            seen.append((event["model"], event["data"]["status"]))
    listener.close()
    assert seen == [(loaded, "unloading"), (loaded, "unloaded"), (other, "loading"), (other, "loaded"),
                    (other, "unloading"), (other, "unloaded")]


def test_start_and_access_lines(ours: LiveServer) -> None:
    log = ours.log_text()
    assert "router mode: 2 model(s), at most 1 loaded at once" in log
    assert re.search(r"model smollm2 \(also smol\): .*smollm2\.gguf \[preset\]", log)
    assert f"listening on http://{HOST}:{ours.port}/" in log
    assert "model smollm2: context 768 tokens, 1 slot(s) of 768, batch 256, 1 thread(s)" in log
    assert re.search(r"model smollm2: template the model's, family \w+, format [\w-]+, no tool calls", log)
    assert re.search(r"model gemma3: backends cpu", log)
    line = re.search(r'127\.0\.0\.1:\d+ "POST /v1/chat/completions" 200 [\d.]+s model=gemma3 '
                     r"prompt=(\d+) completion=(\d+) cached=(\d+)", log)
    assert line and int(line.group(1)) > 0 and int(line.group(2)) > 0
    assert '"GET /v1/models" 200' in log
    assert "Say hello." not in log   # never the prompt without --log-prompts


def test_tools_on_a_template_without_tool_calls(ours: LiveServer, upstream: LlamaServer) -> None:
    """llama-server answers every tool_choice with plain content (the template drops the tools); llamact
    answers "auto" the same with a warning, and refuses the choices that demand a call."""
    named = {"type": "function", "function": {"name": "get_weather"}}
    for choice in ("auto", "required", named):
        status, answer, _ = chat(upstream.port, "smollm2", tools=[TOOL], tool_choice=choice)
        assert status == 200 and "tool_calls" not in answer["choices"][0]["message"], choice
    status, answer, headers = chat(ours.port, "smollm2", tools=[TOOL], tool_choice="auto")
    assert status == 200 and "no tool-call format" in headers["x-llamact-warning"]
    assert "tool_calls" not in answer["choices"][0]["message"]
    for choice in ("required", named):
        status, error, _ = chat(ours.port, "smollm2", tools=[TOOL], tool_choice=choice)
        message = error["error"]["message"]
        assert status == 400 and "--chat-template-file chatml-tools" in message, error
        # the remedies a pip user has: a named model one flag away, the template llamact ships
        assert "llamact serve --model qwen2.5-coder-0.5b" in message and "models/templates" not in message
    assert "--chat-template-file" in ours.log_tail(20000)   # the warning, once


def test_no_cors_headers_unless_asked(ours: LiveServer) -> None:
    origin = {"Origin": "https://elsewhere.example"}
    _, _, headers = call(ours.port, "GET", "/v1/models", headers=origin)
    assert "access-control-allow-origin" not in headers
    _, _, headers = call(ours.port, "OPTIONS", "/v1/chat/completions",
                         headers={**origin, "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in headers
