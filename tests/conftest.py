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
# The parser memo (chat/parser_memo.py) is set per test by pytest_runtest_setup below; a value set
# in the environment before pytest starts (on, off, verify) holds for every test instead.
_MEMO_FROM_ENVIRONMENT = os.environ.get("LLAMACT_PARSER_MEMO")

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


# The fast tier (`bash scripts/test.sh --fast`: -m "not slow") leaves these out besides the tests
# each module marks slow itself: what starts its own servers, the peer or a tool over the whole
# package, and the tests that read the full corpus (the scoreboard's work). The full suite runs all.
SLOW = (
    "tests/test_code_quality.py::test_mypy",                  # run `mypy llamact/<pkg>` on what you change
    "tests/chat/test_output_parser.py::test_damaged_outputs_stream_as_upstream",
    "tests/peg/test_executor_parity.py::test_corpus_streams_full",
    "tests/peg/test_executor_parity.py::test_mutated_corpus_streams",
    "tests/peg/test_peg_grammar_parity.py::test_template_arenas_full_corpus",
    "tests/compat/test_side_by_side.py",                       # llama-cpp-python in its own process
    "tests/compat/test_docs_examples.py",
    "tests/backends/litert/test_litert_serve.py",              # `llamact serve` on a bundle
    "tests/parity/test_logprobs_server.py",                    # llama-server beside llamact
    "tests/parity/test_embeddings_server.py",
    "tests/parity/test_speculative_parity.py",
    "tests/server/test_client_langchain.py",                   # the real clients
    "tests/server/test_client_litellm.py",
    "tests/server/test_client_openai_responses.py",
    "tests/server/test_embedding_disconnect.py",
    "tests/server/test_edge.py",                               # servers of their own
    "tests/server/test_hostile_grammars.py",
    "tests/server/test_router.py",
    "tests/server/test_shutdown.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Parity tests (marker ``parity`` or under tests/parity/: the corpora, the specialized families,
    the streams, the servers' wire parity, server_e2e) run the parser memo in ``verify``: every
    reuse is rebuilt and compared, and a difference raises, so the request shapes of the whole
    corpus check the memo's keys. The other tests run it ``on``, as users do (verify costs a fresh
    build on every hit). tests/chat/test_parser_memo.py switches it itself. Set before the test's
    fixtures, so a module's fixtures run in the mode of its first test."""
    if _MEMO_FROM_ENVIRONMENT is None:
        parity = item.get_closest_marker("parity") is not None or item.nodeid.startswith("tests/parity/")
        os.environ["LLAMACT_PARSER_MEMO"] = "verify" if parity else "on"


@pytest.fixture(scope="session")
def oracle():
    """One oracle client for the session, answering from its on-disk cache where it can.

    Honest because of what keys an answer (parity/oracle.py): the sha256 of the oracle binary and
    of upstream's libraries beside it (parity/binary_identity.py; the build is native, so the
    machine's instruction set is in those bytes), the pin commit, the name, size and mtime of any
    model file named, and the request as written. A cached answer is therefore the answer this
    same build gave to this same request, and the oracle is deterministic (its clock is fixed;
    tests/parity/test_scoreboard.py builds the full corpus again in a fresh uncached process and
    compares). Any rebuild that changes a byte asks afresh. tests/oracle/ overrides this with a
    live, uncached process: those tests are about the program itself.
    """
    from llamact.parity.oracle import OracleClient, OracleProcessError

    try:
        client = OracleClient(cache=True, timeout=300)
    except OracleProcessError as exc:
        pytest.fail(str(exc))
    with client:
        yield client


@pytest.fixture(scope="session")
def full_corpus_bytes(repo_root: Path, oracle) -> bytes:
    """The full reference corpus (``build_corpus`` over the vendored tree, without models), built
    once per run through the session's oracle, pickled. Every test that reads the whole corpus gets
    its own copy from these bytes (``full_corpus``), so none can change what another reads; the
    build itself (a minute of upstream's code when the cache is cold) is not repeated per module."""
    import pickle

    from llamact.parity.corpus import build_corpus

    corpus = build_corpus(oracle, repo_root / "vendor" / "llama.cpp")
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
