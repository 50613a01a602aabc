"""Live ``llamact serve`` processes with the bundled SmolLM2 (one thread, llama-server's default
batch sizes and the parity harness's context, so that answers compare with llama-server's), each
started on first use and stopped at the end of the session. The server's extra (fastapi, uvicorn,
pydantic-settings) and ``openai`` are test dependencies: missing, the tests fail."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import openai
import pytest
from server_live import API_KEY, DEEPSEEK_R1, HERMES, QWQ, LiveServer, openai_client


@pytest.fixture(scope="session")
def template_file(repo_root: Path) -> Callable[[str], Path]:
    def find(name: str) -> Path:
        path = repo_root / "vendor" / "llama.cpp" / "models" / "templates" / f"{name}.jinja"
        if not path.is_file():
            pytest.fail(f"{path} is missing: run scripts/vendor_llama_cpp.py")
        return path

    return find


def _serve(model: Path, *args: str, api_key: str | None = None) -> LiveServer:
    engine = os.environ.get("LLAMACT_TEST_GRAMMAR_ENGINE")   # see tests/conftest.py
    if engine:
        args = (*args, "--grammar-engine", engine)
    return LiveServer("--model", str(model), "--threads", "1", "--ctx-size", "4096", *args, api_key=api_key)


@pytest.fixture(scope="session")
def server(smollm2_path: Path) -> Iterator[LiveServer]:
    """The model's own template; every route but /health needs API_KEY."""
    with _serve(smollm2_path, api_key=API_KEY) as live:
        yield live


@pytest.fixture(scope="session")
def embedding_server(smollm2_path: Path) -> Iterator[LiveServer]:
    """Mean pooling: SmolLM2's own is none, which OpenAI's /v1/embeddings refuses (as llama-server)."""
    with _serve(smollm2_path, "--pooling", "mean") as live:
        yield live


@pytest.fixture(scope="session")
def hermes_server(smollm2_path: Path, template_file: Callable[[str], Path]) -> Iterator[LiveServer]:
    with _serve(smollm2_path, "--chat-template-file", str(template_file(HERMES))) as live:
        yield live


@pytest.fixture
def fresh_hermes_server(smollm2_path: Path, template_file: Callable[[str], Path]) -> Iterator[LiveServer]:
    """A Hermes server of its own: its first request is evaluated whole. On a shared server the
    prompt cache reuses what earlier requests left in the KV cache, and a prompt evaluated in other
    batches can tip a near-tie greedy token (a tool call or not) the other way."""
    with _serve(smollm2_path, "--chat-template-file", str(template_file(HERMES))) as live:
        yield live


@pytest.fixture(scope="session")
def qwq_server(smollm2_path: Path, template_file: Callable[[str], Path]) -> Iterator[LiveServer]:
    """QwQ's template: its generation prompt opens a thought whose tag SmolLM2 tokenizes as it does alone."""
    with _serve(smollm2_path, "--chat-template-file", str(template_file(QWQ))) as live:
        yield live


@pytest.fixture(scope="session")
def r1_server(smollm2_path: Path, template_file: Callable[[str], Path]) -> Iterator[LiveServer]:
    with _serve(smollm2_path, "--chat-template-file", str(template_file(DEEPSEEK_R1))) as live:
        yield live


@pytest.fixture(scope="session")
def client(server: LiveServer) -> openai.OpenAI:
    return openai_client(server)


@pytest.fixture(scope="session")
def parallel_server(smollm2_path: Path) -> Iterator[LiveServer]:
    """Eight slots of 512 positions in one context of 4096."""
    with _serve(smollm2_path, "--parallel", "8") as live:
        yield live
