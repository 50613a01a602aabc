"""The server_e2e row against the real llama-server.

* llama-server compared with itself across two runs, each in fresh server processes, on a subset:
  equal answers (prompt and generated tokens, chunks, messages, usage, timing counts) show that an
  answer is a function of the request alone, which the comparison with llamact relies on;
* llamact's ``engine.create()`` compared with llama-server on every case (create_answer.py): each
  verdict is "equal", or a "deviation" that server_compare names (docs/design.md deviations 2-5, 9);
  and with ``upstream_compat=True``, equal on every case but the named tool choices (deviation 9,
  which the flag does not switch off). Both read one run of the server over every case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llamact.parity.components import ModelRunners, components
from llamact.parity.corpus import Corpus
from llamact.parity.create_answer import CreateRunner
from llamact.parity.scoreboard import score_component
from llamact.parity.server_cases import e2e_cases
from llamact.parity.server_compare import DEMANDED_CALL_REFUSED, compare
from llamact.parity.server_e2e import COMPONENT, ServerRecord, judge_answers_in_modes, row_case, run_server_cases

pytestmark = [pytest.mark.model, pytest.mark.slow]

# a stop string, a stop string inside a call, a cut inside a call, a whole call, Gemma 3 on Gemma's
# turn format, and a reasoning format
SUBSET = [
    "smollm2/own/stop",
    "smollm2/NousResearch-Hermes-3-Llama-3.1-8B-tool_use/stop-in-call",
    "smollm2/google-gemma-4-31B-it/required",
    "smollm2/google-gemma-4-31B-it/length-mid-call",
    "gemma3/google-gemma-2-2b-it/plain",
    "smollm2/Qwen-Qwen3-0.6B/reasoning-legacy",
]


def test_llama_server_answers_are_deterministic(repo_root: Path, smollm2_path: Path, gemma3_path: Path,
                                                llama_server_bin: Path) -> None:
    cases = [c for c in e2e_cases() if c.id in SUBSET]
    assert len(cases) == len(SUBSET)
    models = {"smollm2": smollm2_path, "gemma3": gemma3_path}
    llama_cpp = repo_root / "vendor" / "llama.cpp"
    first, second = (run_server_cases(cases, models, llama_cpp, llama_server_bin) for _ in range(2))
    for case in cases:
        a, b = first[case.id], second[case.id]
        assert a.answer is not None and b.answer is not None, (a.error, b.error)
        assert not a.answer.problems, a.answer.problems
        verdict = compare(case, a.answer, b.answer, upstream_compat=True)
        assert verdict.kind == "equal", (case.id, str(verdict))
        # the streamed chunks really were read: at least the role chunk and the finish chunk
        assert len(a.answer.chunks) >= 2 and a.answer.finish_reason is not None
    # the tool call was read from the stream, under the grammar
    call = first["smollm2/google-gemma-4-31B-it/required"].answer
    assert call is not None and (call.finish_reason == "tool_calls") == bool(call.message["tool_calls"])


@pytest.fixture(scope="module")
def models(smollm2_path: Path, gemma3_path: Path) -> dict[str, Path]:
    return {"smollm2": smollm2_path, "gemma3": gemma3_path}


@pytest.fixture(scope="module")
def server_records(repo_root: Path, models: dict[str, Path], llama_server_bin: Path) -> dict[str, ServerRecord]:
    """llama-server's answer to every case (minutes: asked once, and kept in the answer cache the
    scoreboard's server_e2e row shares; the determinism test above never reads it)."""
    return run_server_cases(e2e_cases(), models, repo_root / "vendor" / "llama.cpp", llama_server_bin, cache=True)


@pytest.fixture(scope="module")
def verdicts_by_mode(repo_root: Path, models: dict[str, Path],
                     server_records: dict[str, ServerRecord]) -> dict[bool, dict[str, Any]]:
    """engine.create()'s answer to every case, judged against the server's, with upstream_compat off
    (the row: deviations on) and on; both from the same generations (the flag only changes how the
    reply is parsed: CreateRunner.answers)."""
    with CreateRunner(models, repo_root / "vendor" / "llama.cpp") as runner:
        return judge_answers_in_modes(e2e_cases(), server_records, runner, (False, True))


@pytest.fixture(scope="module")
def verdicts(verdicts_by_mode: dict[bool, dict[str, Any]]) -> dict[str, Any]:
    return verdicts_by_mode[False]


def test_engine_create_answers_every_case_as_llama_server(server_records: dict[str, ServerRecord],
                                                         verdicts: dict[str, Any]) -> None:
    cases = e2e_cases()
    records = server_records
    assert len(verdicts) == len(cases)
    for case in cases:   # the server's answers are themselves sound
        answer = records[case.id].answer
        assert answer is None or not answer.problems, (case.id, answer.problems)
    different = {case_id: str(v) for case_id, v in verdicts.items() if v.kind not in ("equal", "deviation")}
    assert not different, different
    # every deviation names the ones that explain it
    assert all(v.deviations for v in verdicts.values() if v.kind == "deviation")


def test_engine_create_with_upstream_compat_is_llama_server(verdicts_by_mode: dict[bool, dict[str, Any]]) -> None:
    # upstream_compat=True switches the output deviations (2-5) off: every answer must then be the
    # server's, chunk for chunk. Named tool choice (deviation 9) is a request llama-server does not
    # serve (it runs it as "auto"); the flag leaves it on, so those cases are not judged here.
    cases = e2e_cases()
    verdicts = verdicts_by_mode[True]
    assert len(verdicts) == len(cases)
    # Nor is "required" through a template without a tool-call format (deviation 15: refused, as the
    # server route refuses it before create()).
    not_equal = {case.id: str(verdicts[case.id]) for case in cases
                 if verdicts[case.id].kind != "equal" and not case.named_tool_choice
                 and verdicts[case.id].deviations != (DEMANDED_CALL_REFUSED,)}
    assert not not_equal, not_equal
    assert sum(case.named_tool_choice for case in cases) < len(cases) // 4


def test_the_scoreboard_scores_the_row_with_the_same_runner_and_judge(repo_root: Path, models: dict[str, Path],
                                                                    server_records: dict[str, ServerRecord],
                                                                    verdicts: dict[str, Any]) -> None:
    """The scoreboard's server_e2e row (its component, runner and scoring), on a subset of the cases:
    the same verdicts as judge_answers above, which judges every case (the full scoreboard test runs
    with --no-server rather than create() every case a second time)."""
    cases = [c for c in e2e_cases() if c.id in SUBSET]
    llama_cpp = repo_root / "vendor" / "llama.cpp"
    corpus = Corpus()
    for e2e in cases:
        corpus.add(row_case(e2e, server_records.get(e2e.id)))
    runners = ModelRunners(models, llama_cpp)
    try:
        component = next(c for c in components(runners, corpus) if c.name == COMPONENT)
        row = score_component(component, corpus.cases[COMPONENT])
    finally:
        runners.close()
    kinds = [verdicts[c.id].kind for c in cases]
    assert (row.cases, row.equal, row.deviation, row.different, row.error, row.crash) == \
        (len(cases), kinds.count("equal"), kinds.count("deviation"), 0, 0, 0), row
