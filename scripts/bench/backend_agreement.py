#!/usr/bin/env python3
"""Greedy-token agreement of one llamact build (e.g. Vulkan, CUDA) with another (the CPU build),
and decode speed; scripts/check_backend.sh runs it in both builds' environments.

``--dump ref.json`` (in the reference build) writes, for each prompt, the greedy tokens with each
step's top-1 and runner-up logits. ``--compare ref.json`` (in the build under test) does the same
run and reports, per prompt, "equal" or the first divergence: the step, both tokens, and each
build's logit margin there (top-1 minus runner-up). A divergence where the reference's margin was
small is floating-point noise between kernels; one where it was large is a wrong result: the exit
status is 1 when a divergence's reference margin exceeds ``--max-margin``.

Decode tok/s comes from ``LlamaEngine.complete`` (the product path: greedy sampling included).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from llamact import GenerationParams, LlamaEngine, ModelParams, build_info, devices
from llamact.native.batch import Batch

PROMPTS = [
    "The capital of France is",
    "<|im_start|>user\nWrite a haiku about rivers.<|im_end|>\n<|im_start|>assistant\n",
    "def fibonacci(n):\n",
    "Once upon a time, in a small village by the sea,",
]


def _top2(row: Any) -> tuple[int, float, int, float]:
    """The best and runner-up token of a logits row, as plain Python numbers (the row is numpy)."""
    import numpy as np

    values = np.asarray(row, dtype=np.float64)
    second, best = (int(i) for i in np.argpartition(values, -2)[-2:])
    if values[second] > values[best] or (values[second] == values[best] and second < best):
        best, second = second, best
    return best, float(values[best]), second, float(values[second])


def greedy_steps(engine: LlamaEngine, prompt: str, n: int) -> list[dict[str, float]]:
    """``n`` greedy steps after ``prompt``, decoding token by token (no sampler: the argmax)."""
    context = engine.context
    context.memory_clear()
    tokens = engine.tokenize(prompt)
    batch = Batch(context, max(len(tokens), 1))
    batch.set_sequence(tokens, 0, logits_last=True)
    context.decode(batch)
    steps = []
    pos = len(tokens)
    for _ in range(n):
        tok, top, alt, alt_v = _top2(context.logits(-1))
        steps.append({"token": tok, "logit": top, "runner_up": alt, "runner_up_logit": alt_v})
        batch.clear()
        batch.add(tok, pos, logits=True)
        context.decode(batch)
        pos += 1
    batch.close()
    return steps


def decode_speed(engine: LlamaEngine, n: int, reps: int) -> float:
    rates = []
    for _ in range(reps):
        result = engine.complete(PROMPTS[0], GenerationParams(max_tokens=n, greedy=True, cache_prompt=False))
        rates.append(result.timings.decode_tokens_per_s)
    return statistics.median(rates)


def run(model: Path, n_gpu_layers: int, n_tokens: int, reps: int) -> dict[str, Any]:
    params = ModelParams(n_ctx=1024, n_gpu_layers=n_gpu_layers)
    with LlamaEngine.load(model, params) as engine:
        runs = {prompt: greedy_steps(engine, prompt, n_tokens) for prompt in PROMPTS}
        speed = decode_speed(engine, n_tokens, reps)
    return {
        "backends": build_info()["backends"],
        "devices": [f"{d.name} ({d.type}): {d.description}" for d in devices()],
        "n_gpu_layers": n_gpu_layers,
        "decode_tok_s": speed,
        "runs": runs,
    }


def compare(ref: dict[str, Any], got: dict[str, Any], max_margin: float) -> bool:
    ok = True
    print(f"reference: backends {ref['backends']}, n_gpu_layers {ref['n_gpu_layers']}, "
          f"decode {ref['decode_tok_s']:.1f} tok/s")
    print(f"this build: backends {got['backends']}, n_gpu_layers {got['n_gpu_layers']}, "
          f"decode {got['decode_tok_s']:.1f} tok/s; devices: {'; '.join(got['devices'])}")
    for prompt, ref_steps in ref["runs"].items():
        steps = got["runs"][prompt]
        label = json.dumps(prompt[:40])
        pairs = list(zip(ref_steps, steps, strict=True))
        first = next((i for i, (a, b) in enumerate(pairs) if a["token"] != b["token"]), None)
        if first is None:
            drift = max(abs(a["logit"] - b["logit"]) for a, b in pairs)
            print(f"  {label}: equal ({len(steps)} tokens; max top-1 logit difference {drift:.4f})")
            continue
        r, g = ref_steps[first], steps[first]
        ref_margin = r["logit"] - r["runner_up_logit"]
        got_margin = g["logit"] - g["runner_up_logit"]
        noise = ref_margin <= max_margin
        ok = ok and noise
        print(f"  {label}: diverges at step {first}: reference token {r['token']} "
              f"(margin {ref_margin:.4f} over {r['runner_up']}), this build {g['token']} "
              f"(margin {got_margin:.4f} over {g['runner_up']}) -> "
              f"{'near-tie, numerical noise' if noise else 'WRONG: the reference was not a near-tie'}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=None, help="GGUF (default: the bundled SmolLM2)")
    ap.add_argument("--n-gpu-layers", "-ngl", type=int, default=-1)
    ap.add_argument("--tokens", "-n", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-margin", type=float, default=0.5,
                    help="a divergence whose reference margin exceeds this fails the check")
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--dump", type=Path, help="write this build's run here (the reference)")
    group.add_argument("--compare", type=Path, help="compare this build's run with a reference dump")
    args = ap.parse_args()
    if args.model is None:
        from llamact.models import default_model_path

        args.model = default_model_path()
    result = run(args.model, args.n_gpu_layers, args.tokens, args.reps)
    if args.dump:
        args.dump.write_text(json.dumps(result))
        print(f"reference written to {args.dump}: backends {result['backends']}, "
              f"decode {result['decode_tok_s']:.1f} tok/s")
        return 0
    ref = json.loads(args.compare.read_text())
    return 0 if compare(ref, result, args.max_margin) else 1


if __name__ == "__main__":
    sys.exit(main())
