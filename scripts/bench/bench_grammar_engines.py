#!/usr/bin/env python3
"""Constrained decoding on both grammar engines, as a share of free decoding, in one run.

For each case (a 6-field object, a named tool call, ``tool_choice: required`` over 50 tools, an enum
of N values, a ~100 KB schema) the same chat request runs greedy through the generation's own
sampler (``chat_sampler_config`` + ``generate``) three ways, interleaved: free (the same prompt, no
grammar), ``grammar_engine="llama"`` and ``"llguidance"``. Printed per case: tokens/s of each, the
constrained/free ratios, the first request's sampler build time (compile) and a cached one's, and
whether both engines produced the same tokens. Medians of ``--reps``; decode runs on one thread.
The machine is shared: ratios within a run are what counts.

    python scripts/bench/bench_grammar_engines.py [--model smollm2|gemma3|qwen] [--tokens 64] [--reps 3]
        [--cases object,named,tools50,enum,schema100k] [--enum 10000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from llamact import GenerationParams, LlamaEngine, ModelParams, models
from llamact.engine.chat_sampling import chat_sampler_config
from llamact.engine.generator import generate

TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"
HERMES = TEMPLATES / "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja"
ASK = [{"role": "user", "content": "What is the weather in Paris? Answer with the tool or as JSON."}]
PERSON = {"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"},
    "email": {"type": "string"}, "active": {"type": "boolean"}, "score": {"type": "number"}},
    "required": ["name", "age", "city", "email", "active", "score"]}


def _tool(i: int) -> dict[str, Any]:
    return {"type": "function", "function": {"name": f"tool_{i}" if i else "get_weather",
            "description": f"Tool number {i}", "parameters": {"type": "object", "properties": {
                "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}


def _big_schema(target: int) -> dict[str, Any]:
    props: dict[str, Any] = {}
    i = 0
    while len(str(props)) < target:
        props[f"field_{i}"] = {"type": "object", "properties": {
            f"sub_{j}": {"type": ["string", "integer", "boolean"][j % 3]} for j in range(8)}}
        i += 1
    return {"type": "object", "properties": props, "required": ["field_0"]}


def cases(enum_size: int) -> dict[str, dict[str, Any]]:
    rf = lambda schema: {"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}  # noqa: E731
    return {
        "object": rf(PERSON),
        "named": {"tools": [_tool(0)], "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
                  "custom_template": HERMES.read_text()},
        "tools50": {"tools": [_tool(i) for i in range(50)], "tool_choice": "required",
                    "custom_template": HERMES.read_text()},
        "enum": rf({"enum": [f"value-{i}" for i in range(enum_size)]}),
        "schema100k": rf(_big_schema(100_000)),
    }


def run(engine: LlamaEngine, request: dict[str, Any], grammar_engine: str | None, tokens: int
        ) -> tuple[list[int], float, float]:
    """(tokens, seconds generating, seconds building the sampler)."""
    request = dict(request)
    if grammar_engine is None:   # free: the same prompt, no grammar
        request.pop("response_format", None)
        request["tool_choice"] = "none" if "tools" in request else None
        request = {k: v for k, v in request.items() if v is not None}
    result = engine.chat_template(ASK, **request)
    params = GenerationParams(greedy=True, max_tokens=tokens, grammar_engine=grammar_engine or "llama")
    start = time.perf_counter()
    sampling = chat_sampler_config(engine, result, params)
    built = time.perf_counter() - start
    with sampling:
        prompt = engine.tokenize(result.prompt, add_special=True, parse_special=True)
        engine.context.memory_clear()
        out: list[int] = []
        start = time.perf_counter()
        first = None
        for chunk in generate(engine.context, sampling.sampler, prompt, tokens, (), False):
            if first is None:   # the prompt's evaluation is not decoding
                first = time.perf_counter()
            if chunk.token is not None:
                out.append(chunk.token)
        end = time.perf_counter()
    return out, (end - (first or start)) / max(1, len(out) - 1), built


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2", choices=("smollm2", "gemma3"))
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--enum", type=int, default=10_000)
    ap.add_argument("--cases", default="object,named,tools50,enum,schema100k")
    args = ap.parse_args(argv)
    path = models.smollm2_path() if args.model == "smollm2" else models.gemma3_path()
    table = cases(args.enum)
    print(f"model {path.name}; greedy, {args.tokens} tokens, medians of {args.reps}; 1 thread; shared machine")
    print("| case | free tok/s | llama tok/s (x free) | llguidance tok/s (x free) | build llama / llguidance "
          "first, cached | same tokens |")
    print("|---|---|---|---|---|---|")
    with LlamaEngine.load(path, ModelParams(n_ctx=8192, n_threads=1, n_threads_batch=1)) as engine:
        for name in args.cases.split(","):
            request = table[name]
            per: dict[str, list[float]] = {"free": [], "llama": [], "llguidance": []}
            builds: dict[str, list[float]] = {"llama": [], "llguidance": []}
            toks: dict[str, list[int]] = {}
            errors: dict[str, str] = {}
            for _ in range(args.reps):
                for label, grammar_engine in (("free", None), ("llama", "llama"), ("llguidance", "llguidance")):
                    if label in errors:
                        continue
                    try:
                        out, per_token, built = run(engine, request, grammar_engine, args.tokens)
                    except Exception as exc:  # noqa: BLE001 - a refused case is a result of the bench
                        errors[label] = f"{type(exc).__name__}: {str(exc)[:80]}"
                        continue
                    per[label].append(per_token)
                    if label in builds:
                        builds[label].append(built)
                    toks[label] = out

            def rate(label: str, per: dict[str, list[float]] = per, errors: dict[str, str] = errors) -> str:
                if label in errors:
                    return f"refused ({errors[label]})"
                tps = 1 / statistics.median(per[label])
                if label == "free" or "free" in errors:
                    return f"{tps:.1f}"
                return f"{tps:.1f} ({statistics.median(per['free']) / statistics.median(per[label]):.2f}x)"

            def build(label: str, builds: dict[str, list[float]] = builds) -> str:
                b = builds[label]
                return f"{b[0] * 1000:.0f} / {statistics.median(b[1:]) * 1000:.0f} ms" if len(b) > 1 else "-"

            same = ("yes" if toks.get("llama") == toks.get("llguidance") else "no") \
                if "llama" in toks and "llguidance" in toks else "-"
            print(f"| {name} | {rate('free')} | {rate('llama')} | {rate('llguidance')} | {build('llama')}; "
                  f"{build('llguidance')} | {same} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
