"""BatchScheduler keeps requests apart (issue 46): each decodes with its own LoRA adapters, runs in the
slot it asked for, and a slot's file I/O holds no one who reads the scheduler's state."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llamact import GenerationParams, LlamaEngine, ModelParams
from llamact.engine.batched import BatchScheduler, SequenceStream

pytestmark = pytest.mark.model

PROMPT = "The weather today is"
GREEDY = GenerationParams(greedy=True, max_tokens=8)


@pytest.fixture(scope="module")
def lora_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from test_lora import write_lora

    path = tmp_path_factory.mktemp("lora") / "adapter.gguf"
    write_lora(path, 576)
    return path


@pytest.fixture(scope="module")
def scheduler(smollm2_path: Path, lora_file: Path) -> Iterator[BatchScheduler]:
    params = ModelParams(n_ctx=2048, n_seq_max=4, n_threads=1, loras=[(lora_file, 0.0)])
    with LlamaEngine.load(smollm2_path, params) as engine:
        assert isinstance(engine, LlamaEngine)
        scheduler = BatchScheduler(engine)
        try:
            yield scheduler
        finally:
            scheduler.close()


def tokens(stream: SequenceStream) -> list[int]:
    return [c.token for c in stream if c.token is not None]


def test_each_request_decodes_with_its_own_adapters(scheduler: BatchScheduler, lora_file: Path) -> None:
    """Before: the scales were applied to the shared context when the slots were idle, and the
    request joined a slot afterwards; a concurrent request's change landed in between, and 3 of 12
    answers were exactly the other scale's. Now every answer equals its scale's solo run."""
    solo = {scale: tokens(scheduler.generate(PROMPT, GREEDY, loras={lora_file: scale})) for scale in (1.0, 0.0)}
    assert solo[1.0] != solo[0.0], "the adapter must change the answer for this test to mean anything"
    for _round in range(2):
        scales = [1.0, 0.0] * 4
        streams = [scheduler.generate(PROMPT, GREEDY, loras={lora_file: scale}) for scale in scales]
        answers = [tokens(stream) for stream in streams]
        wrong = [(i, scale) for i, (scale, answer) in enumerate(zip(scales, answers, strict=True))
                 if answer != solo[scale]]
        assert not wrong, f"answers differing from their scale's solo run: {wrong}"


def test_a_request_runs_in_the_slot_it_asks_for(scheduler: BatchScheduler) -> None:
    for slot in (2, 0, 3):
        stream = scheduler.generate(PROMPT, GenerationParams(greedy=True, max_tokens=2), slot=slot)
        tokens(stream)
        assert stream.slot_id == slot


def test_a_request_waits_for_its_slot_while_others_go_on(scheduler: BatchScheduler) -> None:
    no_end = {t: float("-inf") for t in scheduler.tokenize("<|im_end|><|endoftext|>", add_special=False)}
    holder = scheduler.generate("Count slowly:", GenerationParams(greedy=True, max_tokens=64, logit_bias=no_end),
                                slot=1)
    first = next(holder)
    assert holder.slot_id == 1 and first.stop_reason is None
    pinned = scheduler.generate(PROMPT, GenerationParams(greedy=True, max_tokens=1), slot=1)
    other = scheduler.generate(PROMPT, GenerationParams(greedy=True, max_tokens=1))
    tokens(other)   # served while the pinned one waits for slot 1
    assert other.slot_id != 1
    assert pinned.slot_id == -1, "the pinned request took a slot while its slot was busy"
    holder.close()
    tokens(pinned)
    assert pinned.slot_id == 1


def test_a_bad_slot_is_refused(scheduler: BatchScheduler) -> None:
    from llamact.errors import LlamaException

    for slot in (4, -2, True, "1"):
        with pytest.raises(LlamaException, match="slot"):
            scheduler.generate(PROMPT, GREEDY, slot=slot)   # type: ignore[arg-type]


def test_a_slot_file_blocks_no_one_who_reads_the_state(scheduler: BatchScheduler, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: save / restore ran holding the scheduler's lock, which /metrics, /slots and every
    joining request take: restoring a FIFO froze the server for 154 s. The bound: while a save is
    stuck in its I/O, reading the state (and a request on another slot) finishes."""
    entered, release = threading.Event(), threading.Event()
    context = scheduler.context
    original = context.save_seq_state

    def slow_save(*args: Any, **kwargs: Any) -> None:
        entered.set()
        assert release.wait(60)
        original(*args, **kwargs)

    monkeypatch.setattr(context, "save_seq_state", slow_save)
    future = scheduler.save_slot(0, tmp_path / "slot.bin")
    assert entered.wait(60)
    try:
        readers: list[Any] = []
        reader = threading.Thread(target=lambda: readers.append((scheduler.n_active, scheduler.slot_states())),
                                  daemon=True)
        reader.start()
        reader.join(30)
        assert readers, "reading the scheduler's state waited for a slot file's I/O"
    finally:
        release.set()
    assert future.result(60) >= 0


def test_a_huge_look_back_allocates_nothing_more(smollm2_path: Path, tmp_path: Path) -> None:
    """Found by issue 46's DRY fuzzing: llama.cpp allocates a sampler's look-back window whole when
    it is made (repeat_last_n or dry_penalty_last_n of 10^9: 4-8 GB, an OOM kill for the server).
    A window longer than the context sees nothing more, so it is cut to the context: the same
    samples. Run in a child limited to 3 GB of address space."""
    from child_process import lines_of, run_child

    code = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from llamact import GenerationParams, LlamaEngine, ModelParams
from llamact.engine.batched import BatchScheduler
with LlamaEngine.load(sys.argv[1], ModelParams(n_ctx=512, n_seq_max=2, n_threads=1)) as engine:
    scheduler = BatchScheduler(engine)
    for kw in ({"repeat_last_n": 10**9, "repeat_penalty": 1.3}, {"dry_multiplier": 0.8, "dry_penalty_last_n": 10**9}):
        same = {k: (256 if v == 10**9 else v) for k, v in kw.items()}
        params = dict(max_tokens=6, temperature=0.7, seed=3)
        a = [c.token for c in scheduler.generate("Once upon a time", GenerationParams(**params, **kw))]
        b = [c.token for c in scheduler.generate("Once upon a time", GenerationParams(**params, **same))]
        print("SAME", a == b and len(a) > 0)
    scheduler.close()
    for kw in ({"repeat_last_n": 10**9, "repeat_penalty": 1.3}, {"dry_multiplier": 0.8, "dry_penalty_last_n": 10**9}):
        print("ENGINE", bool(engine.complete("Once upon a time", GenerationParams(max_tokens=3, **kw)).text))
"""
    proc = run_child(code, str(smollm2_path), cwd=tmp_path)
    assert lines_of(proc, "SAME") == ["True", "True"], proc.stderr[-2000:]
    assert lines_of(proc, "ENGINE") == ["True", "True"], proc.stderr[-2000:]
