#!/usr/bin/env python3
"""Soak and fault runs: native memory and descriptors over many cycles, damaged GGUF files, and
many threads sharing one engine. Bounded by count and by time; stops by itself.

Sections (all by default, or those named with --only):

* ``cycles``: load and free the model N times (SmolLM2, or --model), alternately by ``close()``
  and by dropping the last reference; RSS and open file descriptors after a warm-up vs at the end.
* ``generations``: N short generations on one engine (complete, streams closed early, cancels);
  RSS and descriptors likewise.
* ``faults``: damaged copies of the model (tests/gguf_faults.py: truncations at every header and
  key/value field and a spread of tensor-info fields; bit flips and absurd values in counts,
  lengths, types, dimensions and offsets), each loaded in a child process with a deadline:
  every one must raise LlamaModelException (or load), none may crash or hang.
* ``threads``: rounds of T threads making random calls on one shared engine (generate, complete,
  tokenize, detokenize, metadata, cancel), one of them closing it at a random point; run in a
  child process. Every call must work or raise LlamaStateException; the child must not crash.

Each section prints its figures and one ``RESULT {json}`` line (tests parse them). Run it from
outside the source tree (the installed package has the compiled libraries), e.g.

    cd /tmp && python /path/to/scripts/soak.py --only cycles,generations --max-seconds 900
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GROWTH_LIMIT = 0.05
# One decode thread: on a shared machine llama.cpp's spin barriers make more threads slower.


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def model_path(name: str | None) -> Path:
    from llamact.models import gemma3_path, smollm2_path

    if name in (None, "smollm2"):
        return smollm2_path()
    if name == "gemma3":
        return gemma3_path()
    return Path(name)  # type: ignore[arg-type]


class Meter:
    """RSS and descriptor counts: a baseline taken after the warm-up, the last and the peak."""

    def __init__(self) -> None:
        self.baseline: tuple[int, int] | None = None
        self.last = (rss_bytes(), open_fds())
        self.peak_rss = self.last[0]
        self.trace: list[tuple[int, float]] = []  # (iterations done, RSS in MB) at each sample

    def sample(self, warm: bool, done: int) -> None:
        gc.collect()
        self.last = (rss_bytes(), open_fds())
        self.peak_rss = max(self.peak_rss, self.last[0])
        self.trace.append((done, round(self.last[0] / 2**20, 1)))
        if warm and self.baseline is None:
            self.baseline = self.last

    def report(self, name: str, done: int, wanted: int, seconds: float) -> dict[str, Any]:
        base = self.baseline or self.last
        rss_growth = (self.last[0] - base[0]) / base[0]
        fd_growth = (self.last[1] - base[1]) / base[1]
        result = {
            "section": name, "done": done, "wanted": wanted, "seconds": round(seconds, 1),
            "rss_baseline_mb": round(base[0] / 2**20, 1), "rss_end_mb": round(self.last[0] / 2**20, 1),
            "rss_peak_mb": round(self.peak_rss / 2**20, 1), "rss_growth": round(rss_growth, 4),
            "fds_baseline": base[1], "fds_end": self.last[1], "fd_growth": round(fd_growth, 4),
            "ok": rss_growth < GROWTH_LIMIT and fd_growth < GROWTH_LIMIT, "rss_trace_mb": self.trace,
        }
        print(f"{name}: {done}/{wanted} in {seconds:.0f} s; RSS {result['rss_baseline_mb']} -> "
              f"{result['rss_end_mb']} MB ({rss_growth:+.2%}, peak {result['rss_peak_mb']} MB); "
              f"fds {base[1]} -> {self.last[1]} ({fd_growth:+.2%}); growth under {GROWTH_LIMIT:.0%}: "
              f"{'yes' if result['ok'] else 'NO'}")
        print(f"  RSS (MB) by iterations done: {' '.join(f'{n}:{mb}' for n, mb in self.trace)}")
        return result


def cycles(args: argparse.Namespace) -> dict[str, Any]:
    from llamact import LlamaEngine, ModelParams

    path, n = model_path(args.model), args.cycles
    params = ModelParams(n_ctx=256, n_threads=1)
    meter, warmup = Meter(), max(1, n // 10)
    start, done = time.monotonic(), 0
    for i in range(n):
        if time.monotonic() - start > args.max_seconds:
            break
        engine = LlamaEngine.load(path, params)
        engine.tokenize("warm")
        if i % 2:
            engine.close()
        del engine  # the other half: freed by dropping the last reference
        done += 1
        if done == warmup or done % max(1, n // 20) == 0:
            meter.sample(warm=done >= warmup, done=done)
    meter.sample(warm=True, done=done)
    return meter.report("cycles", done, n, time.monotonic() - start)


def generations(args: argparse.Namespace) -> dict[str, Any]:
    from llamact import GenerationParams, LlamaEngine, ModelParams

    n = args.generations
    meter, warmup = Meter(), max(1, n // 10)
    start, done = time.monotonic(), 0
    reasons: collections.Counter[str] = collections.Counter()
    with LlamaEngine.load(model_path(args.model), ModelParams(n_ctx=256, n_threads=1)) as engine:
        prompt = engine.tokenize("Once upon a time")
        for i in range(n):
            if time.monotonic() - start > args.max_seconds:
                break
            params = GenerationParams(max_tokens=2, greedy=i % 2 == 0, seed=i, stop=("zz",))
            kind = i % 4
            if kind in (0, 1):
                reasons[engine.complete(prompt, params).stop_reason.value] += 1
            elif kind == 2:
                with engine.generate(prompt, params) as stream:
                    next(stream)  # closed early
                reasons["closed early"] += 1
            else:
                stream = engine.generate(prompt, params)
                engine.cancel()
                reasons[list(stream)[-1].stop_reason.value] += 1  # type: ignore[union-attr]
            done += 1
            if done == warmup or done % max(1, n // 20) == 0:
                meter.sample(warm=done >= warmup, done=done)
        meter.sample(warm=True, done=done)  # with the engine still loaded, as at the baseline
    result = meter.report("generations", done, n, time.monotonic() - start)
    result["stop_reasons"] = dict(reasons)
    print(f"  stop reasons: {dict(reasons)}")
    return result


def faults(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(REPO / "tests"))
    import gguf_faults

    source = model_path(args.model)
    layout = gguf_faults.read_layout(source)
    all_faults = list(gguf_faults.truncations(layout, args.fault_fields)) + list(
        gguf_faults.corruptions(layout, args.fault_fields)
    )
    outcomes: collections.Counter[str] = collections.Counter()
    bad: list[tuple[str, str, str]] = []
    start, done = time.monotonic(), 0
    with tempfile.TemporaryDirectory() as tmp, gguf_faults.FaultRunner(source, Path(tmp), args.fault_timeout) as run:
        for fault in all_faults:
            if time.monotonic() - start > args.max_seconds:
                break
            kind, message = run.run(fault)
            outcomes[kind] += 1
            if kind not in ("LlamaModelException", "LOADED"):
                bad.append((fault.name, kind, message[:300]))
            done += 1
    seconds = time.monotonic() - start
    print(f"faults: {done}/{len(all_faults)} damaged files in {seconds:.0f} s: {dict(outcomes)}")
    for name, kind, message in bad:
        print(f"  {kind}: {name}: {message}")
    return {"section": "faults", "done": done, "wanted": len(all_faults), "seconds": round(seconds, 1),
            "outcomes": dict(outcomes), "bad": bad, "ok": not bad}


# -- threads sharing one engine ---------------------------------------------------------------------


def _thread_ops(prompt: list[int]) -> dict[str, Callable[[Any, random.Random], object]]:
    from llamact import GenerationParams

    def stream(engine: Any, rng: random.Random) -> object:
        stop_after = rng.randint(0, 8)  # sometimes closed early
        with engine.generate(prompt, GenerationParams(max_tokens=rng.randint(1, 6), greedy=True)) as chunks:
            for k, _ in enumerate(chunks):
                if k == stop_after:
                    break
        return None

    def complete(engine: Any, rng: random.Random) -> object:
        return engine.complete(prompt, GenerationParams(max_tokens=rng.randint(1, 4), seed=rng.randint(0, 99)))

    return {
        "stream": stream,
        "complete": complete,
        "tokenize": lambda e, r: e.tokenize("The quick brown fox"),
        "detokenize": lambda e, r: e.detokenize(prompt),
        "metadata": lambda e, r: e.get_metadata(),
        "chat_template": lambda e, r: e.chat_template([{"role": "user", "content": "hi"}]).prompt,
        "cancel": lambda e, r: e.cancel(),
    }


class _SharedEngineRound:
    """One engine, ``n_threads`` threads making ``n_ops`` random calls each; thread ``closer``
    closes the engine at its call ``close_at``. Outcomes go to ``counts`` ("<call> ok|state|other")."""

    def __init__(self, engine: Any, n_threads: int, n_ops: int, rng: random.Random) -> None:
        from llamact import LlamaStateException

        self.state_error = LlamaStateException
        self.engine, self.n_ops = engine, n_ops
        self.ops = _thread_ops(engine.tokenize("Hello there"))
        self.names = sorted(self.ops)
        self.closer, self.close_at = rng.randrange(n_threads), rng.randrange(n_ops)
        self.barrier = threading.Barrier(n_threads)
        self.seeds = [rng.randrange(2**31) for _ in range(n_threads)]
        self.counts: collections.Counter[str] = collections.Counter()
        self.problems: list[str] = []
        self.lock = threading.Lock()

    def work(self, index: int) -> None:
        rng = random.Random(self.seeds[index])
        self.barrier.wait()
        for k in range(self.n_ops):
            name = "close" if (index == self.closer and k == self.close_at) else rng.choice(self.names)
            try:
                if name == "close":
                    self.engine.close()
                else:
                    self.ops[name](self.engine, rng)
                outcome = "ok"
            except self.state_error:
                outcome = "state"
            except BaseException as exc:  # noqa: BLE001 - any other outcome is the finding
                outcome = "other"
                with self.lock:
                    self.problems.append(f"{name}: {type(exc).__name__}: {exc}"[:300])
            with self.lock:
                self.counts[f"{name} {outcome}"] += 1

    def run(self) -> None:
        workers = [threading.Thread(target=self.work, args=(i,)) for i in range(len(self.seeds))]
        for t in workers:
            t.start()
        for t in workers:
            t.join()


def threads_child(args: argparse.Namespace) -> dict[str, Any]:
    """The threads section itself (in a child process: a crash is a result, not the end)."""
    from llamact import LlamaEngine, ModelParams

    rng = random.Random(args.seed)
    counts: collections.Counter[str] = collections.Counter()
    problems: list[str] = []
    path = model_path(args.model)
    start, rounds_done = time.monotonic(), 0
    for _ in range(args.rounds):
        if time.monotonic() - start > args.max_seconds:
            break
        engine = LlamaEngine.load(path, ModelParams(n_ctx=256, n_threads=1))
        one = _SharedEngineRound(engine, args.threads, args.ops, rng)
        one.run()
        engine.close()
        counts.update(one.counts)
        problems += one.problems
        rounds_done += 1
    seconds = time.monotonic() - start
    calls = sum(counts.values())
    by_outcome = collections.Counter(key.split(" ")[1] for key in counts.elements())
    print(f"threads: {rounds_done}/{args.rounds} rounds of {args.threads} threads x {args.ops} calls "
          f"({calls} calls) in {seconds:.0f} s: {dict(by_outcome)}")
    for p in problems[:20]:
        print(f"  problem: {p}")
    return {"section": "threads", "done": rounds_done, "wanted": args.rounds, "seconds": round(seconds, 1),
            "calls": dict(sorted(counts.items())), "problems": problems, "ok": not problems}


def threads(args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--threads-child", "--only", "threads",
           "--threads", str(args.threads), "--rounds", str(args.rounds), "--ops", str(args.ops),
           "--seed", str(args.seed), "--max-seconds", str(args.max_seconds)]
    if args.model:
        cmd += ["--model", args.model]
    env = {**os.environ, "GGML_NO_BACKTRACE": "1"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.max_seconds * 2 + 120, env=env)
    except subprocess.TimeoutExpired:
        print("threads: the child hung (no exit within twice the time budget)")
        return {"section": "threads", "ok": False, "hung": True}
    sys.stdout.write("\n".join(line for line in proc.stdout.splitlines() if not line.startswith("RESULT ")) + "\n")
    results = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not results:
        print(f"threads: the child process died (exit {proc.returncode}); stderr: {proc.stderr[-2000:]}")
        return {"section": "threads", "ok": False, "exit": proc.returncode}
    return dict(results[0])


SECTIONS = {"cycles": cycles, "generations": generations, "faults": faults, "threads": threads}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections ({', '.join(SECTIONS)})")
    ap.add_argument("--model", default=None, help="smollm2 (default), gemma3, or a GGUF path")
    ap.add_argument("--cycles", type=int, default=1000)
    ap.add_argument("--generations", type=int, default=10000)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=20, help="threads: engines shared, one after another")
    ap.add_argument("--ops", type=int, default=40, help="threads: calls per thread and round")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--fault-timeout", type=float, default=60.0, help="faults: seconds one load may take")
    ap.add_argument("--fault-fields", type=int, default=40,
                    help="faults: fields damaged per kind (count, length, type, dimension, offset); all header fields")
    ap.add_argument("--max-seconds", type=float, default=1800.0, help="time budget of each section")
    ap.add_argument("--json", default=None, help="write all results here")
    ap.add_argument("--threads-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        ap.error(f"unknown sections: {', '.join(unknown)}")
    results = []
    for name in names:
        result = threads_child(args) if args.threads_child else SECTIONS[name](args)
        print("RESULT " + json.dumps(result), flush=True)
        results.append(result)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(r.get("ok") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
