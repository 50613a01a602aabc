"""The decode thread governor (``llamact/native/thread_governor.py``): a quiet machine keeps its
threads, a busy one gets fewer within a few tokens and the full count back once cores are free, the
slow growth of a decode with the context is not a cliff; and switching the count mid-generation
does not change what is generated (the values do not depend on it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from llamact import LlamaEngine, ModelParams
from llamact.native.thread_governor import ThreadGovernor

# a 2-core machine as measured: 12 ms a token with 2 threads, 18 ms with 1; with a busy loop on
# every core, 2 threads take ~1.4 s a token (barriers waiting on descheduled workers), 1 takes 25 ms
QUIET = {2: 0.012, 1: 0.018}
BUSY = {2: 1.4, 1: 0.025}


class Machine:
    def __init__(self) -> None:
        self.times = QUIET
        self.idle: float | None = 0.0
        self.governor = ThreadGovernor(2, self.apply, lambda: self.idle)
        self.applied: list[int] = []

    def apply(self, n: int) -> None:
        self.applied.append(n)

    def decode(self, n: int = 1) -> None:
        for _ in range(n):
            self.governor.observe(self.times[self.governor.current])


def test_a_quiet_machine_keeps_its_threads() -> None:
    machine = Machine()
    machine.decode(2000)
    assert machine.governor.current == 2
    assert machine.applied == [1, 2]   # the one look at half the threads, at the second decode


def test_busy_cores_get_fewer_threads_within_a_few_tokens_and_all_back_when_free() -> None:
    machine = Machine()
    machine.decode(50)
    machine.times = BUSY
    machine.decode(3)
    assert machine.governor.current == 1
    machine.decode(1000)   # still busy: /proc/stat shows no idle core, so no probe
    assert machine.governor.current == 1 and machine.applied == [1, 2, 1]
    machine.times, machine.idle = QUIET, 1.0
    machine.decode(64)
    assert machine.governor.current == 2
    machine.decode(500)
    assert machine.governor.current == 2


def test_an_engine_started_on_a_busy_machine_finds_out() -> None:
    machine = Machine()
    machine.times = BUSY
    machine.decode(6)
    assert machine.governor.current == 1


def test_where_the_machine_cannot_be_read_probes_back_off() -> None:
    machine = Machine()
    machine.idle = None   # not Linux: probe by trying, waiting twice as long after each failure
    machine.decode(10)
    machine.times = BUSY
    machine.decode(10_000)
    probes = machine.applied.count(2) - 1   # less the return from the first look at one thread
    assert machine.governor.current == 1 and 5 <= probes <= 12, machine.applied


def test_a_decode_growing_with_the_context_is_not_a_cliff() -> None:
    machine = Machine()
    for i in range(8000):   # 4x slower at the end of a long context, gradually
        machine.governor.observe(0.012 * (1 + 3 * i / 8000))
    assert machine.governor.current == 2 and machine.governor.changes == 2


@pytest.fixture(scope="module", params=["smollm2", "gemma3"])
def model_path(request: pytest.FixtureRequest) -> Path:
    return Path(request.getfixturevalue(f"{request.param}_path"))


class Flipper:
    """Stands in for the governor: switches between 1 and 2 threads after every decode."""

    def __init__(self, engine: LlamaEngine) -> None:
        self.engine, self.calls = engine, 0

    def after_decode(self, n_eval: int, t_eval_ms: float) -> None:
        self.calls += 1
        self.engine.context.set_threads(1 + self.calls % 2)


@pytest.fixture(scope="module")
def engines(model_path: Path) -> Iterator[tuple[LlamaEngine, LlamaEngine]]:
    fixed = LlamaEngine.load(model_path, ModelParams(n_ctx=512, n_threads=2, adaptive_threads=False))
    flipping = LlamaEngine.load(model_path, ModelParams(n_ctx=512, n_threads=2))
    try:
        yield fixed, flipping
    finally:
        fixed.close()
        flipping.close()


@pytest.mark.model
def test_the_thread_count_changes_nothing_generated(engines: tuple[LlamaEngine, LlamaEngine]) -> None:
    fixed, flipping = engines
    assert fixed.context.governor is None and flipping.context.governor is not None
    flipper = Flipper(flipping)
    flipping.context.governor = flipper   # type: ignore[assignment]
    ask = dict(max_tokens=48, temperature=0, logprobs=True, top_logprobs=2)
    want = fixed.complete("Once upon a time", **ask)
    got = flipping.complete("Once upon a time", **ask)
    assert flipper.calls >= 40
    assert got.text == want.text
    assert [t.logprob for t in got.logprobs] == [t.logprob for t in want.logprobs]
