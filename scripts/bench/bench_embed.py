#!/usr/bin/env python3
"""Embedding throughput (texts/s): llamact's engine.embed() against llama-server's /v1/embeddings
(the same build's upstream code, started with --embeddings --pooling mean), in the same run.

Same model, threads, context, batch sizes and texts (32 sentences of 8-20 tokens). llamact embeds
them in one call (batched: one sequence id per text); llama-server gets them in one request (it
batches the inputs of a request across its --parallel slots, here 1, so one per decode). Timings
are medians of interleaved repetitions; the server's include HTTP/JSON, which is small here.

    python scripts/bench/bench_embed.py [--model smollm2|gemma3] [--threads 1] [--reps 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from llamact.engine import LlamaEngine
from llamact.models import gemma3_path, smollm2_path
from llamact.parity.create_answer import engine_params_for
from llamact.parity.llama_server import LlamaServer, ServerConfig

WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches".split()


def texts(n: int = 32) -> list[str]:
    return [" ".join(WORDS[(i * 3) % len(WORDS):] + WORDS[: (i * 5) % 7]).capitalize() + "." for i in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["smollm2", "gemma3"], default="smollm2")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    path = smollm2_path() if args.model == "smollm2" else gemma3_path()
    inputs = texts()
    config = ServerConfig(path, n_ctx=1024, n_threads=args.threads, extra_args=("--embeddings", "--pooling", "mean"))
    ours, theirs = [], []
    with LlamaServer(config) as server, LlamaEngine.load(path, engine_params_for(config)) as engine:
        engine.embed(inputs[:2], pooling="mean")  # create the embedding context outside the timing
        server.post("/v1/embeddings", {"input": inputs[:2]})
        for _ in range(args.reps):
            t = time.perf_counter()
            engine.embed(inputs, pooling="mean")
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            server.post("/v1/embeddings", {"input": inputs, "encoding_format": "float"})
            theirs.append(time.perf_counter() - t)
    a, b = len(inputs) / statistics.median(ours), len(inputs) / statistics.median(theirs)
    print(f"{path.name}, {args.threads} threads, {len(inputs)} texts: llamact {a:.1f} texts/s, "
          f"llama-server {b:.1f} texts/s, ratio {a / b:.2f}")


if __name__ == "__main__":
    main()
