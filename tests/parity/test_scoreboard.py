"""The corpora and the scoreboard: deterministic, complete over the vendored templates, and
measuring every component llamact implements against the oracle."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llamact.parity.corpus import Corpus, build_corpus, template_files
from llamact.parity.known_differences import known_difference
from llamact.parity.oracle import OracleClient
from llamact.parity.scenarios import ASSISTANT_OUTPUTS, SCENARIOS
from llamact.parity.schema_corpus import SCHEMA_CORPUS

pytestmark = pytest.mark.parity

SUBSET = ["Qwen-Qwen3-0.6B", "openai-gpt-oss-120b", "google-gemma-2-2b-it"]
PARITY_COMPONENTS = {
    "jinja", "template_jinja", "caps", "template_render", "chat_apply", "autoparser_analysis", "chat_parse",
    "msg_diffs", "chat_parse_own", "peg_parse", "peg_grammar", "json_schema", "tokenize", "generate_greedy",
    "server_e2e",
}
ROUND_TRIPS = {"peg_arena"}
ALL_COMPONENTS = PARITY_COMPONENTS | ROUND_TRIPS
IMPLEMENTED = ALL_COMPONENTS
# rows whose cases may be named deviations (docs/design.md): llama-server itself vs engine.create()
WITH_DEVIATIONS = {"server_e2e"}
ROW_KEYS = {"check", "cases", "equal", "different", "error", "crash", "deviation", "not_implemented", "excluded",
            "problem", "seconds"}


def unexplained_differences(report: Path) -> list[Any]:
    differences = json.loads(report.read_text())["differences"]
    return [(name, d["id"], d["why"]) for name, diffs in differences.items() for d in diffs
            if not known_difference(name, d["expected"], d["got"])]


@pytest.fixture(scope="module")
def llama_cpp(repo_root: Path) -> Path:
    return repo_root / "vendor" / "llama.cpp"


@pytest.fixture(scope="module")
def fresh_corpora(llama_cpp: Path, full_corpus_bytes: bytes) -> list[Corpus]:
    """The full corpus built twice: the run's shared build (conftest's full_corpus_bytes, through
    the session's oracle: a process of this run, or answers cached from an earlier process of the
    same binary) and one more by a new oracle process with no answer cache, so the two always come
    from different processes."""
    with OracleClient(cache=False) as oracle:
        again = build_corpus(oracle, llama_cpp)
    return [pickle.loads(full_corpus_bytes), again]


@pytest.mark.slow
def test_corpus_is_deterministic_across_oracle_processes(fresh_corpora: list[Corpus]) -> None:
    first, second = fresh_corpora
    assert first.digest() == second.digest()
    for component in ("caps", "template_render", "chat_apply", "autoparser_analysis", "chat_parse", "msg_diffs",
                      "peg_arena", "peg_parse", "peg_grammar"):
        assert first.cases.get(component), component


@pytest.mark.slow
def test_full_corpus_covers_every_template_and_scenario(llama_cpp: Path, fresh_corpora: list[Corpus]) -> None:
    templates = template_files(llama_cpp)
    assert len(templates) >= 70
    corpus = fresh_corpora[0]
    assert len(corpus.cases["caps"]) == len(templates)
    assert len(corpus.cases["autoparser_analysis"]) == len(templates)
    assert len(corpus.cases["chat_apply"]) == len(templates) * len(SCENARIOS)
    streams = {c.input.get("stream") for c in corpus.cases["chat_parse"]}
    # every template whose outputs upstream can render contributes a parse stream per output
    rendered = {s.split("/")[0] for s in streams if s}
    assert len(rendered) >= len(templates) - 2, sorted({t.stem for t in templates} - rendered)
    assert len(streams) >= (len(templates) - 2) * len(ASSISTANT_OUTPUTS) // 2
    # upstream's failures are recorded as answers, and they are the exception
    applied = corpus.cases["chat_apply"]
    assert sum(c.oracle_error for c in applied) < len(applied) // 10
    assert len(corpus.cases["jinja"]) == 290
    assert len(corpus.cases["json_schema"]) == 81 + len(SCHEMA_CORPUS)


@pytest.mark.model
@pytest.mark.slow
def test_scoreboard_command_over_the_full_corpus(tmp_path: Path, llama_cpp: Path) -> None:
    # The server_e2e row is left out here (--no-server): tests/parity/test_server_e2e.py judges every one
    # of its cases with the same runner and judge, and the scoreboard's scoring of that row on a
    # subset; here it would be the same four minutes of engine.create() a second time.
    summary, report = tmp_path / "score.json", tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "llamact.parity", "--llama-cpp", str(llama_cpp), "--no-server",
         "--json", str(summary), "--report", str(report), "--corpus-out", str(tmp_path / "corpus")],
        capture_output=True, text=True, cwd=tmp_path, timeout=3600,  # a hang guard, not a speed check
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert not unexplained_differences(report), proc.stdout
    table = proc.stdout
    assert "100.0% equal" in table
    written_summary = json.loads(summary.read_text())
    assert set(written_summary["components"]) == PARITY_COMPONENTS
    assert set(written_summary["round_trips"]) == ROUND_TRIPS
    components = {**written_summary["components"], **written_summary["round_trips"]}
    assert components["server_e2e"]["excluded"] == "--no-server"
    for name, row in components.items():
        assert set(row) == ROW_KEYS
        if name == "server_e2e":
            continue
        assert row["cases"] > 0, name
        assert row["check"] == ("round-trip" if name in ROUND_TRIPS else "parity")
        if name in IMPLEMENTED:
            assert not row["not_implemented"]
            assert row["crash"] == 0 and not row["problem"], (name, row)
            assert row["deviation"] == 0 or name in WITH_DEVIATIONS, (name, row)
            assert row["error"] == 0, (name, row)
            assert row["equal"] + row["different"] + row["error"] + row["deviation"] == row["cases"], (name, row)
        else:
            assert row["not_implemented"], name
    written = {p.stem for p in (tmp_path / "corpus").glob("*.jsonl")}
    assert written == ALL_COMPONENTS - {"server_e2e"}
    assert json.loads(report.read_text())["corpus_digest"]


def test_scoreboard_on_a_subset(tmp_path: Path, llama_cpp: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "llamact.parity", "--llama-cpp", str(llama_cpp), "--templates", ",".join(SUBSET),
         "--no-models", "--json", str(tmp_path / "s.json"), "--report", str(tmp_path / "r.json")],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert not unexplained_differences(tmp_path / "r.json"), proc.stdout
    components = json.loads((tmp_path / "s.json").read_text())["components"]
    assert not [name for name, row in components.items()
                if row["problem"] or row["crash"] or row["error"]]
    assert components["chat_apply"]["cases"] == len(SUBSET) * len(SCENARIOS)
    assert components["autoparser_analysis"]["cases"] == components["autoparser_analysis"]["equal"] == len(SUBSET)
    assert components["tokenize"]["excluded"] == "--no-models" and components["tokenize"]["cases"] == 0
    assert components["server_e2e"]["excluded"] == "--no-models" and components["server_e2e"]["cases"] == 0


@pytest.mark.parametrize("names", ["Qwen-Qwen3-0.6B,no-such-template", "no-such-template", ","])
def test_templates_that_match_nothing_are_an_error(tmp_path: Path, llama_cpp: Path, names: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "llamact.parity", "--llama-cpp", str(llama_cpp), "--templates", names, "--no-models"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--templates names no vendored template" in proc.stderr
    assert "equal" not in proc.stdout


@pytest.mark.model
def test_scoreboard_detects_a_difference(llama_cpp: Path, smollm2_path: Path) -> None:
    """The scoreboard must be able to fail: a wrong runner is counted as different."""
    from llamact.parity.components import Component
    from llamact.parity.corpus import Corpus
    from llamact.parity.scoreboard import score_component

    with OracleClient() as oracle:
        corpus = Corpus()
        from llamact.parity.corpus import _model_cases

        _model_cases(oracle, {"smollm2": smollm2_path}, corpus)
    cases = corpus.cases["tokenize"]
    row = score_component(Component("tokenize", "", lambda case: case.expected[:-1] + [0]), cases)
    assert row.different == len(cases) and row.equal == 0
    assert row.differences and row.differences[0]["expected"] != row.differences[0]["got"]
