#!/usr/bin/env python3
"""Warm template render time: llamact.jinja vs upstream's C++ engine (through the oracle).

A 20-message, 10-tool conversation (system, alternating user / assistant turns, assistant tool
calls with JSON arguments and tool results) is rendered with a few large vendored templates.
Both sides parse the template once and then render it warm, which is what a chat pipeline does
per request: llamact renders its compiled (cached) template; upstream's figure comes from the
oracle's ``jinja_render_timing`` op, which lexes and parses once and times each render (context
from JSON, execute, gather the output) inside the process with a monotonic clock, so no transport
is counted. Ratio = llamact / upstream (the issue's target: <= 1.0). Outputs are compared too.

    cd /tmp && python /work/main/scripts/bench/bench_render.py [--reps 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from llamact.jinja import compile_template
from llamact.parity.oracle import OracleClient

TEMPLATES = [
    "Qwen3-Coder",
    "openai-gpt-oss-120b",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
    "meta-llama-Llama-3.3-70B-Instruct",
    "deepseek-ai-DeepSeek-V3.2",
]
NOW = 1768478400


def conversation() -> dict[str, Any]:
    tools = [
        {"type": "function", "function": {
            "name": f"tool_{i}", "description": f"Tool number {i} does something useful with its inputs.",
            "parameters": {"type": "object", "properties": {
                "query": {"type": "string", "description": "what to look up"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                "flags": {"type": "array", "items": {"type": "string"}},
            }, "required": ["query"]}}}
        for i in range(10)
    ]
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful assistant with tools."}]
    for turn in range(6):
        messages.append({"role": "user", "content": f"Question {turn}: please look up item {turn} and summarise."})
        call = {"id": f"call_{turn:04d}", "type": "function", "function": {
            "name": f"tool_{turn}", "arguments": {"query": f"item {turn}", "limit": 5}}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call["id"], "name": f"tool_{turn}",
                         "content": f"result {turn}: " + "lorem ipsum " * 8})
    messages.append({"role": "user", "content": "Thanks. Now combine everything into one answer."})
    assert len(messages) == 20
    return {"messages": messages, "tools": tools, "bos_token": "<s>", "eos_token": "</s>",
            "add_generation_prompt": True}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama-cpp", default=str(Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp"))
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    context = conversation()
    rows = []
    with OracleClient(cache=False) as oracle:
        for name in TEMPLATES:
            source = (Path(args.llama_cpp) / "models" / "templates" / f"{name}.jinja").read_text()
            compiled = compile_template(source, name)
            ours_out = compiled.render(context, now=NOW)
            same = ours_out == oracle.request("jinja_render", template=source, context=context, now=NOW)
            ours = []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                compiled.render(context, now=NOW)
                ours.append(time.perf_counter() - t0)
            timing = oracle.request("jinja_render_timing", template=source, context=context, iterations=args.reps,
                                    now=NOW)
            theirs = [us / 1e6 for us in timing["render_us"]]
            rows.append((name, statistics.median(ours), statistics.median(theirs), same, len(ours_out)))
    print(f"20 messages, 10 tools; warm renders (parsed once); medians of {args.reps}")
    print(f"{'template':<48}{'llamact':>11}{'upstream':>11}{'ratio':>8}  output")
    for name, o, t, same, size in rows:
        print(f"{name:<48}{o * 1e3:>9.2f}ms{t * 1e3:>9.2f}ms{o / t:>8.2f}  {size} chars{'' if same else ' (DIFFERS)'}")
    total_o, total_t = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{'all':<48}{total_o * 1e3:>9.2f}ms{total_t * 1e3:>9.2f}ms{total_o / total_t:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
