#!/usr/bin/env python3
"""``engine.create()`` decode speed against upstream's llama-server, on the same chat requests.

What a user of create() pays per token on top of native decode: the sampler step (guided where the
request has a grammar), detokenization, stop strings, the chat parser's step and the delta. The
baseline is llama-server's own ``timings.predicted_per_second`` for the same request (its C++ loop:
decode, sampling, its own incremental parse; HTTP excluded), measured in the same run, interleaved
(server, llamact, server, ...), both on one thread, greedy, without the prompt cache. The generated
token count and text must be the same (checked), so both did the same work.

Reported per request (medians over ``--reps``):

* ``server t/s``: llama-server's predicted_per_second;
* ``create t/s``: create()'s generated tokens over the wall time from its first chunk to its last
  (everything Python does per token included; the prompt and the first token excluded, as in the
  server's figure);
* ``engine t/s``: ``timings.decode_ms`` of the same run (llamact's token loop: decode and sampling);
* ``ratio``: create t/s / server t/s (1.0 = no cost over upstream; the target is >= 0.97).

    cd /tmp && python /path/to/scripts/bench/bench_create.py [--tokens 96] [--reps 3] [--model gemma3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from llamact import GenerationParams, LlamaEngine, ModelParams
from llamact.models import gemma3_path, smollm2_path
from llamact.parity.llama_server import LlamaServer, ServerConfig

TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Get the weather for a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
]
ASK = [{"role": "user", "content": "Tell me a long story about the weather in Paris."}]
# (label, template file stem or None for the model's own, tool_choice or None for no tools)
REQUESTS = [
    ("plain, model's template", None, None),
    ("Hermes tools, auto", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "auto"),
    ("Hermes tools, required", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "required"),
    ("Qwen3 tools, auto (reasoning)", "Qwen-Qwen3-0.6B", "auto"),
]


def server_body(tool_choice: str | None, n: int) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": ASK, "max_tokens": n, "temperature": 0.0, "cache_prompt": False,
                            "stream": False, "verbose": True, "return_tokens": True}
    if tool_choice is not None:
        body |= {"tools": TOOLS, "tool_choice": tool_choice, "parallel_tool_calls": False}
    return body


def ask_server(server: LlamaServer, tool_choice: str | None, n: int) -> tuple[tuple[int, str], float]:
    """(generated token count, raw output text), predicted_per_second."""
    answer = server.post("/v1/chat/completions", server_body(tool_choice, n))
    timings = answer["timings"]
    return (int(timings["predicted_n"]), answer["__verbose"]["content"]), float(timings["predicted_per_second"])


def ask_create(engine: LlamaEngine, template: str | None, tool_choice: str | None,
               n: int) -> tuple[tuple[int, str], float, float]:
    """(generated token count, raw output text), wall tokens/s after the first chunk, the loop's t/s."""
    kwargs: dict[str, Any] = {"custom_template": template}
    if tool_choice is not None:
        # upstream_compat: llama-server's "required" grammar (deviation 19 would constrain otherwise),
        # so that both generate the same tokens
        kwargs |= {"tools": TOOLS, "tool_choice": tool_choice, "parallel_tool_calls": False, "upstream_compat": True}
    stream = engine.create(ASK, params=GenerationParams(greedy=True, max_tokens=n, cache_prompt=False), **kwargs)
    first = last = 0.0
    count = 0
    final = None
    for chunk in stream:
        now = time.perf_counter()
        if count == 0:
            first = now
        last = now
        count += 1
        final = chunk
    assert final is not None and final.timings is not None
    timings = final.timings
    generated = timings.predicted_n
    wall_tps = (generated - 1) / (last - first) if last > first and generated > 1 else 0.0
    return (generated, stream.text), wall_tps, generated / (timings.predicted_ms / 1000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--model", choices=["smollm2", "gemma3"], default="smollm2")
    args = ap.parse_args()
    model = smollm2_path() if args.model == "smollm2" else gemma3_path()

    print(f"model {model.name}, {args.tokens} tokens, {args.reps} reps, one thread, greedy, no prompt cache")
    print(f"{'request':34} {'tokens':>6} {'server t/s':>10} {'create t/s':>10} {'engine t/s':>10} {'ratio':>6}")
    with LlamaEngine.load(model, ModelParams(n_ctx=4096, n_threads=1)) as engine:
        for label, stem, tool_choice in REQUESTS:
            path = TEMPLATES / f"{stem}.jinja" if stem else None
            template = path.read_text(encoding="utf-8") if path else None
            server_tps, create_tps, engine_tps = [], [], []
            with LlamaServer(ServerConfig(model, path, "deepseek", n_threads=1)) as server:
                for _ in range(args.reps):
                    s_out, s = ask_server(server, tool_choice, args.tokens)
                    c_out, c, e = ask_create(engine, template, tool_choice, args.tokens)
                    if s_out != c_out:
                        raise SystemExit(f"{label}: different outputs (server {s_out!r}, create {c_out!r}):"
                                         " the comparison would not be of the same work")
                    server_tps.append(s)
                    create_tps.append(c)
                    engine_tps.append(e)
            s, c, e = (statistics.median(x) for x in (server_tps, create_tps, engine_tps))
            print(f"{label:34} {s_out[0]:>6} {s:>10.1f} {c:>10.1f} {e:>10.1f} {c / s:>6.3f}", flush=True)


if __name__ == "__main__":
    main()
