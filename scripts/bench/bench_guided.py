#!/usr/bin/env python3
"""Guided sampling cost: the grammar checked after the chain (llama-server's way) vs grammar-first.

For each template and tool choice (SmolLM2 by default, greedy), the request's sampler is built by
``chat_sampler_config`` both ways and the same generation runs through the engine's token loop:

* ``check``: the chain chooses from the raw logits, the grammar checks that one token, and only a
  rejected token makes the grammar filter the whole vocabulary (common_sampler_sample with
  grammar_first=false, what llama-server does);
* ``first``: the grammar filters the whole vocabulary on every token, then the chain chooses.

Both must give the same tokens (checked). Reported per case: decode tokens/s both ways (wall clock
and thread CPU time; llamact runs one thread, so CPU time is what this loop cost, whatever the
neighbours did), their ratio, and the sampling cost alone per token (``GuidedSampler.sample`` timed
on its own, the decodes between samples untimed, replaying the same tokens). Repetitions are
interleaved (check, first, check, ...); medians. A first line compares the per-token step without
grammar through a plain ``SamplerChain`` and through the guided sampler (the same cost is expected),
without the decode.

    cd /tmp && python /path/to/scripts/bench/bench_guided.py [--tokens 64] [--reps 3] [--model gemma3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from llamact import GenerationParams, LlamaEngine, ModelParams
from llamact.engine.chat_sampling import chat_sampler_config
from llamact.engine.generator import generate
from llamact.native.batch import Batch
from llamact.native.llama_h import LLAMA_TOKEN_NULL
from llamact.native.sampler import Greedy, SamplerChain
from llamact.native.stepper import TokenStepper

TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Get the weather for a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "calculate", "description": "Evaluate an arithmetic expression",
     "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}},
]
NAMED = {"type": "function", "function": {"name": "get_weather"}}
CASES = [
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "required"),
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "named"),
    ("meta-llama-Llama-3.1-8B-Instruct", "named"),
    ("mistralai-Mistral-Nemo-Instruct-2407", "required"),
    ("mistralai-Mistral-Nemo-Instruct-2407", "named"),
    ("Qwen3-Coder", "named"),
]


def run_once(engine: LlamaEngine, result: Any, n: int, grammar_first: bool) -> tuple[list[int], float, float]:
    params = GenerationParams(greedy=True, max_tokens=n)
    with chat_sampler_config(engine, result, params, grammar_first=grammar_first) as sampling:
        prompt = engine.tokenize(result.prompt, add_special=True, parse_special=True)
        engine.context.memory_clear()
        tokens: list[int] = []
        stream = generate(engine.context, sampling.sampler, prompt, n, sampling.stops)
        first = next(stream)  # prompt + first token: not part of the steady decode
        if first.token is not None:
            tokens.append(first.token)
        w0, c0 = time.perf_counter(), time.thread_time()
        for chunk in stream:
            if chunk.token is not None:
                tokens.append(chunk.token)
        wall, cpu = time.perf_counter() - w0, time.thread_time() - c0
    steps = max(1, len(tokens) - 1)
    return tokens, steps / wall, steps / cpu


def plain_vs_guided(engine: LlamaEngine, reps: int, steps: int = 2000) -> None:
    """The per-token step without grammar (SmolLM2's own template, no tools) through a plain
    SamplerChain and through the GuidedSampler create() uses: the guided step must cost the same.
    Measured without the decode (the step is asked again with no previous token to decode: argmax,
    accept, end-of-generation check, piece, Python), in thread CPU time, so that the few µs of the
    step are not lost in the decode's ms and the neighbours' noise."""
    result = engine.chat_template(MESSAGES)
    prompt = engine.tokenize(result.prompt, add_special=True, parse_special=True)
    sampling = chat_sampler_config(engine, result, GenerationParams(greedy=True))
    plain = SamplerChain(engine.model, [Greedy()])
    steppers = {"plain": TokenStepper(engine.context, plain), "guided": TokenStepper(engine.context, sampling.sampler)}
    engine.context.memory_clear()
    steppers["plain"].prefill(prompt)
    costs: dict[str, list[float]] = {"plain": [], "guided": []}
    for _ in range(reps):
        for mode, stepper in steppers.items():
            t0 = time.thread_time()
            for _ in range(steps):
                stepper._prev = LLAMA_TOKEN_NULL  # nothing to decode: the step samples the same logits
                stepper.step()
            costs[mode].append((time.thread_time() - t0) / steps * 1e6)
    plain.close()
    sampling.close()
    us = {mode: statistics.median(values) for mode, values in costs.items()}
    print(f"step without decode, no grammar: plain chain {us['plain']:.1f} µs, guided {us['guided']:.1f} µs "
          f"(guided/plain {us['guided'] / us['plain']:.3f})")


def sampling_only(engine: LlamaEngine, result: Any, tokens: list[int], grammar_first: bool) -> float:
    """Mean thread-CPU µs of ``sample`` per token, replaying ``tokens`` (decodes untimed)."""
    params = GenerationParams(greedy=True)
    prompt = engine.tokenize(result.prompt, add_special=True, parse_special=True)
    batch = Batch(engine.context, max(len(prompt), 1))
    spent = 0.0
    with chat_sampler_config(engine, result, params, grammar_first=grammar_first) as sampling, batch:
        engine.context.memory_clear()
        batch.set_sequence(prompt, 0)
        engine.context.decode(batch)
        for i, expected in enumerate(tokens):
            t0 = time.thread_time()
            token = sampling.sampler.sample(engine.context)
            spent += time.thread_time() - t0
            if token != expected:
                raise SystemExit(f"replay diverged at token {i}: {token} != {expected}")
            batch.set_sequence([token], len(prompt) + i)
            engine.context.decode(batch)
    return spent / max(1, len(tokens)) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2", help="smollm2 or gemma3")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    from llamact import models

    path = models.smollm2_path() if args.model == "smollm2" else models.gemma3_path()
    engine = LlamaEngine.load(path, ModelParams(n_ctx=4096, n_threads=1, n_threads_batch=1))
    print(f"model {path.name} | 1 thread | greedy | {args.tokens} tokens | medians of {args.reps} interleaved reps")
    plain_vs_guided(engine, max(args.reps, 5))
    print(f"{'case':58s} {'check t/s':>10s} {'first t/s':>10s} {'ratio':>6s} {'check cpu':>10s} {'first cpu':>10s}"
          f" {'ratio':>6s} {'sample µs check':>16s} {'first':>9s}")
    for name, choice in CASES:
        result = engine.chat_template(MESSAGES, tools=TOOLS, tool_choice=NAMED if choice == "named" else choice,
                                      custom_template=(TEMPLATES / f"{name}.jinja").read_text())
        runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        reference: list[int] | None = None
        for _ in range(args.reps):
            for mode in (False, True):
                tokens, wall_tps, cpu_tps = run_once(engine, result, args.tokens, mode)
                if reference is None:
                    reference = tokens
                elif tokens != reference:
                    raise SystemExit(f"{name} {choice}: grammar_first={mode} gave other tokens")
                runs[mode].append((wall_tps, cpu_tps))
        assert reference is not None
        check_us = sampling_only(engine, result, reference, False)
        first_us = sampling_only(engine, result, reference, True)
        med = {m: (statistics.median(r[0] for r in runs[m]), statistics.median(r[1] for r in runs[m]))
               for m in runs}
        (check_wall, check_cpu), (first_wall, first_cpu) = med[False], med[True]
        print(f"{name + ' ' + choice:58s} {check_wall:10.1f} {first_wall:10.1f} {check_wall / first_wall:6.2f}"
              f" {check_cpu:10.1f} {first_cpu:10.1f} {check_cpu / first_cpu:6.2f} {check_us:16.0f} {first_us:9.0f}")
    engine.close()


if __name__ == "__main__":
    main()
