#!/usr/bin/env python3
"""Time to first token of a follow-up to a long history, in a fresh engine: with the history's KV
cache restored from a state file (engine.load_state, counted in the time) and without (the whole
history evaluated again).

The history: a ~900-token text and one greedy token. A first engine evaluates it and saves its
state; then, per repetition, a new engine (loading not timed) answers history + a short question,
one token, timed from before load_state (or generate) to the first token. Medians.

    python scripts/bench/bench_state.py [--model smollm2|gemma3] [--threads 2] [--reps 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from llamact.engine import GenerationParams, LlamaEngine, ModelParams
from llamact.models import gemma3_path, smollm2_path

HISTORY = " ".join(f"Note {i}: the lighthouse keeper logged the weather, the ships and the tide." for i in range(50))


def first_token_ms(engine: LlamaEngine, tokens: list[int], state: Path | None) -> tuple[float, int]:
    t = time.perf_counter()
    if state is not None:
        engine.load_state(state)
    stream = engine.generate(tokens, GenerationParams(greedy=True, max_tokens=1))
    next(stream)
    elapsed = (time.perf_counter() - t) * 1000
    n_cached = stream.n_cached
    stream.close()
    return elapsed, n_cached


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["smollm2", "gemma3"], default="smollm2")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    path = smollm2_path() if args.model == "smollm2" else gemma3_path()
    params = ModelParams(n_ctx=2048, n_threads=args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "history.state"
        with LlamaEngine.load(path, params) as engine:
            engine.complete(HISTORY, GenerationParams(greedy=True, max_tokens=1))
            history = list(engine.context_tokens)
            engine.save_state(state)
            follow = history + engine.tokenize(" Question: what did the keeper log?", add_special=False)
        times: dict[str, list[float]] = {"restored": [], "evaluated": []}
        for _ in range(args.reps):
            for name, file in (("restored", state), ("evaluated", None)):
                with LlamaEngine.load(path, params) as engine:
                    ms, n_cached = first_token_ms(engine, follow, file)
                    times[name].append(ms)
                    assert (n_cached == len(history)) == (file is not None)
        size = state.stat().st_size
    a, b = statistics.median(times["restored"]), statistics.median(times["evaluated"])
    print(f"{path.name}, {args.threads} threads, history {len(history)} tokens, state file {size / 2**20:.1f} MiB: "
          f"TTFT restored {a:.0f} ms, evaluated {b:.0f} ms ({b / a:.1f}x)")


if __name__ == "__main__":
    main()
