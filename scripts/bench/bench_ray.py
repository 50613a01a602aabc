"""Ray Serve replicas (``llamact serve --ray``) against one ``llamact serve`` with the same total threads,
under clients holding multi-turn chats with a shared system prompt; and the prefix-aware router
against Ray's default one (power of two choices).

    python scripts/bench/bench_ray.py                               # 8 clients x 10 turns, SmolLM2, 2 threads
    python scripts/bench/bench_ray.py --clients 8 --turns 10 --max-tokens 24 --budget 1500 --json out.json

Three set-ups, one after another, each on 127.0.0.1 and stopped before the next starts:

* ``single``: one ``llamact serve --threads T --parallel C`` (one slot per client);
* ``ray-prefix``: a local Ray cluster, ``--ray-replicas R`` replicas of ``--threads T/R --parallel C/R``,
  the prefix router (``--ray-router prefix``);
* ``ray-pow2``: the same with Ray's default router (``--ray-router pow2``).

Every client streams its chat's turns one after the other (greedy, ``max_tokens`` each, the reply
appended to its history); all clients start together. Throughput = completion tokens (the last
event's timings) over the wall time of all the chats; TTFT = from sending a turn to its first
content event, reported for the first turn and for the later ones (which a replica holding the chat's
earlier turns answers from its cache: ``cached`` = the prompt tokens found there, in all). Ratios:
ray-prefix over single (throughput), ray-prefix over ray-pow2 (TTFT of later turns). The load
average before and after each set-up is printed: the machine is shared, numbers are noisy.
Everything stops by itself: each request times out, the whole run is bounded by ``--budget`` seconds.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
SYSTEM = ("You are a helpful assistant for a small science museum. Answer every question in one short "
          "sentence, plainly, without lists. Visitors are curious children and their parents; keep the "
          "tone friendly. If you do not know, say so. Never make up numbers. Stay on the topic asked.")
TOPICS = ["the moon", "bees", "volcanoes", "rainbows", "whales", "magnets", "clouds", "ants", "the sun", "rivers",
          "owls", "ice", "sand", "stars", "frogs", "wind"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class Server:
    """``python -m llamact serve ...`` on a free port, waited for, stopped with SIGTERM."""

    def __init__(self, args: list[str], start_timeout: float) -> None:
        self.port = free_port()
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen([sys.executable, "-m", "llamact", "serve", "--host", HOST, "--port",
                                         str(self.port), *args], stdout=self.log, stderr=subprocess.STDOUT,
                                        cwd=tempfile.gettempdir())
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                conn = http.client.HTTPConnection(HOST, self.port, timeout=5)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        self.log.seek(0)
        raise RuntimeError(f"the server did not start: {self.log.read().decode(errors='replace')[-3000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


def stream_turn(port: int, messages: list[dict[str, str]], max_tokens: int, timeout: float) -> dict[str, Any]:
    """One streamed turn: its text, TTFT, completion tokens and the prompt tokens found in a cache."""
    body = json.dumps({"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True})
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    start = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {response.read()[:300]!r}")
    text, ttft, timings = "", None, None
    for raw in response:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[6:])
        for choice in event.get("choices", []):
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                ttft = ttft if ttft is not None else time.perf_counter() - start
                text += piece
        timings = event.get("timings") or timings
    conn.close()
    timings = timings or {}
    return {"text": text, "ttft": ttft, "predicted": timings.get("predicted_n", 0),
            "cached": timings.get("cache_n", 0), "prompt": timings.get("prompt_n", 0)}


def run_chats(port: int, clients: int, turns: int, max_tokens: int, deadline: float) -> dict[str, Any]:
    results: list[list[dict[str, Any]]] = [[] for _ in range(clients)]
    errors: list[str] = []

    def chat(i: int) -> None:
        history = [{"role": "system", "content": SYSTEM}]
        for t in range(turns):
            if time.monotonic() > deadline:
                errors.append(f"client {i}: out of time at turn {t}")
                return
            history.append({"role": "user", "content": f"I am visitor {i}. Tell me one fact about "
                                                       f"{TOPICS[(i * 3 + t) % len(TOPICS)]}."})
            try:
                turn = stream_turn(port, history, max_tokens, timeout=max(1.0, deadline - time.monotonic()))
            except Exception as exc:   # recorded, the chat ends
                errors.append(f"client {i} turn {t}: {exc}")
                return
            results[i].append(turn)
            history.append({"role": "assistant", "content": turn["text"]})

    threads = [threading.Thread(target=chat, args=(i,), daemon=True) for i in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(1.0, deadline - time.monotonic()))
    wall = time.perf_counter() - start
    turns_done = [t for chat in results for t in chat]
    first = [chat[0]["ttft"] for chat in results if chat and chat[0]["ttft"] is not None]
    later = [t["ttft"] for chat in results for t in chat[1:] if t["ttft"] is not None]
    tokens = sum(t["predicted"] for t in turns_done)
    return {"wall_s": round(wall, 2), "turns": len(turns_done), "tokens": tokens,
            "tokens_per_s": round(tokens / wall, 2) if wall else 0.0,
            "ttft_first_median_s": round(statistics.median(first), 3) if first else None,
            "ttft_later_median_s": round(statistics.median(later), 3) if later else None,
            "ttft_later_p90_s": round(statistics.quantiles(later, n=10)[-1], 3) if len(later) >= 10 else None,
            "prompt_evaluated": sum(t["prompt"] for t in turns_done),
            "cached_tokens": sum(t["cached"] for t in turns_done), "errors": errors}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="GGUF file (default: the bundled SmolLM2)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--threads", type=int, default=2, help="threads in all (each replica gets its share)")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--slot-ctx", type=int, default=1024, help="context positions per slot")
    parser.add_argument("--budget", type=float, default=1500.0, help="seconds for the whole run")
    parser.add_argument("--setups", nargs="+", default=["single", "ray-prefix", "ray-pow2"])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.model is None:
        from llamact.models import smollm2_path
        args.model = str(smollm2_path())
    end = time.monotonic() + args.budget
    per_replica_slots = max(1, args.clients // args.replicas)
    setups = {
        "single": ["--threads", str(args.threads), "--parallel", str(args.clients),
                   "--ctx-size", str(args.slot_ctx * args.clients)],
        **{f"ray-{router}": ["--threads", str(max(1, args.threads // args.replicas)), "--parallel",
                             str(per_replica_slots), "--ctx-size", str(args.slot_ctx * per_replica_slots), "--ray",
                             "--ray-replicas", str(args.replicas), "--ray-router", router]
           for router in ("prefix", "pow2")},
    }
    report: dict[str, Any] = {"clients": args.clients, "turns": args.turns, "max_tokens": args.max_tokens,
                              "threads": args.threads, "replicas": args.replicas, "cores": os.cpu_count(),
                              "setups": {}}
    for name in args.setups:
        if time.monotonic() > end - 60:
            print(f"{name}: skipped, out of time", flush=True)
            continue
        load_before = os.getloadavg()
        server = Server(["--model", args.model, *setups[name]], start_timeout=min(300.0, end - time.monotonic()))
        try:
            stream_turn(server.port, [{"role": "user", "content": "Hi"}], 4, timeout=120)   # warm-up
            result = run_chats(server.port, args.clients, args.turns, args.max_tokens, end)
        finally:
            server.stop()
        result["load_before"] = [round(x, 2) for x in load_before]
        result["load_after"] = [round(x, 2) for x in os.getloadavg()]
        report["setups"][name] = result
        print(f"{name}: {json.dumps(result)}", flush=True)
    runs = report["setups"]
    if "single" in runs and "ray-prefix" in runs and runs["single"]["tokens_per_s"]:
        report["throughput_ratio_ray_prefix_over_single"] = round(
            runs["ray-prefix"]["tokens_per_s"] / runs["single"]["tokens_per_s"], 3)
    if "ray-prefix" in runs and "ray-pow2" in runs and runs["ray-pow2"]["ttft_later_median_s"]:
        report["ttft_later_ratio_prefix_over_pow2"] = round(
            runs["ray-prefix"]["ttft_later_median_s"] / runs["ray-pow2"]["ttft_later_median_s"], 3)
    print(json.dumps({k: v for k, v in report.items() if k != "setups"}, indent=1))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
