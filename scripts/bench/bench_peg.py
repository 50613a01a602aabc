#!/usr/bin/env python3
"""Output parsing cost: llamact's resumable PEG parse vs upstream's re-parse on every token.

For a few templates, an assistant turn of about 1k, 4k and 16k characters (reasoning, content
and a tool call with long arguments, as far as the template renders them) is synthesised by
rendering it through the template (the oracle's chat_apply), like the parity corpus does. The
text is then streamed in ~4-byte tokens:

* upstream: the oracle's ``chat_parse_timing`` op runs ``common_chat_parse`` on every prefix
  (partial) and on the whole text (final), timed inside the process with a monotonic clock;
* llamact: the arena is compiled once (as a pipeline does per template; its cost is shown apart),
  one :class:`ChatOutputParser` is fed every prefix (as the engine does), and a fresh one parses
  the whole text.

Reported per template and size: the full-parse ratio, the mean per-token ratio, and the growth
curve: mean per-token cost in each fifth of the stream (flat = cost independent of length).
Every streamed message is checked equal to upstream's final one at the end.

    cd /tmp && python /work/main/scripts/bench/bench_peg.py [--sizes 1000 4000 16000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from llamact.chat.output_parser import ChatOutputParser, compile_parser
from llamact.parity.corpus import synthesise_output
from llamact.parity.oracle import OracleClient
from llamact.parity.scenarios import AssistantOutput

TEMPLATES = ["Qwen-Qwen3-0.6B", "Qwen3-Coder", "openai-gpt-oss-120b", "google-gemma-4-31B-it", "MiniMax-M3"]
TOOLS = [{"type": "function", "function": {
    "name": "write_file", "description": "Write a file.",
    "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "content": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["path", "content"]}}}]


def _words(n_chars: int, seed: int) -> str:
    words = ["alpha", "beta", "gamma", "delta", "tool", "call", "parse", "token", "stream", "value", "é", "🌞"]
    out: list[str] = []
    size = 0
    i = seed
    while size < n_chars:
        w = words[i % len(words)]
        out.append(w)
        size += len(w) + 1
        i = i * 7 + 3
    return " ".join(out)


def assistant_output(size: int) -> AssistantOutput:
    args = {"path": "notes/today.md", "content": _words(size * 3 // 10, 2), "tags": [_words(20, k) for k in range(3)]}
    message = {"role": "assistant", "content": _words(size * 3 // 10, 1),
               "reasoning_content": _words(size * 4 // 10, 3),
               "tool_calls": [{"id": "call_0", "type": "function",
                               "function": {"name": "write_file", "arguments": args}}]}
    return AssistantOutput(f"bench_{size}", message, tools=TOOLS, reasoning_format="deepseek")


def token_ends(data: bytes, start: int, step: int = 4) -> list[int]:
    ends, pos = [], start
    while pos < len(data):
        pos = min(pos + step, len(data))
        while pos < len(data) and data[pos] & 0xC0 == 0x80:
            pos += 1
        ends.append(pos)
    return ends


def fifths(values: list[float]) -> list[float]:
    k = max(len(values) // 5, 1)
    return [statistics.fmean(values[i * k:(i + 1) * k] or values[-k:]) for i in range(5)]


def run(oracle: OracleClient, llama_cpp: Path, template: str, size: int) -> dict[str, Any] | None:
    source = (llama_cpp / "models" / "templates" / f"{template}.jinja").read_text()
    synthesised = synthesise_output(oracle, source, assistant_output(size))
    if synthesised is None:
        return None
    applied, text, _ = synthesised
    parser, fmt, gen = applied.get("parser"), applied["format"], applied["generation_prompt"]
    data = text.encode("utf-8")
    ends = token_ends(data, 0)
    upstream = oracle.request("chat_parse_timing", parser=parser, format=fmt, generation_prompt=gen, text=text,
                              ends=ends, full_iterations=5)
    expected = oracle.request("chat_parse", parser=parser, format=fmt, generation_prompt=gen, text=text,
                              is_partial=False)

    t0 = time.perf_counter()
    compiled = compile_parser(parser)  # once per template in a pipeline
    compile_us = (time.perf_counter() - t0) * 1e6
    stream = ChatOutputParser(compiled, fmt, gen)
    step_us: list[float] = []
    for end in ends:
        prefix = data[:end].decode("utf-8")
        t0 = time.perf_counter()
        stream.parse(prefix, True)
        step_us.append((time.perf_counter() - t0) * 1e6)
    final = stream.parse(text, False).to_dict()
    full_us = []
    for _ in range(5):
        t0 = time.perf_counter()
        ChatOutputParser(compiled, fmt, gen).parse(text, False)
        full_us.append((time.perf_counter() - t0) * 1e6)
    if final != expected:
        raise SystemExit(f"{template}/{size}: the streamed final message differs from upstream's")
    return {"template": template, "chars": len(text), "tokens": len(ends), "compile": compile_us,
            "full": (statistics.median(full_us), statistics.median(upstream["full_us"])),
            "step": (statistics.fmean(step_us), statistics.fmean(upstream["step_us"])),
            "curve": (fifths(step_us), fifths(upstream["step_us"]))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000, 16000])
    ap.add_argument("--templates", nargs="+", default=TEMPLATES)
    ap.add_argument("--llama-cpp", type=Path, default=Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp")
    args = ap.parse_args()
    print(f"{'template':<24}{'chars':>7}{'tokens':>7}{'compile':>9}  {'full us (ours/up = ratio)':<30}"
          f"{'per token us (ratio)':<28}growth: per-token us by fifth of the stream, ours | upstream")
    with OracleClient(cache=False, timeout=600) as oracle:
        for template in args.templates:
            for size in args.sizes:
                r = run(oracle, args.llama_cpp, template, size)
                if r is None:
                    print(f"{template:<24} (upstream cannot render this output)")
                    continue
                (fo, fu), (so, su) = r["full"], r["step"]
                co, cu = r["curve"]
                print(f"{template:<24}{r['chars']:>7}{r['tokens']:>7}{r['compile']:>9.0f}  "
                      f"{fo:>8.0f}/{fu:>8.0f} = {fo / fu:5.2f}x     "
                      f"{so:>7.1f}/{su:>8.1f} = {so / su:5.2f}x   "
                      + " ".join(f"{v:6.1f}" for v in co) + " | " + " ".join(f"{v:7.1f}" for v in cu))
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
