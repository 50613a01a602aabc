#!/usr/bin/env python3
"""Decode speed on a busy machine (issue 30, target 4): tokens/s under a competing CPU load as a
ratio to the same runtime's quiet figure, measured in the same run, for llamact (its default: the
decode thread governor on), llamact with ``adaptive_threads=False`` (the thread count fixed, as
before), llama-server and llama-cpp-python, each with its own default thread count.

The load is a busy loop in one process per core, started for each loaded measurement and stopped
after it (each loop also ends by itself after ``--load-seconds``). A measurement is a greedy
generation of ``--tokens`` tokens (end of generation biased away) timed from the first token to
the last; one that has not finished after ``--cap`` seconds is stopped there and counts what it
made (a collapsed runtime makes ~1 token/s). Rounds interleave the runtimes, quiet then loaded;
the table gives medians. Target: loaded >= 0.5x quiet.

    cd /tmp && python /path/to/scripts/bench/bench_busy_cores.py [--rounds 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

PROMPT = "Once upon a time"
TARGET = 0.5


def _spin(deadline: float) -> None:
    while time.time() < deadline:
        pass


@contextlib.contextmanager
def busy_cores(seconds: float, per_core: int = 1) -> Iterator[None]:
    """``per_core`` busy loops for every core (each ends by itself after ``seconds``), stopped on exit."""
    deadline = time.time() + seconds
    count = per_core * (os.cpu_count() or 1)
    procs = [multiprocessing.Process(target=_spin, args=(deadline,), daemon=True) for _ in range(count)]
    for p in procs:
        p.start()
    time.sleep(0.5)   # the loops are running before the measurement starts
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.join(5)


# -- the runtimes: each returns a function that makes one measurement (tokens, seconds) ------------

def llamact_runner(model: str, adaptive: bool, tokens: int, cap: float) -> Callable[[], tuple[int, float]]:
    from llamact import GenerationParams, LlamaEngine, ModelParams
    engine = LlamaEngine.load(model, ModelParams(n_ctx=512, adaptive_threads=adaptive))
    eog = engine.eos_token_id
    params = GenerationParams(max_tokens=tokens, temperature=0, logit_bias={eog: -100.0} if eog is not None else {},
                              cache_prompt=False)

    def run() -> tuple[int, float]:
        first, n, last = 0.0, 0, 0.0
        with engine.generate(PROMPT, params) as stream:
            for _chunk in stream:
                now = time.perf_counter()
                if n == 0:
                    first = now
                n, last = n + 1, now
                if now - first > cap:
                    break
        return n - 1, last - first
    return run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_runner(binary: Path, model: str, tokens: int, cap: float,
                  procs: list[subprocess.Popen[bytes]]) -> Callable[[], tuple[int, float]] | None:
    if not binary.exists():
        return None
    port = _free_port()
    proc = subprocess.Popen([str(binary), "-m", model, "-c", "512", "--parallel", "1", "--host", "127.0.0.1",
                             "--port", str(port), "--no-webui"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(proc)
    for _ in range(600):
        with contextlib.suppress(OSError):
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).status == 200:
                break
        time.sleep(0.1)
    else:
        return None

    def run() -> tuple[int, float]:
        body = json.dumps({"prompt": PROMPT, "n_predict": tokens, "temperature": 0, "stream": True,
                           "ignore_eos": True, "cache_prompt": False}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/completion", body,
                                         {"Content-Type": "application/json"})
        first, n, last = 0.0, 0, 0.0
        with urllib.request.urlopen(request, timeout=cap + 60) as answer:
            for line in answer:
                if not line.startswith(b"data: ") or b'"content"' not in line:
                    continue
                now = time.perf_counter()
                if n == 0:
                    first = now
                n, last = n + 1, now
                if now - first > cap:
                    break
        return n - 1, last - first
    return run


PEER = r"""
import json, sys, time
from llama_cpp import Llama
path, tokens, cap = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
llm = Llama(model_path=path, n_ctx=512, verbose=False)
bias = {llm.token_eos(): -100.0}
print("ready", llm.n_threads if hasattr(llm, "n_threads") else "?", flush=True)
for line in sys.stdin:
    first, n, last = 0.0, 0, 0.0
    for _ in llm(sys.argv[4], max_tokens=tokens, temperature=0, logit_bias=bias, stream=True):
        now = time.perf_counter()
        if n == 0:
            first = now
        n, last = n + 1, now
        if now - first > cap:
            break
    print(json.dumps({"n": n - 1, "s": last - first}), flush=True)
"""


def peer_runner(venv: Path, model: str, tokens: int, cap: float,
                procs: list[subprocess.Popen[bytes]]) -> Callable[[], tuple[int, float]] | None:
    python = venv / "bin" / "python"
    if not python.exists():
        return None
    proc = subprocess.Popen([str(python), "-c", PEER, model, str(tokens), str(cap), PROMPT],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    procs.append(proc)   # type: ignore[arg-type]
    assert proc.stdin is not None and proc.stdout is not None
    if not proc.stdout.readline().startswith("ready"):
        return None

    def run() -> tuple[int, float]:
        proc.stdin.write("go\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        return int(answer["n"]), float(answer["s"])
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="GGUF (default: the bundled SmolLM2-135M)")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--cap", type=float, default=15.0, help="seconds after which a measurement stops")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--load-seconds", type=float, default=120.0)
    ap.add_argument("--per-core", type=int, default=1, help="busy loops per core while loaded")
    ap.add_argument("--peer-venv", default=str(Path.home() / ".cache/llamact/venv-peer"))
    ap.add_argument("--only", default="", help="comma-separated runtimes to run (default: all)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import llamact
    import llamact.models
    model = args.model or str(llamact.models.smollm2_path())
    binary = Path(llamact.__file__).parent / "_bin" / "llama-server"
    procs: list[subprocess.Popen[bytes]] = []
    makers: dict[str, Callable[[], Callable[[], tuple[int, float]] | None]] = {
        "llamact": lambda: llamact_runner(model, True, args.tokens, args.cap),
        "llamact fixed threads": lambda: llamact_runner(model, False, args.tokens, args.cap),
        "llama-server": lambda: server_runner(binary, model, args.tokens, args.cap, procs),
        "llama-cpp-python": lambda: peer_runner(Path(args.peer_venv), model, args.tokens, args.cap, procs),
    }
    only = {name.strip() for name in args.only.split(",") if name.strip()}
    results: dict[str, dict[str, list[float]]] = {}
    try:
        runners = {}
        for name, make in makers.items():
            if only and name not in only:
                continue
            runner = make()
            if runner is None:
                print(f"{name}: not available, left out")
                continue
            runner()   # warm-up
            runners[name] = runner
            results[name] = {"quiet": [], "loaded": []}
        for r in range(args.rounds):
            for name, runner in runners.items():
                n, s = runner()
                results[name]["quiet"].append(n / s if s > 0 else 0.0)
                with busy_cores(args.load_seconds, args.per_core):
                    n, s = runner()
                results[name]["loaded"].append(n / s if s > 0 else 0.0)
                print(f"round {r + 1} {name}: quiet {results[name]['quiet'][-1]:.1f} tok/s, "
                      f"loaded {results[name]['loaded'][-1]:.1f} tok/s", flush=True)
    finally:
        for proc in procs:
            proc.kill()
    print(f"\n{os.cpu_count()} cores, {args.per_core} busy loop(s) on each while loaded; {args.tokens} tokens, "
          f"medians of {args.rounds} rounds\n")
    print(f"{'runtime':24} {'quiet tok/s':>12} {'loaded tok/s':>13} {'loaded/quiet':>13}")
    table: dict[str, Any] = {}
    for name, figures in results.items():
        quiet, loaded = statistics.median(figures["quiet"]), statistics.median(figures["loaded"])
        ratio = loaded / quiet if quiet else 0.0
        table[name] = {"quiet": quiet, "loaded": loaded, "ratio": ratio, "rounds": figures}
        mark = "" if name != "llamact" else ("  ok" if ratio >= TARGET else f"  below the {TARGET}x target")
        print(f"{name:24} {quiet:12.1f} {loaded:13.1f} {ratio:12.2f}x{mark}")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
