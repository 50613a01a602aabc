"""Aggregate generation throughput and time to first token of OpenAI-compatible servers under
concurrent streaming clients: ``llamact serve --parallel N`` against upstream's ``llama-server
--parallel N`` (built from the same vendored tree), and optionally llama-cpp-python's server.

    python scripts/bench/bench_server.py                         # SmolLM2, 1/4/8 clients, 64 tokens each
    python scripts/bench/bench_server.py --clients 1 8 --requests 2 --threads 2 --json out.json
    python scripts/bench/bench_server.py --llama-cpp-python none     # without the peer (its venv: below)

Each client streams ``--requests`` chat completions one after the other (different questions, greedy,
``max_tokens`` tokens with the end-of-generation tokens banned so that every answer has the same
length); all clients start together. Throughput = completion tokens (from the usage chunk) over the
wall time of the whole round; TTFT = time from sending a request to its first content event. The
servers run side by side (same model, context, threads and slots) and take turns: for each
concurrency, ``--repeats`` rounds each, in rotating order, the median kept. Ratios are llamact over
the other server in the same run. Numbers on a busy machine are noisy: run it on quiet cores.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

HOST = "127.0.0.1"
# the peer's venv, as scripts/_env.sh makes it (plus: pip install "llama-cpp-python[server]")
PEER_PYTHON = Path.home() / ".cache/llamact/venv-peer/bin/python"
QUESTIONS = ["Say hello.", "What is 2+2?", "Name a color.", "Tell me a fact about cats.", "What is the sun?",
             "Name a fruit.", "Count to five.", "What is water?"]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def wait_ready(port: int, process: subprocess.Popen[bytes], path: str = "/health", timeout: float = 300) -> None:
    """Until ``GET path`` answers 200 (llama-cpp-python's server has no /health: /v1/models)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode})")
        try:
            conn = http.client.HTTPConnection(HOST, port, timeout=5)
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the server did not become ready")


def start(command: list[str], port: int, ready_path: str = "/health") -> subprocess.Popen[bytes]:
    log = tempfile.TemporaryFile()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        wait_ready(port, process, ready_path)
    except BaseException:
        process.kill()
        log.seek(0)
        sys.stderr.write(log.read()[-3000:].decode("utf-8", "replace"))
        raise
    return process


def banned_tokens(model: Path) -> dict[str, float]:
    """The end-of-generation tokens, banned (OpenAI's logit_bias form, which every server reads), so
    that every answer has exactly max_tokens tokens. Token ids from the GGUF, tokenized here."""
    from llamact import LlamaEngine, ModelParams

    with LlamaEngine.load(model, ModelParams(n_ctx=256, n_threads=1)) as engine:
        tokens = engine.tokenize("<|im_end|><|endoftext|>", add_special=False, parse_special=True)
    return {str(t): -100.0 for t in tokens}


def stream_one(port: int, question: str, max_tokens: int, bias: dict[str, float]) -> tuple[int, float, int]:
    """(completion tokens, seconds to the first content event, prompt tokens taken from the server's
    cache, -1 when it does not say) of one streamed request. The tokens come
    from the usage chunk. A server that sends none (llama-cpp-python) must end with ``finish_reason``
    "length", which says the answer reached max_tokens (its content events cannot count tokens: a
    token that completes no character, or a stop string's start held back, makes no event). Either way
    the answer must have max_tokens tokens (the end-of-generation tokens are banned): a request cut
    short is an error, not a fast answer."""
    body = {"messages": [{"role": "user", "content": question}], "stream": True, "max_tokens": max_tokens,
            "temperature": 0, "stream_options": {"include_usage": True}, "logit_bias": bias}
    conn = http.client.HTTPConnection(HOST, port, timeout=600)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {response.read()[:300]!r}")
    ttft, tokens, cached, finish = -1.0, -1, -1, None
    for raw in response:
        line = raw.decode("utf-8").strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[6:])
        for choice in event.get("choices", []):
            if choice.get("delta", {}).get("content") and ttft < 0:
                ttft = time.perf_counter() - t0
            finish = choice.get("finish_reason") or finish
        if event.get("usage"):
            tokens = event["usage"]["completion_tokens"]
            cached = event["usage"].get("prompt_tokens_details", {}).get("cached_tokens", -1)
    conn.close()
    if tokens < 0 and finish == "length":   # no usage: the finish reason vouches for max_tokens
        tokens = max_tokens
    if tokens != max_tokens:
        raise RuntimeError(f"{tokens} completion tokens, not {max_tokens}: the request was cut short")
    return tokens, ttft, cached


def round_of(port: int, clients: int, requests: int, max_tokens: int, bias: dict[str, float]) -> dict[str, float]:
    results: list[tuple[int, float, int]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def client(i: int) -> None:
        barrier.wait()
        for r in range(requests):
            out = stream_one(port, QUESTIONS[(i + r) % len(QUESTIONS)], max_tokens, bias)
            with lock:
                results.append(out)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    total = sum(n for n, _, _ in results)
    return {"tokens": total, "wall_s": wall, "tok_per_s": total / wall,
            "ttft_ms_median": 1e3 * statistics.median(t for _, t, _ in results),
            "cached_tokens_median": statistics.median(c for _, _, c in results)}


def _peer_server_ready(args: argparse.Namespace) -> bool:
    """False (and why, with the fix) when the peer's venv lacks llama-cpp-python's server extras."""
    probe = subprocess.run([args.llama_cpp_python, "-c", "import llama_cpp, llama_cpp.server.app, uvicorn"],
                           capture_output=True, text=True)
    if probe.returncode == 0:
        return True
    reason = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else "no error text"
    print(f"llama-cpp-python's server is left out: {args.llama_cpp_python} cannot import it ({reason}); "
          f"install it there with {args.llama_cpp_python} -m pip install 'llama-cpp-python[server]==<its version>'",
          file=sys.stderr)
    return False


def servers(args: argparse.Namespace, model: Path) -> dict[str, Callable[[int], list[str]]]:
    from llamact.parity.llama_server import find_llama_server

    common = ["--ctx-size", str(args.ctx_size), "--threads", str(args.threads)]
    out: dict[str, Callable[[int], list[str]]] = {
        "llamact": lambda port: [sys.executable, "-m", "llamact", "serve", "--model", str(model), "--host", HOST,
                                 "--port", str(port), "--parallel", str(args.parallel), *common],
        "llama-server": lambda port: [str(find_llama_server()), "--model", str(model), "--host", HOST,
                                      "--port", str(port), "--parallel", str(args.parallel), "--jinja",
                                      "--no-webui", "--no-warmup", "--threads-batch", str(args.threads), *common],
    }
    if args.llama_cpp_python != "none" and Path(args.llama_cpp_python).exists() and _peer_server_ready(args):
        # one model, one context: it serves one request at a time (its server holds a lock per
        # request); --interrupt_requests False: else a new request ends the one running
        out["llama-cpp-python"] = lambda port: [args.llama_cpp_python, "-m", "llama_cpp.server", "--model", str(model),
                                                "--host", HOST, "--port", str(port), "--n_ctx", str(args.ctx_size),
                                                "--n_threads", str(args.threads),
                                                "--n_threads_batch", str(args.threads),
                                                "--interrupt_requests", "False"]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, help="GGUF file (default: the bundled SmolLM2)")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--requests", type=int, default=2, help="requests per client per round")
    p.add_argument("--repeats", type=int, default=3, help="rounds per server and concurrency (the median is kept)")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--parallel", type=int, default=8)
    p.add_argument("--ctx-size", type=int, default=8192)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--llama-cpp-python", default=str(PEER_PYTHON),
                   help="a python with llama-cpp-python[server] installed, in its own venv (default: %(default)s, "
                        "used when it exists; 'none' to leave the peer out)")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    from llamact.models import smollm2_path

    model = args.model or smollm2_path()
    bias = banned_tokens(model)
    load_start = os.getloadavg()   # the machine's load, recorded with the results (a shared machine is noisy)
    ports: dict[str, int] = {}
    processes: list[subprocess.Popen[bytes]] = []
    try:
        # all servers up at once (an idle one waits, using no CPU); their rounds alternate, so drift in
        # the machine's speed falls on each of them alike; each figure is the median of --repeats rounds
        for name, command in servers(args, model).items():
            port = free_port()
            processes.append(start(command(port), port, "/v1/models" if name == "llama-cpp-python" else "/health"))
            stream_one(port, QUESTIONS[0], 4, bias)   # warm-up
            ports[name] = port
        rounds: dict[str, dict[int, list[dict[str, float]]]] = {name: {c: [] for c in args.clients} for name in ports}
        names = list(ports)
        for clients in args.clients:
            for rep in range(args.repeats):
                for name in names[rep % len(names):] + names[:rep % len(names)]:
                    rounds[name][clients].append(round_of(ports[name], clients, args.requests, args.max_tokens, bias))
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
    table = {name: {c: {key: statistics.median(r[key] for r in runs) for key in runs[0]}
                    for c, runs in per_clients.items()} for name, per_clients in rounds.items()}
    for name, per_clients in table.items():
        for clients, r in per_clients.items():
            print(f"{name:17} clients={clients:2}  {r['tok_per_s']:7.1f} tok/s  "
                  f"TTFT median {r['ttft_ms_median']:7.0f} ms  cached prompt tokens {r['cached_tokens_median']:4.0f}  "
                  f"(median of {args.repeats} rounds of "
                  f"{clients * args.requests * args.max_tokens} tokens)")
    print()
    for other in (n for n in table if n != "llamact"):
        for clients in args.clients:
            ratio = table["llamact"][clients]["tok_per_s"] / table[other][clients]["tok_per_s"]
            print(f"llamact / {other:17} clients={clients:2}: {ratio:.2f}x tok/s")
    if args.json:
        machine = {"cpu_count": os.cpu_count(), "loadavg_start": load_start, "loadavg_end": os.getloadavg()}
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "machine": machine,
                                         "results": table}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
