#!/usr/bin/env python3
"""Chat-template apply time: llamact.chat vs upstream's init + apply (through the oracle).

One request per vendored template -- 21 messages (system, six user / assistant-tool-call / tool
exchanges, a final user turn) and 10 tools, tool_choice auto, reasoning extracted -- applied two
ways:

* **first**: the first request for a template ever. llamact: every template cache cleared (compiled
  source, caps, analysis, renders) and the on-disk compiled-template cache off, then one apply.
  Upstream: ``common_chat_templates_init`` (compile + caps probing) plus one
  ``common_chat_templates_apply``.
* **cold**: the first request for a template in a new process, the template having been used
  before: as *first*, but jinja2's code for the template comes from llamact's on-disk cache
  (``llamact/jinja/codecache.py``; upstream has no such cache, so its figure is the same as for
  *first*).
* **warm**: the same template again. llamact: ``apply_templates`` on the template set loaded once,
  its caches warm. Upstream: ``common_chat_templates_apply`` on templates initialised once, as
  llama-server runs it per request (it re-runs the autoparser's analysis every time).

Both clocks start after the request's JSON is read into typed inputs and stop before the answer is
turned into JSON (llamact's conversion exists only to compare with the oracle's answer).

Upstream's figures come from the oracle's ``chat_apply_timing`` op, timed inside the process with a
monotonic clock (no transport counted). Ratio = upstream time / llamact time (how many times faster
llamact is). The issue's targets: warm >= 5x, cold >= 0.5x (at most 2x upstream's time).
``--next-turn`` makes the warm request a different one (the conversation plus one more user turn),
so nothing of the request itself is memoised: the per-turn cost of a chat. Results
are compared for equality too (a template whose answer differs, or which errors, is reported).

    cd /tmp && python /work/main/scripts/bench/bench_apply.py [--reps 5] [--templates a,b]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from llamact.chat.pipeline import apply_templates
from llamact.chat.templates import load_chat_templates
from llamact.errors import LlamaException
from llamact.parity.apply_runner import inputs_from_request
from llamact.parity.oracle import OracleClient, OracleError

NOW = 1768478400


def request_inputs() -> dict[str, Any]:
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
            "name": f"tool_{turn}", "arguments": f'{{"query": "item {turn}", "limit": 5}}'}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call["id"], "name": f"tool_{turn}",
                         "content": f"result {turn}: " + "lorem ipsum " * 8})
    messages.append({"role": "user", "content": "Thanks. Now combine everything into one answer."})
    messages.append({"role": "user", "content": "Be concise."})
    assert len(messages) == 21
    return {"messages": messages, "tools": tools, "tool_choice": "auto", "reasoning_format": "deepseek"}


def clear_caches() -> None:
    """Every cache that depends only on the template, so the next apply pays the cold cost."""
    from llamact import jinja
    from llamact.chat import templates
    from llamact.chat.render import clear_render_memo
    from llamact.jinja import caps

    templates._cached_template.cache_clear()
    caps.template_caps.cache_clear()
    jinja._compile.cache_clear()
    clear_render_memo()
    try:
        from llamact.chat.parser_memo import clear_parser_memo

        clear_parser_memo()
    except ImportError:  # a tree before the parser memo (issue 30)
        pass
    try:
        from llamact.chat.autoparser import analysis

        analysis.clear_cache()
    except (ImportError, AttributeError):
        pass


def _templates(request: dict[str, Any]) -> Any:
    """Upstream's ``common_chat_templates_init`` for the request's template."""
    return load_chat_templates(request["template"], bos_token=request.get("bos_token", ""),
                               eos_token=request.get("eos_token", ""), add_bos=request.get("add_bos", False),
                               add_eos=request.get("add_eos", False), origin="corpus template")


def _apply(templates: Any, inputs: Any) -> Any:
    """Upstream's ``common_chat_templates_apply``; an error comes back as its text."""
    try:
        return apply_templates(templates, inputs)
    except LlamaException as exc:
        return {"error": str(exc)}


def _answer(result: Any) -> Any:
    return result if isinstance(result, dict) else result.to_json()


def time_ours(request: dict[str, Any], warm_request: dict[str, Any], reps: int) -> tuple[float, float, float, Any]:
    """What upstream's clock covers: init + apply (first, cold) and apply (warm). The request's JSON is
    read into typed inputs before the clock on both sides (the oracle's ``inputs_from_json``), and
    llamact's answer is turned into the oracle's JSON after it (only to compare the two; upstream's
    apply serialises its parser, llamact's pipeline hands the arena itself to the output parser)."""
    inputs = inputs_from_request(request["inputs"], NOW)
    warm_inputs = inputs_from_request(warm_request["inputs"], NOW)
    first, cold, warm = [], [], []
    answer: Any = None
    for _ in range(reps):
        clear_caches()
        os.environ["LLAMACT_JINJA_CODE_CACHE"] = "0"
        t0 = time.perf_counter()
        result = _apply(_templates(request), inputs)
        first.append(time.perf_counter() - t0)
        answer = _answer(result)
        os.environ.pop("LLAMACT_JINJA_CODE_CACHE")
        _apply(_templates(request), inputs)  # fills the disk cache
        clear_caches()
        t0 = time.perf_counter()
        templates = _templates(request)
        _apply(templates, inputs)
        cold.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        _apply(templates, warm_inputs)
        warm.append(time.perf_counter() - t0)
    return statistics.median(first), statistics.median(cold), statistics.median(warm), answer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama-cpp", default=str(Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp"))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--templates", help="comma-separated template stems (default: all)")
    parser.add_argument("--next-turn", action="store_true", help="warm = the next turn, not the same request")
    args = parser.parse_args()
    paths = sorted((Path(args.llama_cpp) / "models" / "templates").glob("*.jinja"))
    if args.templates:
        wanted = set(args.templates.split(","))
        paths = [p for p in paths if p.stem in wanted]
    inputs = request_inputs()
    rows = []
    with OracleClient(cache=False) as oracle:
        for path in paths:
            request = {"template": path.read_text(encoding="utf-8"), "bos_token": "<s>", "eos_token": "</s>",
                       "add_bos": False, "add_eos": False, "inputs": inputs}
            expected = oracle.request("chat_apply", **request, now=NOW)
            timing = oracle.request("chat_apply_timing", **request, iterations=args.reps, now=NOW)
            if isinstance(timing, OracleError):
                print(f"{path.stem}: oracle timing failed: {timing.message}", file=sys.stderr)
                continue
            warm_request = request
            if args.next_turn:
                more = dict(inputs, messages=inputs["messages"] + [{"role": "user", "content": "One more thing."}])
                warm_request = dict(request, inputs=more)
                timing_warm = oracle.request("chat_apply_timing", **warm_request, iterations=args.reps, now=NOW)
            else:
                timing_warm = timing
            first, cold, warm, answer = time_ours(request, warm_request, args.reps)
            same = (answer == expected) if not isinstance(expected, OracleError) else "error" in answer
            up_init = statistics.median(timing["init_us"]) / 1e6
            up_apply = statistics.median(timing["apply_us"]) / 1e6
            up_warm = statistics.median(timing_warm["apply_us"]) / 1e6
            rows.append((path.stem, first, cold, warm, up_init + up_apply, up_warm, same))
    kind = "next turn" if args.next_turn else "same request"
    print(f"21 messages, 10 tools; warm = {kind}; medians of {args.reps}; x = upstream time / llamact time")
    print(f"{'template':<46}{'first':>9}{'cold':>9}{'upstream':>10}{'x first':>8}{'x cold':>8}"
          f"{'warm':>9}{'upstream':>10}{'x warm':>8}  equal")
    for name, first, cold, warm, up_cold, up_warm, same in rows:
        print(f"{name:<46}{first * 1e3:>7.1f}ms{cold * 1e3:>7.1f}ms{up_cold * 1e3:>8.1f}ms{up_cold / first:>8.2f}"
              f"{up_cold / cold:>8.2f}{warm * 1e3:>7.2f}ms{up_warm * 1e3:>8.2f}ms{up_warm / warm:>8.2f}  "
              f"{'yes' if same else 'NO'}")
    if rows:
        for label, index, up in (("first", 1, 4), ("cold", 2, 4), ("warm", 3, 5)):
            ratios = sorted((r[up] / r[index], r[0]) for r in rows)
            print(f"{label}: median {statistics.median(r for r, _ in ratios):.2f}x, worst {ratios[0][0]:.2f}x "
                  f"({ratios[0][1]})")
        print(f"templates whose answer differs from upstream's: {sum(1 for r in rows if not r[6])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
