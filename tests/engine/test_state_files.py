"""engine.save_state / load_state: the KV cache and its tokens on disk; bad files leave nothing behind."""

from __future__ import annotations

import pytest

from llamact.engine import GenerationParams, LlamaEngine, ModelParams
from llamact.errors import LlamaStateException

pytestmark = pytest.mark.model

PROMPT = "A short story about a lighthouse keeper who finds a message in a bottle. It begins:"
GREEDY = GenerationParams(greedy=True, max_tokens=8)


def _load(path, n_ctx=512):
    return LlamaEngine.load(path, ModelParams(n_ctx=n_ctx, n_threads=2))


@pytest.fixture(scope="module")
def saved(smollm2_path, tmp_path_factory):
    """Whole-context and sequence-only files after one greedy generation, and its answer."""
    folder = tmp_path_factory.mktemp("state")
    with _load(smollm2_path) as engine:
        first = engine.complete(PROMPT, GREEDY)
        tokens = engine.context_tokens
        engine.save_state(folder / "whole.bin")
        engine.save_state(folder / "seq.bin", sequence_only=True)
        follow = engine.complete(list(tokens) + engine.tokenize(" Then", add_special=False), GREEDY)
        # more tokens than a 256-cell context holds (llama.cpp rounds n_ctx up to a multiple of 256)
        engine.complete("one two three " * 100, GenerationParams(greedy=True, max_tokens=1))
        engine.save_state(folder / "long-whole.bin")
        engine.save_state(folder / "long-seq.bin", sequence_only=True)
    return folder, first, tokens, follow


@pytest.mark.parametrize("sequence_only", [False, True])
def test_restored_state_is_reused_and_answers_the_same(smollm2_path, saved, sequence_only):
    folder, _first, tokens, follow = saved
    with _load(smollm2_path) as engine:
        assert engine.load_state(folder / ("seq.bin" if sequence_only else "whole.bin"),
                                 sequence_only=sequence_only) == tokens
        assert engine.context_tokens == tokens
        stream = engine.generate(list(tokens) + engine.tokenize(" Then", add_special=False), GREEDY)
        assert stream.n_cached == len(tokens)  # the history is not evaluated again
        assert [c.token for c in stream if c.token is not None] == follow.tokens


def test_other_model_is_refused_and_nothing_stays(gemma3_path, saved):
    folder = saved[0]
    with _load(gemma3_path) as engine:
        engine.complete("Hello", GREEDY)
        for name, seq in (("whole.bin", False), ("seq.bin", True)):
            with pytest.raises(LlamaStateException):
                engine.load_state(folder / name, sequence_only=seq)
            assert engine.context_tokens == ()
            assert engine.context.memory_seq_pos_max(0) == -1
        assert engine.complete("Hello", GREEDY).tokens  # still usable


def test_truncated_and_too_small(smollm2_path, saved, tmp_path):
    folder = saved[0]
    with _load(smollm2_path, n_ctx=512) as engine:
        for name, seq in (("whole.bin", False), ("seq.bin", True)):
            data = (folder / name).read_bytes()
            cut = tmp_path / f"cut-{name}"
            cut.write_bytes(data[: len(data) * 2 // 3])
            engine.complete("Hello", GREEDY)
            with pytest.raises(LlamaStateException):
                engine.load_state(cut, sequence_only=seq)
            assert engine.context_tokens == () and engine.context.memory_seq_pos_max(0) == -1
    with _load(smollm2_path, n_ctx=256) as small:  # the saved history has more tokens than fit
        for name, seq in (("long-whole.bin", False), ("long-seq.bin", True)):
            with pytest.raises(LlamaStateException):
                small.load_state(folder / name, sequence_only=seq)
            assert small.context_tokens == () and small.context.memory_seq_pos_max(0) == -1


def test_missing_file(smollm2_path, tmp_path):
    with _load(smollm2_path, n_ctx=64) as engine:
        for seq in (False, True):
            with pytest.raises(LlamaStateException):
                engine.load_state(tmp_path / "none.bin", sequence_only=seq)


@pytest.mark.parametrize("sequence_only", [False, True])
def test_a_flipped_bit_is_refused_by_the_checksum(smollm2_path, saved, tmp_path, sequence_only):
    """Issue 46: llama.cpp's state files carry no checksum, so a bit flipped in the KV cells loaded
    and generated garbage. llamact's own files are sealed (native/state_files.py)."""
    folder, _first, _tokens, _follow = saved
    data = bytearray((folder / ("seq.bin" if sequence_only else "whole.bin")).read_bytes())
    data[len(data) // 2] ^= 0x10   # in the middle of the cells
    damaged = tmp_path / "damaged.bin"
    damaged.write_bytes(bytes(data))
    with _load(smollm2_path) as engine:
        engine.complete("Hello", GREEDY)
        with pytest.raises(LlamaStateException, match="checksum"):
            engine.load_state(damaged, sequence_only=sequence_only)
        assert engine.context_tokens == () and engine.context.memory_seq_pos_max(0) == -1


def test_a_plain_llama_cpp_file_still_loads(smollm2_path, saved, tmp_path):
    """A file without llamact's seal (llama.cpp's own, or an older llamact's) is read as before."""
    folder, _first, tokens, follow = saved
    from llamact.native.state_files import SEAL_SIZE

    plain = tmp_path / "plain.bin"
    plain.write_bytes((folder / "whole.bin").read_bytes()[:-SEAL_SIZE])
    with _load(smollm2_path) as engine:
        assert engine.load_state(plain) == tokens
        stream = engine.generate(list(tokens) + engine.tokenize(" Then", add_special=False), GREEDY)
        assert [c.token for c in stream if c.token is not None] == follow.tokens


@pytest.mark.parametrize("sequence_only", [False, True])
def test_a_fifo_is_refused_without_blocking(smollm2_path, tmp_path, sequence_only):
    """A FIFO where the state file should be: opening it to read waits for a writer (a server restoring
    one froze for 154 s). It is refused before anything blocks on it, to read or to write."""
    import os
    import threading

    fifo = tmp_path / "state.fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []
    with _load(smollm2_path, n_ctx=64) as engine:
        def load() -> None:
            try:
                engine.load_state(fifo, sequence_only=sequence_only)
                outcome.append(None)
            except BaseException as exc:   # noqa: BLE001 - the test reads it
                outcome.append(exc)

        worker = threading.Thread(target=load, daemon=True)
        worker.start()
        worker.join(30)
        if worker.is_alive():   # blocked opening the FIFO: release it, then fail
            with open(fifo, "wb"):
                pass
            worker.join(30)
            pytest.fail("load_state blocked on a FIFO")
        assert isinstance(outcome[0], LlamaStateException) and "FIFO" in str(outcome[0])
        with pytest.raises(LlamaStateException, match="FIFO"):
            engine.save_state(fifo, sequence_only=sequence_only)
