"""The server_e2e harness against the real llama-server: until ``engine.create()`` answers the cases,
llama-server is compared with itself across two runs, each in fresh server processes. Equal answers
(prompt and generated tokens, chunks, messages, usage, timing counts) show that an answer is a
function of the request alone, which the comparison with llamact relies on."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamact.parity.server_cases import e2e_cases
from llamact.parity.server_compare import compare
from llamact.parity.server_e2e import run_server_cases

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
