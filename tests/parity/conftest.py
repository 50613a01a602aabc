"""Fixtures for the server_e2e suite: upstream's llama-server, started on demand and always stopped."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from llamact.parity.llama_server import LlamaServer, LlamaServerError, ServerConfig, find_llama_server


@pytest.fixture(scope="session")
def llama_server_bin() -> Path:
    """The llama-server built from the vendored tree; missing fails the test (never a silent skip)."""
    try:
        return find_llama_server()
    except LlamaServerError as exc:
        pytest.fail(str(exc))


@pytest.fixture
def start_llama_server(llama_server_bin: Path, repo_root: Path) -> Iterator[Callable[..., LlamaServer]]:
    """``start(model_path, template=None, reasoning_format="deepseek")``: a running llama-server on
    127.0.0.1 with one slot and greedy defaults; every server started is stopped at teardown."""
    started: list[LlamaServer] = []

    def start(model: Path, template: str | None = None, reasoning_format: str = "deepseek") -> LlamaServer:
        template_file = None
        if template is not None:
            template_file = repo_root / "vendor" / "llama.cpp" / "models" / "templates" / f"{template}.jinja"
        server = LlamaServer(ServerConfig(model, template_file, reasoning_format), llama_server_bin)
        started.append(server)
        server.start()
        return server

    yield start
    for server in started:
        server.stop()
