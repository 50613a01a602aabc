#!/usr/bin/env python3
"""Time to first token of the next turn of a 10-turn chat: llamact with the prompt cache, without
it, and llama-cpp-python 0.3.36 both ways, on the same model and the same prompt tokens.

The chat: a system prompt and ten exchanges (fixed texts), then a question (turn 1), the model's
reply to it (generated once, greedily, by llamact), then a new question (turn 2). Before each timed
request the context is primed as turn 1 leaves it: its prompt and reply evaluated, the reply's end
token not (a generation stops on it without decoding it). The timed request is turn 2:

* ``cache``: llamact reuses the primed KV cache for the common prefix and evaluates the new turn;
* ``no cache``: ``cache_prompt=False``, the whole prompt is evaluated;
* the same two for llama-cpp-python (its ``Llama.generate`` reuses the longest common prefix of
  what it evaluated; ``reset()`` first makes it evaluate everything).

Time to first token = from the call to the first generated token (greedy, one token), measured
two ways for llamact: ``engine.generate(tokens)`` (token ids in, as for the peer) and
``engine.create(messages)`` (the chat path: template, tokenize, prompt, first chunk). The peer
gets the same token ids (``Llama.generate``). Same threads, context size, n_batch and n_ubatch;
flash attention as each library defaults (llamact: llama.cpp's auto, on for CPU; llama-cpp-python:
off) unless ``--flash-attn`` says otherwise.

llama-cpp-python runs in its own process (its own libllama never meets llamact's) from its own
venv, ``~/.cache/llamact/venv-peer`` by default, which ``scripts/test.sh`` makes (``llamact_peer_setup``
in ``scripts/_env.sh``: the version pinned in pyproject.toml's ``[tool.llamact.peer]``, built natively
without ggml's AMX kernels as llamact is; it compiles llama.cpp, ~10 minutes on two cores). Without
it the peer rows are skipped and the script says so. Requests are interleaved (one of each per
repetition, order rotated) so that machine noise hits all alike; rows are medians with spread =
(max - min) / median; repetitions during which other processes used >= 10% of the machine are left
out when enough quiet ones exist.

    cd /tmp && python /path/to/scripts/bench/bench_prompt_cache.py [--reps 9] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cpu_meter import CpuMeter  # this folder's (the script's directory is on sys.path)

SYSTEM = "You are a helpful assistant. Answer in one or two sentences."
HISTORY = [
    ("What is the capital of France?", "The capital of France is Paris."),
    ("How many legs does a spider have?", "A spider has eight legs."),
    ("What is the boiling point of water at sea level?", "Water boils at 100 degrees Celsius at sea level."),
    ("Who wrote Romeo and Juliet?", "William Shakespeare wrote Romeo and Juliet."),
    ("What is the largest planet in our solar system?", "Jupiter is the largest planet in our solar system."),
    ("What gas do plants absorb from the air?", "Plants absorb carbon dioxide from the air."),
    ("How many continents are there?", "There are seven continents."),
    ("What is the square root of 81?", "The square root of 81 is 9."),
    ("Which ocean is the largest?", "The Pacific Ocean is the largest."),
    ("What language is spoken in Brazil?", "Portuguese is the main language spoken in Brazil."),
]
TURN_1 = "Can you name three primary colors?"
TURN_2 = "Which of those is the color of the sky?"
CLEAN_BELOW = 0.10


def _peer_version() -> str:
    """The pinned peer version: pyproject.toml's [tool.llamact.peer] (read without tomllib, 3.11+)."""
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    match = re.search(r'^\[tool\.llamact\.peer\]$[^\[]*?^version = "([^"]+)"', text, re.M)
    assert match, "pyproject.toml has no [tool.llamact.peer] version"
    return match.group(1)


PEER_VERSION = _peer_version()
ROWS = ("llamact generate", "llamact create", "llama-cpp-python")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2", help="smollm2 (default), gemma3, or a path to a GGUF")
    ap.add_argument("--threads", "-t", type=int, default=2)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--ubatch", type=int, default=512)
    ap.add_argument("--flash-attn", choices=("default", "on", "off"), default="default")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--max-seconds", type=float, default=300, help="stop adding repetitions for quiet ones after this")
    ap.add_argument("--peer-venv", default=str(Path.home() / ".cache/llamact/venv-peer"))
    ap.add_argument("--json", help="write every sample and the summary here")
    return ap.parse_args(argv)


def resolve_model(name: str) -> Path:
    from llamact.models import gemma3_path, smollm2_path

    if name in ("smollm2", "gemma3"):
        return smollm2_path() if name == "smollm2" else gemma3_path()
    path = Path(name).expanduser()
    if not path.is_file():
        sys.exit(f"model not found: {name} (use smollm2, gemma3 or a GGUF path)")
    return path


# ----------------------------------------------------------------------------------------------
# the peer: llama-cpp-python in its own process, driven over stdin/stdout (JSON lines)

PEER_WORKER = r"""
import json, sys, time
import llama_cpp
cfg = json.loads(sys.stdin.readline())
kwargs = dict(model_path=cfg["model"], n_ctx=cfg["n_ctx"], n_batch=cfg["n_batch"], n_ubatch=cfg["n_ubatch"],
              n_threads=cfg["threads"], n_threads_batch=cfg["threads"], verbose=False)
if cfg["flash_attn"] is not None:
    kwargs["flash_attn"] = cfg["flash_attn"]
llm = llama_cpp.Llama(**kwargs)
print(json.dumps({"version": llama_cpp.__version__}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "tokenize":
        print(json.dumps({"ok": llm.tokenize(req["text"].encode(), add_bos=True, special=True)}), flush=True)
        continue
    llm.reset()
    llm.eval(req["prime"])                    # the context as turn 1 left it
    if not req["cache"]:
        llm.reset()                           # forget it: evaluate the whole prompt
    t0 = time.perf_counter()
    gen = llm.generate(req["prompt"], top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0)
    token = next(gen)
    dt = time.perf_counter() - t0
    gen.close()
    print(json.dumps({"ok": dt, "token": int(token), "n_eval": len(req["prompt"])}), flush=True)
"""


class Peer:
    def __init__(self, venv: Path, model: Path, args: argparse.Namespace, flash_attn: bool | None) -> None:
        python = venv / "bin" / "python"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
        self.proc = subprocess.Popen([str(python), "-c", PEER_WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)
        cfg = {"model": str(model), "n_ctx": args.n_ctx, "n_batch": args.batch, "n_ubatch": args.ubatch,
               "threads": args.threads, "flash_attn": flash_attn}
        self.version = self._ask(cfg)["version"]

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"llama-cpp-python's worker exited (code {self.proc.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def tokenize(self, text: str) -> list[int]:
        tokens: list[int] = self._ask({"op": "tokenize", "text": text})["ok"]
        return tokens

    def ttft(self, prime: list[int], prompt: list[int], cache: bool) -> tuple[float, int]:
        answer = self._ask({"op": "ttft", "prime": prime, "prompt": prompt, "cache": cache})
        return float(answer["ok"]), int(answer["token"])

    def cpu_seconds(self) -> float:
        try:
            with open(f"/proc/{self.proc.pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            return 0.0

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def find_peer(venv: Path) -> str | None:
    """Why the peer cannot run, or None when it can."""
    python = venv / "bin" / "python"
    if not python.exists():
        return f"no venv at {venv}"
    proc = subprocess.run([str(python), "-c", "import llama_cpp; print(llama_cpp.__version__)"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return f"llama_cpp does not import in {venv}: {proc.stderr.strip().splitlines()[-1:]}"
    if proc.stdout.strip() != PEER_VERSION:
        return f"{venv} has llama-cpp-python {proc.stdout.strip()}, not {PEER_VERSION}"
    return None


# ----------------------------------------------------------------------------------------------
# the chat and the measurements


def build_chat(engine: Any, params_cls: Any) -> tuple[list[dict[str, str]], list[int], list[int], str]:
    """The turn-2 messages, the primed tokens (turn 1's prompt and reply), turn 2's prompt tokens
    and the reply."""
    messages: list[dict[str, str]] = [{"role": "system", "content": SYSTEM}]
    for question, answer in HISTORY:
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    messages.append({"role": "user", "content": TURN_1})
    prompt_1 = engine.chat_template(messages).prompt
    reply = engine.complete_chat(messages, params=params_cls(greedy=True, max_tokens=48)).message.content
    messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": TURN_2}]
    prompt_2 = engine.chat_template(messages).prompt
    primed_text = prompt_1 + reply
    if not prompt_2.startswith(primed_text):
        sys.exit("the template does not render turn 2 as turn 1 plus the reply; this benchmark needs it")
    primed = engine.tokenize(primed_text)
    tokens_2 = engine.tokenize(prompt_2)
    if tokens_2[: len(primed)] != primed:
        sys.exit("turn 1 and its reply do not tokenize as the start of turn 2; this benchmark needs it")
    return messages, primed, tokens_2, reply


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from llamact import GenerationParams, LlamaEngine, ModelParams, build_info

    flash = {"default": None, "on": True, "off": False}[args.flash_attn]
    model = resolve_model(args.model)
    engine = LlamaEngine.load(model, ModelParams(n_ctx=args.n_ctx, n_batch=args.batch, n_ubatch=args.ubatch,
                                                 n_threads=args.threads, n_threads_batch=args.threads,
                                                 flash_attn=flash))
    messages, primed, tokens_2, reply = build_chat(engine, GenerationParams)
    n_new = len(tokens_2) - len(primed)
    print(f"model {model.name}; {args.threads} threads, n_ctx {args.n_ctx}, n_batch {args.batch}, "
          f"n_ubatch {args.ubatch}, flash attention {args.flash_attn}")
    print(f"turn 2: {len(tokens_2)} prompt tokens, {len(primed)} of them from turn 1 and its reply "
          f"({len(reply)} characters), {n_new} new")

    peer_problem = find_peer(Path(args.peer_venv))
    peer: Peer | None = None
    if peer_problem is None:
        # the peer's flash attention default is off; llamact's is llama.cpp's auto
        peer = Peer(Path(args.peer_venv), model, args, flash)
        if peer.tokenize(engine.detokenize(tokens_2)) != tokens_2:
            print("note: llama-cpp-python tokenizes the prompt differently; it is given llamact's token ids")
        print(f"peer: llama-cpp-python {peer.version} ({args.peer_venv})")
    else:
        print(f"peer: skipped ({peer_problem})")

    cache_on = GenerationParams(greedy=True, max_tokens=1)
    cache_off = GenerationParams(greedy=True, max_tokens=1, cache_prompt=False)

    def prime() -> None:
        engine.complete(primed, cache_on)  # the context as turn 1 leaves it (primed, its last token sampled from)

    def llamact_generate(cache: bool) -> tuple[float, int]:
        prime()
        t0 = time.perf_counter()
        stream = engine.generate(tokens_2, cache_on if cache else cache_off)
        first = next(stream)
        dt = time.perf_counter() - t0
        stream.close()
        if cache and stream.n_cached != len(primed):
            sys.exit(f"expected {len(primed)} cached tokens, got {stream.n_cached}")
        return dt, int(first.token if first.token is not None else -1)

    def llamact_create(cache: bool) -> tuple[float, int]:
        prime()
        t0 = time.perf_counter()
        stream = engine.create(messages, params=cache_on if cache else cache_off)
        next(stream)  # the first chunk comes with the first generated token
        dt = time.perf_counter() - t0
        stream.close()
        return dt, -1

    def peer_generate(cache: bool) -> tuple[float, int]:
        assert peer is not None
        return peer.ttft(primed, tokens_2, cache)

    runners = {"llamact generate": llamact_generate, "llamact create": llamact_create}
    if peer is not None:
        runners["llama-cpp-python"] = peer_generate
    cases = [(row, cache) for row in runners for cache in (True, False)]
    for row, cache in cases:  # warm-up: pages, threads, caches
        runners[row](cache)

    meter = CpuMeter(peer.cpu_seconds if peer is not None else None)
    samples: dict[tuple[str, bool], list[tuple[float, float]]] = {case: [] for case in cases}
    first_tokens: dict[tuple[str, bool], set[int]] = {case: set() for case in cases}
    started = time.perf_counter()
    rep = 0
    while True:
        order = cases[rep % len(cases):] + cases[: rep % len(cases)]
        if rep % 2:
            order.reverse()
        for case in order:
            mark = meter.start()
            dt, token = runners[case[0]](case[1])
            samples[case].append((dt, meter.others(mark)))
            first_tokens[case].add(token)
            time.sleep(0.05)
        rep += 1
        quiet = min(sum(1 for _, o in xs if o < CLEAN_BELOW) for xs in samples.values())
        if rep >= args.reps and (quiet >= args.reps or rep >= 3 * args.reps
                                 or time.perf_counter() - started > args.max_seconds):
            break
    if peer is not None:
        peer.close()
    engine.close()

    def kept(case: tuple[str, bool]) -> tuple[list[float], str]:
        """The samples a row uses, and how many: quiet/run, or "busy" when too few were quiet."""
        xs = samples[case]
        quiet = [dt for dt, other in xs if other < CLEAN_BELOW]
        if len(quiet) >= 2:
            return quiet, f"{len(quiet)}/{len(xs)}"
        return [dt for dt, _ in xs], f"busy {len(xs)}"

    summary: dict[str, Any] = {}
    print("\nturn-2 time to first token, ms (median of quiet repetitions; spread = (max-min)/median)")
    print(f"{'':22} {'cache':>10} {'spread':>7} {'no cache':>10} {'spread':>7} {'speed-up':>9}  reps")
    for row in runners:
        (on, n_on), (off, n_off) = kept((row, True)), kept((row, False))
        m_on, m_off = statistics.median(on), statistics.median(off)
        s_on, s_off = (max(on) - min(on)) / m_on, (max(off) - min(off)) / m_off
        summary[row] = {"cache_ms": 1e3 * m_on, "no_cache_ms": 1e3 * m_off, "spread_cache": s_on,
                        "spread_no_cache": s_off, "speedup": m_off / m_on, "reps_used": [n_on, n_off]}
        print(f"{row:22} {1e3 * m_on:10.1f} {s_on:7.0%} {1e3 * m_off:10.1f} {s_off:7.0%} {m_off / m_on:8.2f}x"
              f"  {n_on}, {n_off}")
    if peer is not None:
        print("\nllamact generate vs llama-cpp-python (peer ms / llamact ms: above 1 = llamact faster)")
        for cache, key in ((True, "cache_ms"), (False, "no_cache_ms")):
            ratio = summary["llama-cpp-python"][key] / summary["llamact generate"][key]
            summary[f"vs_peer_{'cache' if cache else 'no_cache'}"] = ratio
            print(f"  {'cache' if cache else 'no cache':9} {ratio:.2f}x")
    same = {row: len(first_tokens[(row, True)] | first_tokens[(row, False)]) == 1 for row in runners
            if row != "llamact create"}
    # informational: logits depend on how the prompt was batched (tests/engine/test_prompt_cache.py)
    print(f"\nfirst token the same with and without the cache: {same}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "model": str(model), "args": vars(args), "build": build_info(), "machine": platform.machine(),
            "load": os.getloadavg(), "n_prompt": len(tokens_2), "n_cached": len(primed),
            "samples": {f"{row}|{'cache' if c else 'no_cache'}": xs for (row, c), xs in samples.items()},
            "summary": summary,
        }, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
