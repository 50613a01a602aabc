#!/usr/bin/env python3
"""Does ``llamact serve``'s memory level off over many short requests? (issue 46, finding 8: RSS grew
442 -> 484 MiB over 1,000 requests.) One server (``--parallel 2``, one thread) answers N short
requests one after another, chats and raw completions alternating, each with its own seed; every
250 requests it prints the server's RSS and open descriptors. Loopback only; the server stops at
the end. Growth that goes on past the warm-up (caches, arenas, the first sampler chains) is a leak.

    source ~/.cache/llamact/venv-py311/bin/activate     # the venv scripts/test.sh set up
    python scripts/fuzz/rss_plateau.py 3000
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from server_live import LiveServer  # noqa: E402

from llamact.models import smollm2_path  # noqa: E402

EVERY = 250
CHAT = {"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 4, "temperature": 0.7}
RAW = {"prompt": "Once upon a time", "n_predict": 4}


def rss_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def main(n: int) -> None:
    with LiveServer("--model", str(smollm2_path()), "--threads", "1", "--ctx-size", "2048",
                    "--parallel", "2") as live:
        pid = live.process.pid
        print(f"start: {rss_mib(pid)} MiB", flush=True)
        t0 = time.monotonic()
        for i in range(1, n + 1):
            path, body = ("/v1/chat/completions", CHAT) if i % 2 else ("/completion", RAW)
            status, answer = live.request("POST", path, json.dumps({**body, "seed": i}).encode())
            if status != 200:
                raise SystemExit(f"request {i}: {status} {answer[:200]!r}")
            if i % EVERY == 0:
                fds = len(list(Path(f"/proc/{pid}/fd").iterdir()))
                print(f"{i}: {rss_mib(pid)} MiB, {fds} descriptors, {time.monotonic() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3000)
