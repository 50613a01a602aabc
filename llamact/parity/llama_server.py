"""Upstream's own ``llama-server``, run as a reference: started on 127.0.0.1, asked over HTTP, stopped.

The server_e2e parity suite sends the same chat requests to llama-server and to ``engine.create()``
and compares the answers. This module owns the server process and the raw HTTP (standard library
only: the comparison needs llama-server's own fields, such as ``timings`` and ``__verbose``, which an
OpenAI client library would hide, and the tests need no extra dependency).

The server is built from the vendored tree with ``-DLLAMACT_BUILD_UPSTREAM_TOOLS=ON`` (scripts/test.sh
does) and installed next to the oracle in ``llamact/_bin``. It only ever listens on 127.0.0.1, with one
slot, greedy sampling by default, and none of the ``LLAMA_ARG_*`` environment variables that would
otherwise change its flags behind the caller's back.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import ErrorKind, LlamaException
from ..json_types import Json

HOST = "127.0.0.1"
SERVER_NAME = "llama-server"


class LlamaServerError(LlamaException):
    """llama-server is missing, did not start, or answered something the harness cannot read."""

    kind = ErrorKind.UNCLASSIFIED   # the parity harness's trouble with another program, none of llamact's kinds


def find_llama_server(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The llama-server executable: ``explicit``, else ``$LLAMACT_BIN_DIR``, else the package's ``_bin``."""
    candidates: list[Path] = []
    if explicit:
        candidates.append(Path(explicit))
    elif os.environ.get("LLAMACT_BIN_DIR"):
        candidates.append(Path(os.environ["LLAMACT_BIN_DIR"]) / SERVER_NAME)
    if not explicit:
        candidates.append(Path(__file__).resolve().parent.parent / "_bin" / SERVER_NAME)
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    tried = ", ".join(str(p) for p in candidates)
    raise LlamaServerError(f"llama-server was not found (tried {tried}): install llamact with "
                           "CMAKE_ARGS=-DLLAMACT_BUILD_UPSTREAM_TOOLS=ON (scripts/test.sh does)")


@dataclass(frozen=True)
class ServerConfig:
    """How one llama-server is started. Everything that shapes its answers is explicit here, so that
    llamact can be configured to match (see ``create_answer.engine_params_for``)."""

    model: Path
    chat_template_file: Path | None = None   # None: the GGUF's own template
    reasoning_format: str = "deepseek"
    n_ctx: int = 4096
    n_batch: int = 2048
    n_ubatch: int = 512
    # One thread: on a shared machine more threads than free cores make ggml's spinning thread pool
    # collapse (tens of times slower). The thread count can change the numbers (how a product is
    # split; measured: gemma3 Mistral-Nemo/required, greedy, parts at its 4th token between 1 and 2
    # threads), so llamact is compared with the same count; benchmarks that compare speed pass their own.
    n_threads: int = 1
    # Sliding-window layers keep every position, as llamact's contexts do. Without it llama-server
    # splits a prompt for an SWA model (Gemma 3) into several batches, to checkpoint the window
    # before the last user message and 4 + n_ubatch and 4 tokens before the end (server-context.cpp,
    # do_checkpoint); logits depend on how a prompt is batched, so greedy answers then part at near
    # ties. With it the server evaluates the prompt in n_batch pieces, as llamact does.
    swa_full: bool = True
    extra_args: tuple[str, ...] = ()  # e.g. ("--embeddings", "--pooling", "mean")

    def arguments(self, port: int) -> list[str]:
        args = [
            "--host", HOST, "--port", str(port),
            "--model", str(self.model),
            # --jinja before --chat-template-file: otherwise only built-in template names are accepted
            "--jinja",
            "--parallel", "1", "--ctx-size", str(self.n_ctx),
            "--batch-size", str(self.n_batch), "--ubatch-size", str(self.n_ubatch),
            "--threads", str(self.n_threads), "--threads-batch", str(self.n_threads),
            "--reasoning-format", self.reasoning_format,
            "--temp", "0", "--seed", "0",
            "--no-warmup", "--offline", "--no-webui",
        ]
        if self.swa_full:
            args.append("--swa-full")
        if self.chat_template_file is not None:
            args += ["--chat-template-file", str(self.chat_template_file)]
        return args + list(self.extra_args)


@dataclass(frozen=True)
class RouterConfig:
    """llama-server in router mode (no model of its own: ``--models-dir`` / ``--models-preset``, each
    model a child process loaded on demand), for comparing llamact's router with it."""

    models_dir: Path | None = None
    models_preset: Path | None = None
    models_max: int = 4
    n_threads: int = 1
    extra_args: tuple[str, ...] = ()

    def arguments(self, port: int) -> list[str]:
        args = ["--host", HOST, "--port", str(port), "--models-max", str(self.models_max),
                "--threads", str(self.n_threads), "--no-webui", "--offline"]
        if self.models_dir is not None:
            args += ["--models-dir", str(self.models_dir)]
        if self.models_preset is not None:
            args += ["--models-preset", str(self.models_preset)]
        return args + list(self.extra_args)


def _die_with_parent() -> None:
    """In the child, before exec (Linux): SIGKILL when the parent dies, so that a harness killed
    without cleanup leaves no server behind."""
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """One running llama-server. Use as a context manager: it is always stopped on exit."""

    def __init__(self, config: ServerConfig | RouterConfig, executable: Path | None = None, *,
                 start_timeout: float = 120.0, request_timeout: float = 300.0) -> None:
        self.config = config
        self.executable = executable or find_llama_server()
        self.start_timeout = start_timeout
        self.request_timeout = request_timeout
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._process is not None:
            raise LlamaServerError("llama-server is already running")
        config = self.config
        if isinstance(config, ServerConfig) and not config.model.is_file():
            raise LlamaServerError(f"model file not found: {config.model}")
        if isinstance(config, ServerConfig) and config.chat_template_file is not None \
                and not config.chat_template_file.is_file():
            raise LlamaServerError(f"chat template file not found: {config.chat_template_file}")
        # the port is free when probed; another process may take it before the server binds, so retry
        for _attempt in range(3):
            self.port = _free_port()
            env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
            # with --mmproj, media render as this marker (a random one otherwise): the prompts llamact
            # returns show mtmd's default marker, so the two compare equal
            env["LLAMA_MEDIA_MARKER"] = "<__media__>"
            self._process = subprocess.Popen(
                [str(self.executable), *self.config.arguments(self.port)],
                stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
            if self._wait_healthy():
                return
            self.stop()
        raise LlamaServerError(f"llama-server did not become healthy on {HOST}; its log ends with:\n{self.log_tail()}")

    def _wait_healthy(self) -> bool:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                return False
            try:
                status, _ = self._request("GET", "/health", None, timeout=5.0)
                if status == 200:
                    return True
            except (OSError, http.client.HTTPException):
                pass   # not listening yet, or still loading the model (503)
            time.sleep(0.05)
        return False

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the server; kill it if it has not exited within ``timeout`` seconds."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def log_tail(self, n_bytes: int = 4000) -> str:
        self._log.flush()
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(max(0, size - n_bytes))
        return self._log.read().decode("utf-8", "replace")

    # -- HTTP --------------------------------------------------------------------------------

    def _connection(self, timeout: float | None = None) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(HOST, self.port, timeout=timeout or self.request_timeout)

    def _request(self, method: str, path: str, body: Json, timeout: float | None = None) -> tuple[int, bytes]:
        conn = self._connection(timeout)
        try:
            payload = None if body is None else json.dumps(body).encode("utf-8")
            conn.request(method, path, body=payload, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def get(self, path: str) -> tuple[int, bytes]:
        """GET ``path``: the status and the raw answer (``/metrics`` is text, ``/props`` JSON)."""
        return self._request("GET", path, None)

    def post(self, path: str, body: Json) -> Json:
        """POST JSON, return the JSON answer; a non-200 answer raises with the server's message."""
        status, data = self._request("POST", path, body)
        try:
            answer = json.loads(data)
        except ValueError as exc:
            raise LlamaServerError(f"{path}: HTTP {status}, not JSON: {data[:200]!r}") from exc
        if status != 200:
            raise LlamaServerError(f"{path}: HTTP {status}: {json.dumps(answer)[:500]}")
        return answer

    def stream(self, path: str, body: Json) -> Iterator[Json]:
        """POST JSON with ``stream: true``; yield each server-sent event's JSON until ``[DONE]``.

        An error event (``data: {"error": ...}``) raises, as does a non-200 answer.
        """
        conn = self._connection()
        try:
            conn.request("POST", path, body=json.dumps(body).encode("utf-8"),
                         headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
            response = conn.getresponse()
            if response.status != 200:
                raise LlamaServerError(f"{path}: HTTP {response.status}: {response.read()[:500]!r}")
            while True:
                line = response.readline()
                if not line:
                    raise LlamaServerError(f"{path}: the event stream ended without [DONE]")
                text = line.decode("utf-8").rstrip("\r\n")
                if not text.startswith("data:"):
                    continue   # blank separators, comments (pings), event names
                data = text[len("data:"):].strip()
                if data == "[DONE]":
                    return
                event = json.loads(data)
                if isinstance(event, dict) and "error" in event:
                    raise LlamaServerError(f"{path}: error event: {json.dumps(event['error'])[:500]}")
                yield event
        finally:
            conn.close()
