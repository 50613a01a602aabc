#!/usr/bin/env python3
"""Constrained decoding on both grammar engines, as a share of free decoding, in one run.

For each case (a 6-field object, a named tool call, ``tool_choice: required`` over 50 tools, an enum
of N values, a ~100 KB schema) the same chat request runs through the generation's own sampler
(``chat_sampler_config`` + ``generate``) three ways, interleaved: free (the same prompt, no
grammar), ``grammar_engine="llama"`` and ``"llguidance"`` (tokens/s, and the same ratio on this
process's CPU time, steadier on a loaded machine); with ``--server``, the same request also
goes to llama-server at the pin (free and constrained, its own ``predicted_per_second``). Printed per
case: tokens/s of each with the constrained/free ratio, llguidance over llama-server's constrained
tokens/s, the sampler build time of the first request (the grammar's compile) and of a cached one,
and whether both engines produced the same tokens. llguidance's tokenizer is built once per model
(printed apart). Medians of ``--reps``; one thread; greedy, or ``--sampled`` (temperature 0.8, a
fixed seed). The machine is shared: ratios within a run are what counts.

    python scripts/bench/bench_grammar_engines.py [--model smollm2|gemma3|PATH.gguf] [--tokens 96]
        [--reps 3] [--cases object,named,tools50,enum,schema100k] [--enum 10000] [--sampled]
        [--server enum,tools50] [--own-template]
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
from llamact.engine.grammar_engines import llguidance_tokenizer
from llamact.parity.llama_server import LlamaServer, ServerConfig

TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"
HERMES = TEMPLATES / "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja"
ASK = [{"role": "user", "content": "What is the weather in Paris? Answer with the tool or as JSON."}]
PERSON = {"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"},
    "email": {"type": "string"}, "active": {"type": "boolean"}, "score": {"type": "number"}},
    "required": ["name", "age", "city", "email", "active", "score"]}
SEED = 1234
_CACHED: list[int] = []   # the prompt whose tokens the KV cache holds


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
        "named": {"tools": [_tool(0)], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
        "tools50": {"tools": [_tool(i) for i in range(50)], "tool_choice": "required"},
        "enum": rf({"enum": [f"value-{i}" for i in range(enum_size)]}),
        "schema100k": rf(_big_schema(100_000)),
    }


def _free(request: dict[str, Any]) -> dict[str, Any]:
    """The same prompt without a grammar."""
    out = {k: v for k, v in request.items() if k != "response_format"}
    if "tools" in out:
        out["tool_choice"] = "none"
    return out


def _params(sampled: bool, tokens: int, grammar_engine: str) -> GenerationParams:
    if sampled:
        return GenerationParams(temperature=0.8, seed=SEED, max_tokens=tokens, grammar_engine=grammar_engine)
    return GenerationParams(greedy=True, max_tokens=tokens, grammar_engine=grammar_engine)


def run(engine: LlamaEngine, request: dict[str, Any], grammar_engine: str | None, tokens: int, sampled: bool,
        tool_template: Path | None = HERMES) -> tuple[list[int], float, float, float]:
    """(tokens, seconds a decode step after the first token, process CPU seconds a step, seconds
    building the sampler). CPU time counts what this process spends whatever else the
    machine runs (the decode thread and the sampler's callbacks). ``tool_template`` None: tool cases
    on the GGUF's own template."""
    request = dict(request if grammar_engine else _free(request))
    if "tools" in request and tool_template is not None:
        request["custom_template"] = tool_template.read_text()
    result = engine.chat_template(ASK, **request)
    params = _params(sampled, tokens, grammar_engine or "llama")
    start = time.perf_counter()
    sampling = chat_sampler_config(engine, result, params)
    built = time.perf_counter() - start
    with sampling:
        prompt = engine.tokenize(result.prompt, add_special=True, parse_special=True)
        # the prompt's common prefix with the last one stays in the KV cache (a 50-tool prompt is
        # thousands of tokens); what decodes after it is what is measured
        common = 0
        for a, b in zip(_CACHED, prompt[:-1], strict=False):
            if a != b:
                break
            common += 1
        engine.context.memory_seq_rm(0, common, -1)
        _CACHED[:] = prompt
        out: list[int] = []
        ended_on_token = False
        start, cpu_start = time.perf_counter(), time.process_time()
        first = cpu_first = None
        for chunk in generate(engine.context, sampling.sampler, prompt[common:], tokens, (), False, n_past=common):
            if first is None:   # the prompt's evaluation is not decoding
                first, cpu_first = time.perf_counter(), time.process_time()
            if chunk.token is not None:
                out.append(chunk.token)
            ended_on_token = chunk.end_token is not None
        end, cpu_end = time.perf_counter(), time.process_time()
    # decode steps after the first token: an output that ends on an end token decodes its last token
    # to sample that end, one step more than its tokens after the first (a free run cut at max_tokens
    # does not); dividing by tokens alone charged a 12-token enum 9% it did not cost
    n = max(1, len(out) - 1 + int(ended_on_token))
    return out, (end - (first or start)) / n, (cpu_end - (cpu_first or cpu_start)) / n, built


def server_run(server: LlamaServer, request: dict[str, Any], constrained: bool, tokens: int, sampled: bool
               ) -> tuple[int, float]:
    """(tokens generated, seconds a token) of llama-server's own timings for the same request."""
    body: dict[str, Any] = {"messages": ASK, "max_tokens": tokens, "cache_prompt": True, "stream": False,
                            **(request if constrained else _free(request))}
    body |= {"temperature": 0.8, "seed": SEED} if sampled else {"temperature": 0.0}
    answer = server.post("/v1/chat/completions", body)
    timings = answer["timings"]
    return int(timings["predicted_n"]), 1.0 / float(timings["predicted_per_second"])


def _model(name: str) -> Path:
    if name == "smollm2":
        return models.smollm2_path()
    if name == "gemma3":
        return models.gemma3_path()
    return Path(name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2", help="smollm2, gemma3 or a GGUF path")
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--enum", type=int, default=10_000)
    ap.add_argument("--cases", default="object,named,tools50,enum,schema100k")
    ap.add_argument("--engines", default="llama,llguidance")
    ap.add_argument("--sampled", action="store_true", help="temperature 0.8, seed 1234 (default: greedy)")
    ap.add_argument("--server", default="", help="cases also run on llama-server at the pin")
    ap.add_argument("--own-template", action="store_true",
                    help="tool cases on the GGUF's own template (default: Hermes 2 Pro's, which any model reads)")
    args = ap.parse_args(argv)
    tool_template = _tool_template(args)
    path = _model(args.model)
    table = cases(args.enum)
    engines = args.engines.split(",")
    on_server = set(filter(None, args.server.split(",")))
    mode = "sampled (temperature 0.8, seed 1234)" if args.sampled else "greedy"
    print(f"model {path.name}; {mode}, {args.tokens} tokens, medians of {args.reps}; 1 thread; shared machine")
    with LlamaEngine.load(path, ModelParams(n_ctx=8192, n_threads=1, n_threads_batch=1)) as engine:
        start = time.perf_counter()
        llguidance_tokenizer(engine.model)
        print(f"llguidance tokenizer built once per model: {time.perf_counter() - start:.2f} s "
              f"({engine.model.vocab.n_tokens} tokens)")
        print("| case | free tok/s | " + " | ".join(f"{e} tok/s (x free)" for e in engines)
              + " | llama-server free / constrained tok/s (x free) | llguidance / llama-server | build "
              + " / ".join(engines) + ": first, cached | same tokens |")
        print("|---" * (6 + len(engines)) + "|")
        for name in args.cases.split(","):
            request = table[name]
            per: dict[str, list[float]] = {label: [] for label in ["free", *engines]}
            cpu: dict[str, list[float]] = {label: [] for label in ["free", *engines]}
            builds: dict[str, list[float]] = {label: [] for label in engines}
            toks: dict[str, list[int]] = {}
            errors: dict[str, str] = {}
            for _ in range(args.reps):
                for label in ["free", *engines]:
                    if label in errors:
                        continue
                    try:
                        out, per_token, cpu_token, built = run(engine, request, None if label == "free" else label,
                                                               args.tokens, args.sampled, tool_template)
                    except Exception as exc:  # noqa: BLE001 - a refused case is a result of the bench
                        errors[label] = f"{type(exc).__name__}: {str(exc)[:80]}"
                        continue
                    per[label].append(per_token)
                    cpu[label].append(cpu_token)
                    if label in builds:
                        builds[label].append(built)
                    toks[label] = out
            server_cell, versus = "-", "-"
            if name in on_server:
                server_cell, versus = _server_cells(path, name, request, args, per)

            def rate(label: str, per: dict[str, list[float]] = per, cpu: dict[str, list[float]] = cpu,
                     errors: dict[str, str] = errors) -> str:
                if label in errors:
                    return f"refused ({errors[label]})"
                tps = 1 / statistics.median(per[label])
                if label == "free" or "free" in errors:
                    return f"{tps:.1f}"
                wall = statistics.median(per["free"]) / statistics.median(per[label])
                on_cpu = statistics.median(cpu["free"]) / statistics.median(cpu[label])
                return f"{tps:.1f} ({wall:.2f}x; CPU {on_cpu:.2f}x)"

            def build(label: str, builds: dict[str, list[float]] = builds) -> str:
                b = builds[label]
                return f"{b[0] * 1000:.0f} / {statistics.median(b[1:]) * 1000:.0f} ms" if len(b) > 1 else "-"

            same = ("yes" if toks.get("llama") == toks.get("llguidance") else "no") \
                if "llama" in toks and "llguidance" in toks else "-"
            print(f"| {name} ({len(toks.get('llguidance', toks.get('free', [])))} tok) | {rate('free')} | "
                  + " | ".join(rate(e) for e in engines) + f" | {server_cell} | {versus} | "
                  + "; ".join(build(e) for e in engines) + f" | {same} |", flush=True)
    return 0


def _tool_template(args: argparse.Namespace) -> Path | None:
    return None if args.own_template else HERMES


def _server_cells(path: Path, name: str, request: dict[str, Any], args: argparse.Namespace,
                  per: dict[str, list[float]]) -> tuple[str, str]:
    """llama-server's free and constrained tokens/s for the same request, and llguidance's over it."""
    template = _tool_template(args) if "tools" in request else None
    free: list[float] = []
    constrained: list[float] = []
    try:
        with LlamaServer(ServerConfig(path, template, n_ctx=8192, n_threads=1), request_timeout=1800.0) as server:
            for _ in range(args.reps):
                free.append(server_run(server, request, False, args.tokens, args.sampled)[1])
                constrained.append(server_run(server, request, True, args.tokens, args.sampled)[1])
    except Exception as exc:  # noqa: BLE001 - a refused or failed request is a result of the bench
        return f"failed ({type(exc).__name__}: {str(exc)[:80]})", "-"
    f, c = statistics.median(free), statistics.median(constrained)
    cell = f"{1 / f:.1f} / {1 / c:.1f} ({f / c:.2f}x)"
    ours = per.get("llguidance") or per.get("auto")
    if not ours:
        return cell, "-"
    return cell, f"{c / statistics.median(ours):.1f}x"


if __name__ == "__main__":
    sys.exit(main())
