"""Shared fixtures: the real models from PyPI and upstream's own programs built from the pin."""

from __future__ import annotations

import os
from pathlib import Path

# ggml's CPU backend runs its threads through OpenMP, whose default is to spin while it waits: with
# more busy threads than free cores (a test beside an upstream program or a server it started, or
# the machine's other jobs), a 128-token generation on 2 threads took 67 s instead of 3.4 s here.
# Passive waiting sleeps instead, and changes no result (what is computed, and in what order, is
# the same). Set before llamact loads ggml: libgomp reads it once, when it is loaded. Every
# process the tests start inherits it (llama-server, llama-simple, `llamact serve`, workers).
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
# Every reuse of a memoised chat parser is rebuilt and compared (chat/parser_memo.py), so the whole
# parity corpus checks the memo's keys; tests/chat/test_parser_memo.py runs it for real.
os.environ.setdefault("LLAMACT_PARSER_MEMO", "verify")

import pytest  # noqa: E402

import llamact  # noqa: E402


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    from llamact.models import smollm2_path

    return smollm2_path()


@pytest.fixture(scope="session")
def gemma3_path() -> Path:
    from llamact.models import gemma3_path

    return gemma3_path()


@pytest.fixture(scope="session", params=["smollm2", "gemma3"])
def model_path(request: pytest.FixtureRequest) -> Path:
    """Each real model in turn."""
    return request.getfixturevalue(f"{request.param}_path")


@pytest.fixture(scope="session")
def upstream_bin():
    """Path of an upstream program (llama-simple, llama-bench) built from the vendored tree.

    They are built when the package is installed with -DLLAMACT_BUILD_UPSTREAM_TOOLS=ON, which
    scripts/test.sh does. Missing tools fail the test: parity must not silently be skipped.
    """
    bin_dir = Path(os.environ.get("LLAMACT_BIN_DIR", Path(llamact.__file__).parent / "_bin"))

    def find(name: str) -> Path:
        path = bin_dir / name
        if not path.exists():
            pytest.fail(f"{path} is missing: install llamact with CMAKE_ARGS=-DLLAMACT_BUILD_UPSTREAM_TOOLS=ON "
                        "(scripts/test.sh does)")
        return path

    return find


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def oracle():
    """A fresh oracle process with no answer cache: every request reaches upstream's code."""
    from llamact.parity.oracle import OracleClient, OracleProcessError

    try:
        client = OracleClient(cache=False, timeout=300)
    except OracleProcessError as exc:
        pytest.fail(str(exc))
    with client:
        yield client


@pytest.fixture(scope="session")
def full_corpus_bytes(repo_root: Path) -> bytes:
    """The full reference corpus (``build_corpus`` over the vendored tree, without models), built
    once per run by a fresh oracle process with no answer cache, pickled. Every test that reads the
    whole corpus gets its own copy from these bytes (``full_corpus``), so none can change what
    another reads; the build itself (a minute of upstream's code) is not repeated per module."""
    import pickle

    from llamact.parity.corpus import build_corpus
    from llamact.parity.oracle import OracleClient, OracleProcessError

    try:
        client = OracleClient(cache=False, timeout=300)
    except OracleProcessError as exc:
        pytest.fail(str(exc))
    with client:
        corpus = build_corpus(client, repo_root / "vendor" / "llama.cpp")
    return pickle.dumps(corpus, protocol=pickle.HIGHEST_PROTOCOL)


@pytest.fixture
def full_corpus(full_corpus_bytes: bytes):
    """A private copy of the full corpus (see ``full_corpus_bytes``)."""
    import pickle

    return pickle.loads(full_corpus_bytes)


# LLAMACT_TEST_GRAMMAR_ENGINE=llguidance (or llama) runs the tests on that grammar engine: grammar_engine
# "auto" (every request's default) takes it for every grammar class, in process and in the servers the
# tests start (tests/server/conftest.py passes --grammar-engine). Issue 42: the parity tests on both.
TEST_GRAMMAR_ENGINE = os.environ.get("LLAMACT_TEST_GRAMMAR_ENGINE")


@pytest.fixture(autouse=True)
def _grammar_engine_under_test(monkeypatch: pytest.MonkeyPatch) -> None:
    if TEST_GRAMMAR_ENGINE is None:
        return
    from llamact.engine import grammar_engines
    from llamact.grammar.engines import GRAMMAR_CLASSES

    if TEST_GRAMMAR_ENGINE not in ("llguidance", "llama"):
        pytest.fail(f"LLAMACT_TEST_GRAMMAR_ENGINE must be llguidance or llama, not {TEST_GRAMMAR_ENGINE!r}")
    classes = frozenset(GRAMMAR_CLASSES) if TEST_GRAMMAR_ENGINE == "llguidance" else frozenset()
    monkeypatch.setattr(grammar_engines, "PROVEN_CLASSES", classes)
