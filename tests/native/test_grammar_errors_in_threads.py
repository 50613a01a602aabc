"""Grammar samplers built from several threads at once: each rejected grammar's exception quotes
its own reason, and the process's stderr (file descriptor 2) is left as it was, losing nothing
other threads write to it meanwhile.

llama.cpp prints why a GBNF grammar does not parse on stderr; reading that reason must not swap
fd 2 under other threads' feet. Runs in a child process, whose fd 2 the test can inspect.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from child_process import lines_of, run_child

pytestmark = pytest.mark.model

BUILD_FROM_THREADS = r"""
import os, sys, threading
from llamact.native import sampler as s
from llamact.native.model import Model

model = Model(sys.argv[1])
identity = lambda st: (st.st_dev, st.st_ino)
before = identity(os.fstat(2))
n_threads, rounds = 8, 12
problems, barrier = [], threading.Barrier(n_threads + 2)


def reject(i):
    # each thread's grammar names a rule of its own that is not defined
    grammar, reason = f'root ::= "a" | undefined{i}x', f"Undefined rule identifier 'undefined{i}x'"
    barrier.wait()
    for _ in range(rounds):
        try:
            s.SamplerChain(model, [s.Grammar(grammar, front_end_check=False), s.Greedy()])
        except Exception as exc:
            message = str(exc)
            others = [j for j in range(n_threads) if j != i and f"undefined{j}x" in message]
            if type(exc).__name__ != "LlamaSamplerParameterException" or reason not in message or others:
                problems.append(f"thread {i}: {type(exc).__name__}: {message[:300]}")
        else:
            problems.append(f"thread {i}: the bad grammar was accepted")


def accept():
    barrier.wait()
    for _ in range(rounds):
        s.SamplerChain(model, [s.Grammar('root ::= "yes" | "no"'), s.Greedy()]).close()


def write_markers():
    barrier.wait()
    for k in range(200):
        os.write(2, f"MARKER-{k}\n".encode())


threads = [threading.Thread(target=reject, args=(i,)) for i in range(n_threads)]
threads += [threading.Thread(target=accept), threading.Thread(target=write_markers)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("SAME_STDERR", identity(os.fstat(2)) == before, flush=True)
for p in problems:
    print("PROBLEM", p.replace("\n", " "), flush=True)
os.write(2, b"MARKER-end\n")
print("DONE ok", flush=True)
"""


def test_rejected_grammars_from_many_threads(tmp_path: Path, smollm2_path: Path) -> None:
    proc = run_child(BUILD_FROM_THREADS, str(smollm2_path), cwd=tmp_path)
    assert lines_of(proc, "DONE") == ["ok"], proc.stdout[-2000:]
    assert lines_of(proc, "PROBLEM") == []
    assert lines_of(proc, "SAME_STDERR") == ["True"], "fd 2 no longer points where it did"
    markers = {line for line in proc.stderr.splitlines() if line.startswith("MARKER-")}
    assert markers == {f"MARKER-{k}" for k in range(200)} | {"MARKER-end"}, "output written to stderr was lost"
    # llama.cpp's own report of each rejection still reaches stderr, where it always went
    assert proc.stderr.count("error parsing grammar") >= 8 * 12
