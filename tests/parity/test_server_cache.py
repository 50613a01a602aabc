"""The llama-server answer cache the scoreboard's server_e2e row and tests/parity share: a second run
starts no server and reads back the very records the first one got; any change to what answers
(the server build, the model file) asks afresh; without ``cache`` every run asks."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from llamact.parity import server_e2e
from llamact.parity.chat_answer import ChatAnswer
from llamact.parity.server_cases import e2e_cases


class _Counting:
    """Stands in for LlamaServer and ask_server: counts starts and questions, answers by case id."""

    def __init__(self) -> None:
        self.started = 0
        self.asked: list[str] = []

    def server(self, config: Any, executable: Any) -> _Counting:
        return self

    def __enter__(self) -> _Counting:
        self.started += 1
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def ask(self, server: Any, case: Any) -> ChatAnswer:
        self.asked.append(case.id)
        n = len(self.asked)
        return ChatAnswer(prompt=f"p{n}", prompt_tokens=[1, n], tokens=[n], text=f"t{n}", chunks=[],
                          message={"content": case.id}, finish_reason="stop", final={}, final_json={},
                          final_finish_reason="stop", usage={}, timings={}, raw_chunks=[{"n": n}])


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[_Counting, dict[str, Path], Path, list[Any]]:
    counting = _Counting()
    monkeypatch.setattr(server_e2e, "LlamaServer", counting.server)
    monkeypatch.setattr(server_e2e, "ask_server", counting.ask)
    monkeypatch.setenv("LLAMACT_CACHE", str(tmp_path / "cache"))
    executable = tmp_path / "bin" / "llama-server"
    executable.parent.mkdir()
    executable.write_text(f"#!{sys.executable}\n")
    models = {"smollm2": tmp_path / "a.gguf", "gemma3": tmp_path / "b.gguf"}
    for path in models.values():
        path.write_bytes(b"GGUF")
    templates = tmp_path / "llama.cpp" / "models" / "templates"
    templates.mkdir(parents=True)
    cases = [c for c in e2e_cases() if c.template == "own"][:3]
    cases += [c for c in e2e_cases() if c.template != "own"][:2]
    for case in cases:
        if case.template != "own":
            (templates / f"{case.template}.jinja").write_text("{{ messages }}")
    return counting, models, executable, cases


def test_a_second_run_reads_every_record_back_and_starts_no_server(setup) -> None:
    counting, models, executable, cases = setup
    llama_cpp = executable.parent.parent / "llama.cpp"
    first = server_e2e.run_server_cases(cases, models, llama_cpp, executable, cache=True)
    assert len(counting.asked) == len(cases) and counting.started >= 1
    started = counting.started
    second = server_e2e.run_server_cases(cases, models, llama_cpp, executable, cache=True)
    assert len(counting.asked) == len(cases) and counting.started == started
    assert {k: r.to_json(with_raw=True) for k, r in first.items()} == \
        {k: r.to_json(with_raw=True) for k, r in second.items()}


def test_a_changed_server_or_model_asks_again_and_no_cache_always_asks(setup) -> None:
    counting, models, executable, cases = setup
    llama_cpp = executable.parent.parent / "llama.cpp"
    server_e2e.run_server_cases(cases, models, llama_cpp, executable, cache=True)
    asked = len(counting.asked)
    executable.write_text(executable.read_text() + "# rebuilt\n")
    server_e2e.run_server_cases(cases, models, llama_cpp, executable, cache=True)
    assert len(counting.asked) == 2 * asked
    model = models[cases[0].model]
    os.utime(model, ns=(1, 1))
    server_e2e.run_server_cases(cases[:1], models, llama_cpp, executable, cache=True)
    assert len(counting.asked) == 2 * asked + 1
    server_e2e.run_server_cases(cases, models, llama_cpp, executable)
    assert len(counting.asked) == 3 * asked + 1
