#!/usr/bin/env python3
"""Resident memory of ``llamact serve`` beside ``llama-server`` (issue 30, target 5): the same model,
context, slots and threads; VmRSS (and its anonymous / file-backed parts from /proc/PID/status) once
idle after start, and again after ``--requests`` streamed chat completions, alternating plain and
streamed, the last ones from ``--clients`` clients at once. Target: llamact at most +150 MiB over
llama-server. The servers run one after the other (each alone on the machine).

    cd /tmp && python /path/to/scripts/bench/bench_memory.py [--parallel 4] [--json out.json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import HOST, QUESTIONS, free_port, start  # noqa: E402  (this folder's)

TARGET_MIB = 150


def status(pid: int) -> dict[str, int]:
    """VmRSS, RssAnon, RssFile of ``pid`` in KiB."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def chat(port: int, question: str, stream: bool, max_tokens: int) -> None:
    conn = http.client.HTTPConnection(HOST, port, timeout=120)
    body = {"messages": [{"role": "user", "content": question}], "max_tokens": max_tokens, "temperature": 0,
            "stream": stream}
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    answer = conn.getresponse()
    answer.read()
    if answer.status != 200:
        raise RuntimeError(f"status {answer.status}")
    conn.close()


def measure(command: list[str], port: int, args: argparse.Namespace) -> dict[str, Any]:
    process = start(command, port)
    try:
        time.sleep(2)
        idle = status(process.pid)
        n = 0
        while n < args.requests - args.clients:
            chat(port, QUESTIONS[n % len(QUESTIONS)], n % 2 == 1, args.max_tokens)
            n += 1
        threads = [threading.Thread(target=chat, args=(port, QUESTIONS[i % len(QUESTIONS)], True, args.max_tokens))
                   for i in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(1)
        after = status(process.pid)
        return {"idle": idle, "after": after}
    finally:
        process.kill()
        process.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--ctx-size", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    import llamact.models
    from llamact.parity.llama_server import find_llama_server
    model = args.model or llamact.models.smollm2_path()
    common = ["--model", str(model), "--host", HOST, "--ctx-size", str(args.ctx_size), "--threads", str(args.threads),
              "--parallel", str(args.parallel)]
    commands = {
        "llamact": lambda port: [sys.executable, "-m", "llamact", "serve", *common, "--port", str(port)],
        "llama-server": lambda port: [str(find_llama_server()), *common, "--port", str(port), "--jinja",
                                      "--no-webui", "--threads-batch", str(args.threads)],
    }
    results = {}
    for name, command in commands.items():
        port = free_port()
        results[name] = measure(command(port), port, args)
        print(f"{name:14} idle {results[name]['idle']}  after {args.requests} requests {results[name]['after']}",
              flush=True)
    mib = {name: {when: r[when]["VmRSS"] / 1024 for when in ("idle", "after")} for name, r in results.items()}
    print(f"\nVmRSS MiB ({args.parallel} slots, ctx {args.ctx_size}, {args.requests} requests of {args.max_tokens} "
          "tokens)")
    print(f"{'':14} {'idle':>8} {'after':>8}")
    for name, m in mib.items():
        print(f"{name:14} {m['idle']:8.1f} {m['after']:8.1f}")
    extra = {when: mib["llamact"][when] - mib["llama-server"][when] for when in ("idle", "after")}
    verdict = "ok" if max(extra.values()) <= TARGET_MIB else f"above the +{TARGET_MIB} MiB target"
    print(f"{'llamact over':14} {extra['idle']:+8.1f} {extra['after']:+8.1f}  {verdict}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
