"""The differential fuzzer: its parts (shrinking, finding and saving, determinism, resuming), a short
fixed-seed slice of every target against the oracle, and the replay of every saved finding."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llamact.errors import LlamaUnsupportedException
from llamact.parity.fuzz.registry import all_targets
from llamact.parity.fuzz.runner import FuzzRunner, evaluate
from llamact.parity.fuzz.saved import load_findings
from llamact.parity.fuzz.shrink import candidates, shrink
from llamact.parity.fuzz.target import FuzzContext, Target
from llamact.parity.oracle import OracleClient, OracleError

LLAMA_CPP = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp"
CORPUS = Path(__file__).resolve().parent / "fuzz_corpus"  # this checkout's, wherever llamact is installed


# -- shrinking ------------------------------------------------------------------------------------


def test_shrink_removes_everything_the_failure_does_not_need() -> None:
    value = {"keep": "name", "items": [1, 2, 3, {"x": "needle in a haystack", "y": [4, 5]}], "other": "z" * 50}

    def fails(v: Any) -> bool:
        return "needle" in json.dumps(v)

    small, calls = shrink(value, fails, frozenset({"keep"}), budget=1000)
    assert small == {"keep": "name", "items": [{"x": "needle"}]}
    assert calls < 1000


def test_shrink_keeps_fixed_keys_and_respects_its_budget() -> None:
    value = {"template": "t", "text": "abcdefghij" * 20}
    seen = []

    def fails(v: Any) -> bool:
        seen.append(v)
        return len(v.get("text", "")) >= 3

    small, calls = shrink(value, fails, frozenset({"template"}), budget=7)
    assert calls == 7 == len(seen)
    assert all("template" in v for v in seen) and small["template"] == "t"


def test_candidates_simplify_scalars() -> None:
    assert list(candidates(12)) == [0, 6]
    assert list(candidates(2.5)) == [0.0, 2.0]
    assert list(candidates(True)) == [False] and list(candidates(False)) == list(candidates(None)) == []
    assert "" in list(candidates("ab")) or "b" in list(candidates("ab"))


# -- the loop, on a fake target and a fake oracle ----------------------------------------------------


class _EchoOracle:
    """Answers every request with its "value" field, as upstream would answer correctly."""

    def batch(self, requests: list[dict[str, Any]]) -> list[Any]:
        return [r["value"] if "value" in r else OracleError("runtime_error", "boom", r["op"]) for r in requests]

    def request(self, op: str, **fields: Any) -> Any:
        return self.batch([{"op": op, **fields}])[0]


class _BuggyTarget(Target):
    """llamact's side crashes on any list holding 7, and answers 1 where upstream says True."""

    name = "fake"
    component = "fake"
    unit = "thing"

    def generate(self, rng: random.Random) -> Any:
        return {"items": [rng.randint(0, 9) for _ in range(rng.randint(1, 12))], "flag": rng.random() < 0.5}

    def request(self, inp: Any) -> dict[str, Any]:
        return {"op": "echo", "value": {"sum": sum(inp.get("items", [])), "flag": inp["flag"]}}

    def run(self, inp: Any) -> Any:
        if 7 in inp.get("items", []):
            raise IndexError("seven")
        return {"sum": sum(inp.get("items", [])), "flag": 1 if inp["flag"] else False}


def _fake_runner(tmp_path: Path, seed: int = 3, state: Path | None = None) -> FuzzRunner:
    ctx = FuzzContext(_EchoOracle(), LLAMA_CPP)  # type: ignore[arg-type]
    return FuzzRunner(ctx, [_BuggyTarget(ctx)], seed, tmp_path / "corpus", state)


def test_runner_finds_shrinks_and_saves_crashes_and_differences(tmp_path: Path) -> None:
    tallies = _fake_runner(tmp_path).run(cases=60)
    t = tallies["fake"]
    assert t.cases == 60 and t.crash > 0 and t.different > 0 and t.equal > 0
    assert t.crash + t.different + t.equal == 60
    saved = load_findings(tmp_path / "corpus", "fake")
    crashes = [e for e in saved if e["outcome"] == "crash"]
    differences = [e for e in saved if e["outcome"] == "different"]
    # every crash shrinks to the same minimal input, saved once; likewise the True/1 difference
    assert [e["input"] for e in crashes] == [{"items": [7], "flag": False}]
    assert [e["input"] for e in differences] == [{"flag": True}]
    assert "expected bool True, got int 1" in differences[0]["why"]
    assert t.saved == 2


def test_runs_are_deterministic_and_resume_from_their_state(tmp_path: Path) -> None:
    whole = _fake_runner(tmp_path / "a").run(cases=40)["fake"]
    state = tmp_path / "state.json"
    _fake_runner(tmp_path / "b", state=state).run(cases=25)
    resumed = _fake_runner(tmp_path / "b", state=state).run(cases=15)["fake"]
    assert resumed.next_index == whole.next_index == 40
    assert (resumed.equal, resumed.different, resumed.crash) == (whole.equal, whole.different, whole.crash)
    with pytest.raises(ValueError, match="seed"):
        _fake_runner(tmp_path / "b", seed=4, state=state)


def test_the_state_file_keeps_the_targets_a_run_does_not_touch(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"seed": 3, "targets": {"other": {"cases": 5, "next_index": 5}}}))
    _fake_runner(tmp_path, state=state).run(cases=4)
    targets = json.loads(state.read_text())["targets"]
    assert targets["other"] == {"cases": 5, "next_index": 5} and targets["fake"]["cases"] == 4


def test_a_crash_in_the_runner_is_a_finding_not_the_end_of_the_run(tmp_path: Path) -> None:
    class Raising(_BuggyTarget):
        def run(self, inp: Any) -> Any:
            raise LlamaUnsupportedException("no") if inp["flag"] else ZeroDivisionError("x")

    ctx = FuzzContext(_EchoOracle(), LLAMA_CPP)  # type: ignore[arg-type]
    t = FuzzRunner(ctx, [Raising(ctx)], 1, None).run(cases=20)["fake"]
    assert t.cases == 20 and t.error + t.crash == 20 and t.error and t.crash


# -- against the oracle ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ctx() -> Any:
    from llamact.models import smollm2_path

    with OracleClient() as oracle:
        yield FuzzContext(oracle, LLAMA_CPP, smollm2_path())


@pytest.mark.parity
@pytest.mark.parametrize("name", sorted(all_targets()))
def test_fixed_seed_slice(ctx: FuzzContext, name: str) -> None:
    """A few cases of each target under a fixed seed: no new difference, error or crash."""
    target = all_targets()[name](ctx)
    runner = FuzzRunner(ctx, [target], seed=20260115, corpus_dir=None)
    t = runner.run(cases=12)[name]
    assert t.cases == 12 and t.units >= t.equal > 0
    assert t.findings == 0, json.dumps([f for f in runner.findings if "known" not in f], indent=1)[:4000]


def _saved() -> list[Any]:
    """Every saved finding; one still open (a real difference, diagnosed and reported, whose fix
    belongs elsewhere) is a strict xfail with its diagnosis, so that its fix shows."""
    out = []
    for entry in load_findings(CORPUS):
        marks = [pytest.mark.xfail(strict=True, reason=entry["open"])] if "open" in entry else []
        out.append(pytest.param(entry, marks=marks,
                                id=f"{entry['target']}/{entry['index']}/{entry.get('known', entry['outcome'])}"))
    return out


def test_the_saved_corpus_is_not_empty() -> None:
    assert _saved(), f"no saved findings under {CORPUS}"


@pytest.mark.parity
@pytest.mark.parametrize("entry", _saved())
def test_saved_finding_replays(ctx: FuzzContext, entry: Any) -> None:
    """Every saved finding, replayed: fixed (equal now), or still exactly its known difference."""
    target = all_targets()[entry["target"]](ctx)
    judged = evaluate(target, entry["input"])
    if "known" in entry:
        assert (judged.outcome, judged.label) == ("known", entry["known"]), judged
    elif "deviation" in entry:
        assert judged.outcome == "deviation", judged
    else:
        assert judged.outcome == "equal", (judged.verdict.why if judged.verdict else judged.outcome)


def test_unknown_targets_are_refused(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "llamact.parity", "fuzz", "--targets", "nope", "--cases", "1"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "unknown targets" in proc.stderr
