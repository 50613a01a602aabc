"""A live ``llamact serve`` for the tests: its own process on 127.0.0.1, stopped at teardown (and
killed with the test process: PR_SET_PDEATHSIG), with raw HTTP helpers that keep every field."""

from __future__ import annotations

import ctypes
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from llamact.json_types import Json

HOST = "127.0.0.1"
API_KEY = "test-key"                                       # the main test server's key
HERMES = "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"   # SmolLM2 calls tools through it (greedy)
DEEPSEEK_R1 = "llama-cpp-deepseek-r1"                      # its generation prompt opens a thought
QWQ = "Qwen-QwQ-32B"                                       # so does this one's, in tokens a budget sees


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class LiveServer:
    """``python -m llamact serve ARGS`` on a free port of 127.0.0.1."""

    def __init__(self, *args: str, api_key: str | None = None, start_timeout: float = 120.0,
                 env: dict[str, str] | None = None, scripted: bool = False) -> None:
        self.args = list(args)
        # scripted: the server's engines obey scripted replies (tests/scripted_model.py)
        self.program = [str(Path(__file__).with_name("scripted_serve.py"))] if scripted else ["-m", "llamact"]
        self.env = env   # the environment to run in (default: this process's)
        self.api_key = api_key
        self.start_timeout = start_timeout
        self.port = 0
        self._log = tempfile.TemporaryFile()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def process(self) -> subprocess.Popen[bytes]:
        """The running server's process (to signal it)."""
        assert self._process is not None
        return self._process

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def __enter__(self) -> LiveServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        for _attempt in range(3):   # the probed port may be taken before the server binds it
            self.port = free_port()
            key = ["--api-key", self.api_key] if self.api_key else []
            env = {k: v for k, v in (self.env or os.environ).items() if not k.startswith("LLAMACT_") or k in (
                "LLAMACT_LIB_DIR", "LLAMACT_BIN_DIR", "LLAMACT_CACHE")}
            self._process = subprocess.Popen(
                [sys.executable, *self.program, "serve", "--host", HOST, "--port", str(self.port), *key, *self.args],
                stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                # away from the source tree: `python -m` puts the working directory first on sys.path,
                # and the checkout's llamact has no compiled part (the installed one is under test)
                cwd=tempfile.gettempdir(), preexec_fn=_die_with_parent,
            )
            if self._wait_healthy():
                return
            self.stop()
        raise RuntimeError(f"llamact serve did not become healthy; its log:\n{self.log_tail()}")

    def _wait_healthy(self) -> bool:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                return False
            try:
                status, _ = self.request("GET", "/health", timeout=5.0)
                if status == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)

    def log_text(self) -> str:
        """The whole log: its start lines stay readable however much the requests since then wrote."""
        self._log.flush()
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def log_tail(self, n: int = 4000) -> str:
        self._log.flush()
        self._log.seek(0, os.SEEK_END)
        self._log.seek(max(0, self._log.tell() - n))
        return self._log.read().decode("utf-8", "replace")

    def headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    def request(self, method: str, path: str, body: bytes | None = None, *, headers: dict[str, str] | None = None,
                timeout: float = 300.0) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers if headers is not None else self.headers())
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()


def sse_events(host: str, port: int, path: str, body: Json, headers: dict[str, str] | None = None) -> Iterator[Json]:
    """POST a streamed request; yield each event's JSON, then the string "[DONE]"."""
    conn = http.client.HTTPConnection(host, port, timeout=300)
    try:
        conn.request("POST", path, body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        assert response.status == 200, (response.status, response.read()[:500])
        for raw in response:
            line = raw.decode("utf-8").rstrip("\r\n")
            if not line.startswith("data: "):
                continue
            data = line[len("data: "):]
            if data == "[DONE]":
                yield "[DONE]"
                return
            yield json.loads(data)
    finally:
        conn.close()


def openai_client(live: LiveServer) -> Any:
    """The official client pointed at ``live`` (no retries: a failure shows at once)."""
    import openai

    return openai.OpenAI(base_url=live.base_url + "/v1", api_key=live.api_key or "none", max_retries=0, timeout=300)
