"""The slot runner reads its scheduler through the runtime contract (issue 41): whether a decode's
threads take every core is ``backend.n_threads``, a public property, not the native context's."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamact import LlamaEngine, ModelParams
from llamact.engine.batched import BatchScheduler
from llamact.server.runners.slot_runner import SlotRunner, usable_cores

pytestmark = pytest.mark.model


def test_lockstep_follows_the_schedulers_threads(smollm2_path: Path) -> None:
    engine = LlamaEngine.load(smollm2_path, ModelParams(n_ctx=256, n_seq_max=2, n_threads=1))
    assert isinstance(engine, LlamaEngine)
    scheduler = BatchScheduler(engine)
    try:
        runner = SlotRunner(scheduler, prepare_threads=1)
        assert scheduler.n_threads == engine.n_threads == 1
        assert runner._lockstep() == (1 >= usable_cores())
        runner.close()
    finally:
        scheduler.close()
        engine.close()
    assert runner._lockstep()   # a closed context: its last events in lockstep (no error)
