"""Models from the Hugging Face Hub (llamact/hub.py), against a stand-in hub on 127.0.0.1.

huggingface_hub reads HF_ENDPOINT, HF_HOME and HF_HUB_OFFLINE when it is imported, so each
download runs in a child interpreter with its own environment; no test reaches the internet.
"""

from __future__ import annotations

import filecmp
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_hub import COMMIT, FakeHub, serve

from llamact import GenerationParams, LlamaEngine, LlamaModelException, ModelParams
from llamact.hub import hf_download, parse_hf_uri, resolve_model_path

REPO_ID = "llamact-test/SmolLM2-GGUF"
FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
PROMPT = "The capital of France is"

CHILD = r"""
import json, sys
from llamact import GenerationParams, LlamaEngine, LlamaModelException, ModelParams
try:
    with LlamaEngine.from_pretrained(sys.argv[1], sys.argv[2], ModelParams(n_ctx=256)) as engine:
        result = engine.complete(sys.argv[3], GenerationParams(greedy=True, max_tokens=6))
    print(json.dumps({"text": result.text}))
except LlamaModelException as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
"""


@pytest.fixture(scope="module")
def hub(smollm2_path: Path) -> Iterator[FakeHub]:
    with serve({(REPO_ID, FILENAME): smollm2_path}) as fake:
        yield fake


def _hub_env(hub: FakeHub, hf_home: Path, offline: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(hf_home), HF_HUB_DISABLE_TELEMETRY="1",
               HF_HUB_OFFLINE="1" if offline else "0", GGML_NO_BACKTRACE="1")
    return env


def _child(env: dict[str, str], *args: str, cwd: Path) -> dict[str, str]:
    proc = subprocess.run([sys.executable, "-c", CHILD, *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.model
def test_from_pretrained_downloads_once_then_loads_from_the_cache(
    hub: FakeHub, smollm2_path: Path, tmp_path: Path
) -> None:
    hf_home = tmp_path / "hf"
    before = len(hub.requests)
    first = _child(_hub_env(hub, hf_home), REPO_ID, FILENAME, PROMPT, cwd=tmp_path)
    assert ("GET", f"/{REPO_ID}/resolve/main/{FILENAME}") in hub.requests[before:]
    cached = hf_home / "hub" / f"models--{REPO_ID.replace('/', '--')}" / "snapshots" / COMMIT / FILENAME
    assert filecmp.cmp(cached, smollm2_path, shallow=False)

    # offline: the cache answers and the hub hears nothing
    before = len(hub.requests)
    second = _child(_hub_env(hub, hf_home, offline=True), REPO_ID, FILENAME, PROMPT, cwd=tmp_path)
    assert hub.requests[before:] == []

    # what was downloaded generates what the bundled file generates
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=256)) as engine:
        expected = engine.complete(PROMPT, GenerationParams(greedy=True, max_tokens=6)).text
    assert first == second == {"text": expected}


def test_a_missing_file_or_repository_raises_a_model_exception(hub: FakeHub, tmp_path: Path) -> None:
    env = _hub_env(hub, tmp_path / "hf")
    missing = _child(env, REPO_ID, "nope.gguf", PROMPT, cwd=tmp_path)
    assert missing["error"] == "LlamaModelException"
    assert "nope.gguf" in missing["message"] and REPO_ID in missing["message"]
    no_repo = _child(env, "someone/absent", FILENAME, PROMPT, cwd=tmp_path)
    assert no_repo["error"] == "LlamaModelException" and "someone/absent" in no_repo["message"]


def _closed_endpoint() -> str:
    """An address on 127.0.0.1 where nothing listens (connections are refused at once)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_an_unreachable_hub_fails_at_once_saying_what_to_do(hub: FakeHub, tmp_path: Path) -> None:
    """Not HF_HUB_OFFLINE, but no Hub: one check of the endpoint, then the error (huggingface_hub alone
    retried the refused connection five times, about 30 s, printing each retry twice)."""
    endpoint = _closed_endpoint()
    proc = subprocess.run([sys.executable, "-c", CHILD, REPO_ID, FILENAME, PROMPT],
                          env={**_hub_env(hub, tmp_path / "hf"), "HF_ENDPOINT": endpoint}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["error"] == "LlamaModelException", out
    assert f"is not in the Hugging Face cache and {endpoint} cannot be reached" in out["message"]
    assert "set HF_ENDPOINT" in out["message"] and "--model PATH" in out["message"]
    assert "Retrying" not in proc.stderr, proc.stderr


def test_offline_and_not_cached_raises_a_model_exception(hub: FakeHub, tmp_path: Path) -> None:
    before = len(hub.requests)
    out = _child(_hub_env(hub, tmp_path / "hf", offline=True), REPO_ID, FILENAME, PROMPT, cwd=tmp_path)
    assert out["error"] == "LlamaModelException"
    assert "not in the Hugging Face cache" in out["message"] and "HF_HUB_OFFLINE" in out["message"]
    assert hub.requests[before:] == []


@pytest.mark.model
def test_cli_chat_takes_an_hf_address(hub: FakeHub, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "llamact", "chat", "-m", f"hf://{REPO_ID}/{FILENAME}", "-p", "Hi", "-n", "4",
         "--greedy", "-c", "512"],
        env=_hub_env(hub, tmp_path / "hf"), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip()
    assert ("GET", f"/{REPO_ID}/resolve/main/{FILENAME}") in hub.requests
    # the download's progress, llamact's own lines (not a loading bar sitting at 0%)
    size = f"{hub.files[(REPO_ID, FILENAME)].stat().st_size / 2**20:.0f}"
    assert f"llamact: downloading {REPO_ID}/{FILENAME}: {size} / {size} MiB (100%)" in proc.stderr, proc.stderr
    # with the Hub unreachable, the cached copy loads (no retries)
    dead = subprocess.run(
        [sys.executable, "-m", "llamact", "chat", "-m", f"hf://{REPO_ID}/{FILENAME}", "-p", "Hi", "-n", "4",
         "--greedy", "-c", "512"], env={**_hub_env(hub, tmp_path / "hf"), "HF_ENDPOINT": _closed_endpoint()},
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert dead.returncode == 0 and "Retrying" not in dead.stderr and "downloading" not in dead.stderr, dead.stderr
    bad = subprocess.run([sys.executable, "-m", "llamact", "chat", "-m", "hf://only-org", "-p", "Hi"],
                         env=_hub_env(hub, tmp_path / "hf"), cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 1 and "hf://ORG/REPO/FILE.gguf" in bad.stderr


@pytest.mark.model
def test_serve_takes_an_hf_address(hub: FakeHub, tmp_path: Path) -> None:
    """``llamact serve -m hf://...`` downloads into the hub's cache, as ``chat`` does (issue 27)."""
    from server_live import LiveServer

    address = f"hf://{REPO_ID}/{FILENAME}"
    with LiveServer("--model", address, "--threads", "1", "--ctx-size", "256",
                    env=_hub_env(hub, tmp_path / "hf")) as live:
        status, raw = live.request("GET", "/v1/models")
        assert status == 200 and json.loads(raw)["data"][0]["id"] == address   # the model as given
        status, raw = live.request("GET", "/props")
        cached = tmp_path / "hf" / "hub" / f"models--{REPO_ID.replace('/', '--')}" / "snapshots" / COMMIT / FILENAME
        assert json.loads(raw)["model_path"] == str(cached)
        body = json.dumps({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}).encode()
        assert live.request("POST", "/v1/chat/completions", body)[0] == 200
    assert ("GET", f"/{REPO_ID}/resolve/main/{FILENAME}") in hub.requests


def test_without_huggingface_hub_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # makes `import huggingface_hub` fail
    with pytest.raises(LlamaModelException, match=r"pip install 'llamact\[hub\]'"):
        hf_download(REPO_ID, FILENAME)
    with pytest.raises(LlamaModelException, match=r"llamact\[hub\]"):
        LlamaEngine.from_pretrained(REPO_ID, FILENAME)


def test_hf_addresses_parse() -> None:
    assert parse_hf_uri("hf://org/repo/file.gguf") == ("org/repo", "file.gguf", None)
    assert parse_hf_uri("hf://org/repo@v2/sub/dir/file.gguf") == ("org/repo", "sub/dir/file.gguf", "v2")
    for bad in ("hf://org", "hf://org/repo", "hf://org//file.gguf", "hf://org/@rev/file.gguf"):
        with pytest.raises(LlamaModelException):
            parse_hf_uri(bad)
    assert resolve_model_path("models/local.gguf") == Path("models/local.gguf")
