#!/usr/bin/env python3
"""What ``llamact.compat.Llama`` costs over the engine, and how it compares with llama-cpp-python.

One greedy completion of N tokens (the end-of-generation tokens biased away, so every round makes
exactly N), timed end to end, in rounds interleaved so that machine noise hits every row alike:

* ``engine.complete``          the baseline: llamact's own collected call
* ``Llama.__call__``           compat, a whole text completion (the dict built from the stream)
* ``Llama(..., stream=True)``  compat, the chunk dicts iterated
* ``create_chat_completion``   compat chat, streamed (template, parser, chunk dicts)
* ``llama-cpp-python``         the peer's ``Llama.__call__``, same model, threads, context and
                               greedy request, in its own venv (a subprocess that runs one round per
                               line it reads, so its rounds interleave with ours)

Each row is the median over the rounds, as tokens/s and as a ratio to the baseline of the same run.
The peer's venv is ``~/.cache/llamact/venv-peer`` (``scripts/_env.sh`` makes it for the tests);
without it that row is left out and said so.

    cd /tmp && python /path/to/scripts/bench/bench_compat.py [--tokens 64] [--rounds 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

PROMPT = "Once upon a time"

PEER = r"""
import json, sys, time
from llama_cpp import Llama
path, n_ctx, threads, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
llm = Llama(model_path=path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, verbose=False)
bias = {llm.token_eos(): -100.0}
print("ready", flush=True)
for line in sys.stdin:
    start = time.perf_counter()
    out = llm(sys.argv[5], max_tokens=tokens, temperature=0, logit_bias=bias)
    print(json.dumps({"s": time.perf_counter() - start, "n": out["usage"]["completion_tokens"]}), flush=True)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a GGUF (default: the bundled SmolLM2)")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peer-venv", default=str(Path.home() / ".cache/llamact/venv-peer"))
    args = ap.parse_args()

    from llamact import GenerationParams
    from llamact.compat import Llama
    from llamact.models import smollm2_path

    path = args.model or str(smollm2_path())
    n_ctx = 512
    llm = Llama(path, n_ctx=n_ctx, n_threads=args.threads, n_threads_batch=args.threads, verbose=False)
    engine = llm.engine
    bias = {t: -100.0 for t in engine.eog_tokens}
    params = GenerationParams(greedy=True, max_tokens=args.tokens, logit_bias=bias)
    ask = [{"role": "user", "content": PROMPT}]

    def timed(run: Callable[[], int]) -> tuple[float, int]:
        start = time.perf_counter()
        n = run()
        return time.perf_counter() - start, n

    rows: dict[str, Callable[[], int]] = {
        "engine.complete": lambda: len(engine.complete(PROMPT, params).tokens),
        "Llama.__call__": lambda: llm(PROMPT, max_tokens=args.tokens, temperature=0,
                                      logit_bias=bias)["usage"]["completion_tokens"],
        "Llama(..., stream=True)": lambda: sum(1 for c in llm(PROMPT, max_tokens=args.tokens, temperature=0,
                                                               logit_bias=bias, stream=True)
                                               if c["choices"][0]["finish_reason"] is None),
        "create_chat_completion": lambda: _chat_tokens(llm, ask, args.tokens, bias),
    }
    peer = _start_peer(Path(args.peer_venv), path, n_ctx, args.threads, args.tokens)
    results: dict[str, list[tuple[float, int]]] = {name: [] for name in rows}
    if peer is not None:
        results["llama-cpp-python"] = []
    for run in rows.values():   # warm-up: first template compile, first decode
        run()
    for _ in range(args.rounds):
        for name, run in rows.items():
            results[name].append(timed(run))
        if peer is not None:
            assert peer.stdin is not None and peer.stdout is not None
            peer.stdin.write("go\n")
            peer.stdin.flush()
            answer = json.loads(peer.stdout.readline())
            results["llama-cpp-python"].append((answer["s"], answer["n"]))
    if peer is not None:
        peer.terminate()

    base = statistics.median(n / s for s, n in results["engine.complete"])
    print(f"{Path(path).name}, {args.tokens} tokens, {args.threads} threads, {args.rounds} rounds (median)")
    print(f"{'':28} {'tok/s':>8} {'ratio':>7}")
    for name, samples in results.items():
        rate = statistics.median(n / s for s, n in samples)
        counts = {n for _, n in samples}
        print(f"{name:28} {rate:8.1f} {rate / base:7.3f}" + ("" if counts == {args.tokens} else f"  tokens {counts}"))
    if peer is None:
        print("llama-cpp-python: no peer venv at", args.peer_venv, "(scripts/_env.sh tests makes it)")


def _chat_tokens(llm: object, ask: list[dict[str, str]], tokens: int, bias: dict[int, float]) -> int:
    chunks = list(llm.create_chat_completion(ask, max_tokens=tokens, temperature=0,  # type: ignore[attr-defined]
                                             logit_bias=bias, stream=True))
    return len(chunks) - 2   # the role chunk and the finish chunk carry no token


def _start_peer(venv: Path, path: str, n_ctx: int, threads: int, tokens: int) -> subprocess.Popen[str] | None:
    python = venv / "bin" / "python"
    if not python.exists():
        return None
    peer = subprocess.Popen([str(python), "-c", PEER, path, str(n_ctx), str(threads), str(tokens), PROMPT],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert peer.stdout is not None
    if peer.stdout.readline().strip() != "ready":
        peer.kill()
        return None
    return peer


if __name__ == "__main__":
    sys.exit(main())
