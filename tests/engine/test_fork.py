"""fork() after loading (issue 46): multiprocessing's default start method on Linux. A child forked
after llama.cpp computed on several threads waited forever on its first generation (OpenMP's threads
do not survive a fork); it now gets a typed error that says what to do. Each case runs in a fresh
interpreter: whether this process has computed on several threads is what it is about."""

from __future__ import annotations

from pathlib import Path

import pytest
from child_process import lines_of, run_child

pytestmark = pytest.mark.model

SCRIPT = r"""
import multiprocessing as mp, sys
from llamact import GenerationParams, LlamaEngine, ModelParams
from llamact.errors import LlamaException
threads, warm, child_threads = int(sys.argv[2]), sys.argv[3] == "warm", int(sys.argv[4])
engine = LlamaEngine.load(sys.argv[1], ModelParams(n_ctx=256, n_threads=threads))
GREEDY = GenerationParams(greedy=True, max_tokens=3)
if warm:
    print("PARENT", engine.complete("Hi", GREEDY).text, flush=True)

def child(queue):
    try:
        queue.put(("OK", engine.complete("Hi", GREEDY).text))
    except LlamaException as exc:
        queue.put((type(exc).__name__, str(exc)))
    if child_threads:   # a context made in the child, with this many threads
        try:
            with LlamaEngine.load(sys.argv[1], ModelParams(n_ctx=256, n_threads=child_threads)) as own:
                queue.put(("OK", own.complete("Hi", GREEDY).text))
        except LlamaException as exc:
            queue.put((type(exc).__name__, str(exc)))

queue = mp.get_context("fork").Queue()
process = mp.get_context("fork").Process(target=child, args=(queue,))
process.start()
for _ in range(2 if child_threads else 1):
    try:
        kind, text = queue.get(timeout=60)
        print("CHILD", kind, text.replace("\n", " "), flush=True)
    except Exception:
        print("CHILD HUNG", flush=True)
        break
process.kill()
process.join()
"""


def run(tmp_path: Path, model: Path, threads: int, warm: bool, child_threads: int = 0) -> list[str]:
    proc = run_child(SCRIPT, str(model), str(threads), "warm" if warm else "cold", str(child_threads),
                     cwd=tmp_path, timeout=300)
    return lines_of(proc, "CHILD")


def test_a_child_forked_after_a_threaded_generation_gets_a_typed_error(smollm2_path: Path, tmp_path: Path) -> None:
    first, own_two = run(tmp_path, smollm2_path, 2, True, child_threads=2)
    assert first.startswith("LlamaStateException") and "spawn" in first, first
    assert own_two.startswith("LlamaStateException") and "n_threads=1" in own_two, own_two


def test_one_thread_in_the_child_works(smollm2_path: Path, tmp_path: Path) -> None:
    _refused, own_one = run(tmp_path, smollm2_path, 2, True, child_threads=1)
    assert own_one.startswith("OK "), own_one


@pytest.mark.parametrize(("threads", "warm"), [(2, False), (1, True)], ids=["fork-before-generating", "one-thread"])
def test_a_child_that_can_compute_is_not_refused(smollm2_path: Path, tmp_path: Path, threads: int, warm: bool) -> None:
    """Forked before any computation on several threads (a model loaded, workers forked), or a parent
    on one thread: the child generates."""
    (answer,) = run(tmp_path, smollm2_path, threads, warm)
    assert answer.startswith("OK "), answer
