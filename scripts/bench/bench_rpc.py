#!/usr/bin/env python3
"""Decode tok/s of a local run against the same model split over two ggml-rpc-servers on loopback.

The servers are upstream's ggml-rpc-server (what ``llamact rpc-server`` runs), started here on
127.0.0.1 and stopped at the end. On loopback the difference is the RPC protocol's cost per token
(one graph send and result fetch per server and step), not a network's. Each side runs ``--reps``
greedy generations of ``--tokens`` tokens; the medians are reported, and the greedy tokens are
checked equal.

    cd /tmp && python /path/to/scripts/bench/bench_rpc.py [--model PATH] [--tokens 64] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
from pathlib import Path

from llamact import GenerationParams, LlamaEngine, LlamaModelException, ModelParams
from llamact.engine.backends import rpc_server_command
from llamact.native import rpc

PROMPT = "<|im_start|>user\nTell me about the history of Rome.<|im_end|>\n<|im_start|>assistant\n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(threads: int) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen(rpc_server_command("127.0.0.1", port, threads=threads),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"127.0.0.1:{port}"
    for _ in range(300):
        if proc.poll() is not None:
            raise SystemExit(f"ggml-rpc-server exited with {proc.returncode}")
        try:
            rpc.probe(endpoint, timeout=2.0)
            return proc, endpoint
        except LlamaModelException:
            try:
                proc.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                pass
    raise SystemExit(f"ggml-rpc-server on {endpoint} never answered")


def _measure(model: Path, params: ModelParams, tokens: int, reps: int) -> tuple[float, list[int]]:
    gen = GenerationParams(max_tokens=tokens, greedy=True, cache_prompt=False)
    with LlamaEngine.load(model, params) as engine:
        rates, out = [], []
        for _ in range(reps):
            result = engine.complete(PROMPT, gen)
            rates.append(result.timings.decode_tokens_per_s)
            out = result.tokens
    return statistics.median(rates), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=None, help="GGUF (default: the bundled SmolLM2)")
    ap.add_argument("--tokens", "-n", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", "-t", type=int, default=2, help="threads of the local run and of each server")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if args.model is None:
        from llamact.models import default_model_path

        args.model = default_model_path()
    local, local_tokens = _measure(args.model, ModelParams(n_ctx=1024, n_threads=args.threads),
                                   args.tokens, args.reps)
    servers = [_start(args.threads) for _ in range(2)]
    try:
        params = ModelParams(n_ctx=1024, n_threads=args.threads, rpc_servers=[e for _, e in servers])
        remote, remote_tokens = _measure(args.model, params, args.tokens, args.reps)
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait()
    result = {"local_tok_s": local, "rpc2_loopback_tok_s": remote, "ratio": remote / local if local else 0.0,
              "greedy_equal": local_tokens == remote_tokens, "tokens": args.tokens, "reps": args.reps}
    print(f"decode, {args.tokens} tokens, median of {args.reps}: local {local:.1f} tok/s, "
          f"2 x RPC on loopback {remote:.1f} tok/s (x{result['ratio']:.2f}); "
          f"greedy tokens {'equal' if result['greedy_equal'] else 'DIFFER'}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0 if result["greedy_equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
