#!/usr/bin/env python3
"""Image encode + first token: ``llamact serve --mmproj`` against llama-server ``--mmproj`` on the
same request, in one run.

Both servers run the same model (SmolLM2 by default, or Gemma 3) with the same random projector
(``llamact.parity.projectors``: CLIP "mlp" for SmolLM2, "gemma3" for Gemma 3; ``--image-size`` sets
its input resolution, hence how much the encoder computes and how many embeddings it makes), the same
threads, context, batch sizes, one slot, and ``cache_prompt: false``, so every request decodes the
image from its bytes, preprocesses, encodes and decodes it into the context again. Each repetition
sends the same streamed request (a question and upstream's test photograph, tools/mtmd/test-1.jpeg)
to each server in turn (order alternating) and times from sending the request to the first event
that carries generated text: the time a user waits for the first token of an answer about an image.
Rows are medians; the ratio is llamact's time over llama-server's (below 1.0: llamact is faster).
Repetitions during which other processes used the machine (>= 10% CPU) are left out when enough
quiet ones exist.

    cd /tmp && python /path/to/scripts/bench/bench_media.py [--reps 9] [--model gemma3] [--json out.json]
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cpu_meter import CpuMeter  # this folder's (the script's directory is on sys.path)

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))   # the live-server helper of the tests

from server_live import LiveServer  # noqa: E402

from llamact.parity.llama_server import HOST, LlamaServer, ServerConfig, find_llama_server  # noqa: E402
from llamact.parity.projectors import embedding_width, write_projector  # noqa: E402


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a running process: the servers are this benchmark's own work."""
    import os

    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _first_token_seconds(port: int, body: dict[str, Any]) -> float:
    """Seconds from sending ``body`` (streamed) to the first event with generated text."""
    conn = http.client.HTTPConnection(HOST, port, timeout=600)
    try:
        start = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {response.read()[:300]!r}")
        first = None
        for raw in response:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            delta = (event.get("choices") or [{}])[0].get("delta") or {}
            if first is None and (delta.get("content") or delta.get("reasoning_content")
                                  or (event.get("choices") or [{}])[0].get("finish_reason")):
                first = time.perf_counter() - start
        if first is None:
            raise RuntimeError("the stream carried no generated text")
        return first
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2", help="smollm2, gemma3 or a GGUF path")
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--image-size", type=int, default=112,
                        help="the projector's input resolution (mlp: (size/8)^2 embeddings)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)

    from llamact import models

    model = (models.smollm2_path() if args.model == "smollm2" else models.gemma3_path() if args.model == "gemma3"
             else Path(args.model))
    kind = "gemma3" if args.model == "gemma3" else "mlp"
    folder = Path(tempfile.mkdtemp(prefix="llamact-bench-media-"))
    mmproj = write_projector(folder / "mmproj.gguf", embedding_width(model), kind, image_size=args.image_size)
    photo = (REPO / "vendor" / "llama.cpp" / "tools" / "mtmd" / "test-1.jpeg").read_bytes()
    image = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + base64.b64encode(photo).decode()}}
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "What is in this picture?"}, image]}],
            "max_tokens": 1, "temperature": 0, "cache_prompt": False, "stream": True}

    threads = str(args.threads)
    upstream = LlamaServer(ServerConfig(model, n_ctx=4096, n_threads=args.threads,
                                        extra_args=("--mmproj", str(mmproj))), find_llama_server())
    ours = LiveServer("--model", str(model), "--threads", threads, "--fixed-threads", "--ctx-size", "4096",
                      "--mmproj", str(mmproj))
    times: dict[str, list[float]] = {"llamact": [], "llama-server": []}
    quiet: list[bool] = []
    with upstream, ours:
        ports = {"llamact": ours.port, "llama-server": upstream.port}
        for name in ports:   # warm both (first encode allocates the projector's graph)
            _first_token_seconds(ports[name], body)
        pids = [ours.process.pid, upstream.pid]
        meter = CpuMeter(lambda: sum(_cpu_seconds(pid) for pid in pids if pid is not None))
        for rep in range(args.reps):
            order = ["llamact", "llama-server"] if rep % 2 == 0 else ["llama-server", "llamact"]
            mark = meter.start()
            for name in order:
                times[name].append(_first_token_seconds(ports[name], body))
            quiet.append(meter.others(mark) < 0.10)
    kept = [i for i, q in enumerate(quiet) if q] if sum(quiet) >= max(3, args.reps // 2) else list(range(args.reps))
    medians = {name: statistics.median([values[i] for i in kept]) for name, values in times.items()}
    ratio = medians["llamact"] / medians["llama-server"]
    print(f"model {model.name}, projector {kind} {args.image_size}px, {args.threads} threads, "
          f"{len(kept)}/{args.reps} quiet repetitions")
    for name, value in medians.items():
        print(f"  {name:13s} image + first token {value * 1000:8.1f} ms")
    print(f"  llamact / llama-server time: {ratio:.3f}")
    if args.json is not None:
        args.json.write_text(json.dumps({"medians_s": medians, "ratio": ratio, "times_s": times, "quiet": quiet,
                                         "model": model.name, "image_size": args.image_size}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
