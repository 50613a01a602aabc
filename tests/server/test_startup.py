"""What a default ``llamact serve`` says and answers in its first minute (issue 44): the bundled model's
name (not its path in site-packages) as its id, start-up problems found before the model loads and
said once, the URL once the model is ready, an error's cause in its access line, and llama.cpp's own
lines only with ``-v``."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from server_live import HOST, LiveServer

from llamact.models import SMOLLM2_FILE


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llamact", "serve", "--host", HOST, *args], capture_output=True,
                          text=True, timeout=120, cwd=tempfile.gettempdir())


@pytest.mark.model
def test_the_default_server_names_its_model_by_file_and_says_each_start_line_once(smollm2_path: Path) -> None:
    with LiveServer("--threads", "1", "--ctx-size", "512") as live:   # no --model: the bundled SmolLM2
        models = json.loads(live.request("GET", "/v1/models")[1])
        assert models["data"][0]["id"] == SMOLLM2_FILE and models["models"][0]["name"] == SMOLLM2_FILE
        props = json.loads(live.request("GET", "/props")[1])
        assert props["model_alias"] == SMOLLM2_FILE and props["model_path"] == str(smollm2_path)   # still reachable
        body = json.dumps({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}).encode()
        status, raw = live.request("POST", "/v1/chat/completions", body)
        assert status == 200 and json.loads(raw)["model"] == SMOLLM2_FILE
        status, raw = live.request("POST", "/v1/embeddings", json.dumps({"input": "hi"}).encode())
        assert status == 400 and "--pooling mean" in json.loads(raw)["error"]["message"]
        live.stop()
        log = live.log_tail(20000).splitlines()
    names = [line for line in log if str(smollm2_path.parent) in line]
    assert len(names) == 1 and "loaded in" in names[0], names   # the path once, where the file is said
    url = f"llamact: listening on http://{HOST}:{live.port}/"
    assert log.count(url) == 1 and log.index(url) > next(i for i, line in enumerate(log) if "loaded in" in line)
    # an error's access line carries its cause
    (refused,) = [line for line in log if '"POST /v1/embeddings" 400' in line]
    assert refused.endswith("start the server with --pooling mean (or cls / last) for one vector per input")


def test_a_busy_port_is_said_once_before_any_model_loads(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        proc = _serve("--port", str(taken.getsockname()[1]), "--model", "never-loaded.gguf")
    assert proc.returncode == 1
    # the model file is checked first (a missing file needs no socket)...
    assert proc.stderr.strip().splitlines() == ["llamact: error: the model file never-loaded.gguf does not exist"]
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _serve("--port", str(port), "--model", str(bad))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [  # ...then the port, before the model would load
        f"llamact: error: cannot listen on {HOST}:{port}: Address already in use -- another process is listening "
        "there (another llamact serve?): stop it, or choose another port with --port"]


def test_a_model_that_fails_to_load_is_said_once_and_last(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    proc = _serve("--port", "0", "--model", str(bad))
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert lines[0] == f"llamact: model bad.gguf: loading {bad}"
    errors = [line for line in lines if "error" in line or "failed" in line]
    assert len(errors) == 1 and lines[-1] == errors[0], lines   # once, and the last word
    assert errors[0].startswith("llamact: error: model bad.gguf: loading failed: llama.cpp could not load")
    assert not any("listening on" in line or "gguf_init" in line.split(":")[0] for line in lines), lines


def test_llama_cpps_own_lines_only_with_verbose(tmp_path: Path) -> None:
    """A file llama.cpp refuses: without -v the one error (which quotes llama.cpp's reason), with -v
    llama.cpp's own lines too."""
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    run = [sys.executable, "-m", "llamact", "generate", "--model", str(bad), "--prompt", "x"]
    quiet = subprocess.run(run, capture_output=True, text=True, timeout=120, cwd=tempfile.gettempdir())
    assert quiet.returncode == 1
    (line,) = quiet.stderr.strip().splitlines()
    assert line.startswith("llamact: error: llama.cpp could not load") and "gguf_init_from_reader" in line
    verbose = subprocess.run([*run, "-v"], capture_output=True, text=True, timeout=120, cwd=tempfile.gettempdir())
    assert any(text.startswith("gguf_init_from_reader") for text in verbose.stderr.splitlines()), verbose.stderr


@pytest.mark.model
def test_the_shipped_tool_template_by_name_gives_the_default_model_tool_calls() -> None:
    """The remedy the 400 names: ``--chat-template-file chatml-tools`` (a template llamact ships, found
    by name) gives the bundled SmolLM2 a tool-call format, so a named choice is a call, not a 400."""
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    body = {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [tool], "max_tokens": 160,
            "temperature": 0, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
    with LiveServer("--threads", "1", "--ctx-size", "1024", "--chat-template-file", "chatml-tools") as live:
        status, raw = live.request("POST", "/v1/chat/completions", json.dumps(body).encode())
        log = live.log_tail(20000)
    assert status == 200, raw
    (call,) = json.loads(raw)["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather" and "city" in json.loads(call["function"]["arguments"])
    assert "template file" in log and "chatml-tools.jinja" in log and ", tool calls" in log
