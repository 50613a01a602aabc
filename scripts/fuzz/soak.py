#!/usr/bin/env python3
"""A soak with faults for ``llamact serve`` (issue 26), outside CI: T minutes of mixed traffic from a
few concurrent clients on 127.0.0.1 -- chats (streamed and not), raw completions, streams dropped after
their first event, requests abandoned before their answer, hostile bodies from ``tests/fuzz_bodies.py``,
health and metrics probes -- while the server is stopped with SIGTERM and started again every few
minutes (its exit must come within ``--exit-limit`` seconds; it is killed otherwise, and counted).

Figures printed and saved as JSON (``--report``): requests and failures by kind (5xx, hangs, refused
connections outside a restart, a normal request not answered 200, the server dying by itself, the
server killed for passing ``fb.RSS_LIMIT`` during a request), RSS
over time (start, end and max of each run between restarts), the SIGTERM exit times and start times,
the tracebacks in the server's log by their last line, and ``requests_processing`` once idle at the
end. Bounded: it stops by itself after ``--minutes``; loopback only; the server is stopped at the end.

    source ~/.cache/llamact/venv-py311/bin/activate     # the venv scripts/test.sh set up
    python scripts/fuzz/soak.py --minutes 30 --restart-every 300 --clients 4
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from llamact.json_types import Json

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

import fuzz_bodies as fb  # noqa: E402
from hypothesis import given, seed, settings  # noqa: E402
from server_live import LiveServer  # noqa: E402

HOST = fb.HOST
CHAT = {"messages": [{"role": "user", "content": "Tell me a short story."}], "max_tokens": 16, "temperature": 0.7}
RAW = {"prompt": "Once upon a time", "max_tokens": 16}


def hostile_pool(n: int, rng_seed: int) -> list[fb.Case]:
    pool: list[fb.Case] = []

    def keep(case: fb.Case) -> None:
        pool.append(case)

    test = settings(settings.get_profile("fuzz-long"), max_examples=n)(given(fb.all_cases())(keep))
    seed(rng_seed)(test)()
    return pool


class Soak:
    def __init__(self, args: argparse.Namespace, model: Path) -> None:
        self.args = args
        self.live = LiveServer("--model", str(model), "--threads", str(args.threads), "--ctx-size",
                               str(args.ctx_size), "--parallel", str(args.parallel), "--n-predict", "16",
                               "--cache-ram", str(args.cache_ram))
        self.lock = threading.Lock()
        self.restarting = threading.Event()
        self.stop_event = threading.Event()
        self.counts: collections.Counter[str] = collections.Counter()
        self.failures: collections.Counter[str] = collections.Counter()
        self.failure_examples: dict[str, list[str]] = {}
        self.rss: list[tuple[float, int, int]] = []   # (time, run, bytes)
        self.exits: list[Json] = []
        self.starts: list[float] = []
        self.run_index = 0
        self.rss_killed: set[int] = set()   # the runs a watch killed (not a death of their own)
        self.started = time.monotonic()
        self.pool = hostile_pool(args.hostile_pool, args.seed)

    # -- bookkeeping ------------------------------------------------------------------------------

    def fail(self, kind: str, detail: str) -> None:
        with self.lock:
            self.failures[kind] += 1
            examples = self.failure_examples.setdefault(kind, [])
            if len(examples) < 5:
                examples.append(f"[{time.monotonic() - self.started:.0f}s] {detail[:1500]}")

    def count(self, kind: str) -> None:
        with self.lock:
            self.counts[kind] += 1

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.live._process

    # -- traffic ------------------------------------------------------------------------------------

    def request(self, kind: str, case: fb.Case, normal: bool) -> None:
        port, run = self.live.port, self.run_index
        process = self.process
        with fb.RssWatch(process.pid if process is not None else None) as watch:
            outcome = fb.send(port, case, self.args.request_limit)
        self.count(kind)
        if watch.killed:
            self.rss_killed.add(run)
            self.fail("rss-kill", f"{kind}: RSS above {fb.RSS_LIMIT >> 20} MiB, killed; {case.describe(1000)}")
            return
        if self.restarting.is_set() or run != self.run_index:
            self.count("during-restart")
            return
        if run in self.rss_killed:   # another client's request had it killed
            self.count("after-rss-kill")
            return
        if outcome.status is None:
            process = self.process
            if process is not None and process.poll() is not None:
                self.fail("server-died", f"{kind}: exit {process.returncode} after {case.describe(1000)}")
            elif outcome.error == "timeout":
                self.fail("hang", f"{kind}: {case.describe(1000)}")
            else:
                self.fail("no-answer", f"{kind}: {outcome.error} for {case.describe(1000)}")
        elif fb.problems(case, outcome):
            self.fail("5xx", f"{kind}: {outcome.describe(300)} for {case.describe(1000)}")
        elif normal and outcome.status != 200:
            self.fail("normal-not-200", f"{kind}: {outcome.describe(300)}")

    def abandon(self, kind: str, body: Json, path: str, stream: bool) -> None:
        """Send a request and leave: after the first event (a stream) or before the answer."""
        conn = http.client.HTTPConnection(HOST, self.live.port, timeout=self.args.request_limit)
        try:
            conn.request("POST", path, body=json.dumps({**body, "stream": stream, "max_tokens": 64}),
                         headers={"Content-Type": "application/json"})
            if stream:
                response = conn.getresponse()
                response.fp.readline()
            else:
                time.sleep(random.uniform(0.0, 0.5))
            self.count(kind)
        except (OSError, http.client.HTTPException) as exc:
            self.count(kind)
            if not self.restarting.is_set():
                self.fail("no-answer", f"{kind}: {type(exc).__name__}: {exc}")
        finally:
            conn.close()

    def client(self, index: int) -> None:
        rng = random.Random(self.args.seed * 1000 + index)
        while not self.stop_event.is_set():
            if self.restarting.is_set():
                time.sleep(0.1)
                continue
            action = rng.choices(["chat", "chat-stream", "raw", "raw-stream", "drop-stream", "abandon", "hostile",
                                  "probe"], weights=[3, 3, 2, 2, 2, 2, 4, 1])[0]
            if action in ("chat", "chat-stream"):
                body = fb.encode({**CHAT, "stream": action == "chat-stream"})
                self.request(action, fb.Case("POST", "/v1/chat/completions", body, kind=action), True)
            elif action in ("raw", "raw-stream"):
                body = fb.encode({**RAW, "stream": action == "raw-stream"})
                self.request(action, fb.Case("POST", "/v1/completions", body, kind=action), True)
            elif action == "drop-stream":
                path = rng.choice(["/v1/chat/completions", "/v1/completions"])
                self.abandon(action, CHAT if "chat" in path else RAW, path, True)
            elif action == "abandon":
                path = rng.choice(["/v1/chat/completions", "/v1/completions"])
                self.abandon(action, CHAT if "chat" in path else RAW, path, False)
            elif action == "hostile":
                self.request(action, rng.choice(self.pool), False)
            else:
                path = rng.choice(["/health", "/metrics", "/props", "/v1/models"])
                self.request(action, fb.Case("GET", path, None, {}, "probe"), True)

    # -- the server ---------------------------------------------------------------------------------

    def sample_rss(self) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            try:
                self.rss.append((round(time.monotonic() - self.started, 1), self.run_index,
                                 fb.rss_bytes(process.pid)))
            except OSError:
                pass

    def start_server(self) -> None:
        t0 = time.monotonic()
        self.live.start()
        self.starts.append(round(time.monotonic() - t0, 2))
        self.run_index += 1

    def sigterm_cycle(self) -> None:
        self.restarting.set()
        process = self.process
        assert process is not None
        t0 = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=self.args.exit_limit)
            self.exits.append({"seconds": round(time.monotonic() - t0, 2), "code": code})
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
            self.exits.append({"seconds": None, "code": "killed after the limit"})
            self.fail("sigterm-hang", f"no exit {self.args.exit_limit} s after SIGTERM; killed")
        self.live._process = None
        self.start_server()
        time.sleep(0.5)
        self.restarting.clear()

    def run(self) -> Json:
        self.start_server()
        threads = [threading.Thread(target=self.client, args=(i,), daemon=True) for i in range(self.args.clients)]
        for thread in threads:
            thread.start()
        deadline = self.started + self.args.minutes * 60
        next_restart = time.monotonic() + self.args.restart_every
        next_print = time.monotonic() + 30
        try:
            while time.monotonic() < deadline:
                time.sleep(1.0)
                self.sample_rss()
                process = self.process
                if process is not None and process.poll() is not None and not self.restarting.is_set():
                    if self.run_index not in self.rss_killed:
                        self.fail("server-died", f"exit {process.returncode}; log:\n{self.live.log_tail(1500)}")
                    self.restarting.set()
                    self.live._process = None
                    self.start_server()
                    self.restarting.clear()
                if self.args.restart_every > 0 and time.monotonic() >= next_restart:
                    self.sigterm_cycle()
                    next_restart = time.monotonic() + self.args.restart_every
                if time.monotonic() >= next_print:
                    next_print += 30
                    print(f"[{time.monotonic() - self.started:5.0f}s] {sum(self.counts.values())} requests, "
                          f"failures {dict(self.failures)}, RSS {self.rss[-1][2] >> 20 if self.rss else 0} MiB",
                          flush=True)
            self.stop_event.set()
            for thread in threads:
                thread.join(timeout=self.args.request_limit + 5)
            processing = self.idle_processing()
            self.sample_rss()
            final_exit = self.final_stop()
        finally:
            self.stop_event.set()
            self.live.stop()
        return self.report(processing, final_exit)

    def idle_processing(self) -> float | None:
        time.sleep(2.0)
        outcome = fb.send(self.live.port, fb.Case("GET", "/metrics", None, {}, "probe"), 10.0)
        found = re.search(rb"^llamacpp:requests_processing (\S+)", outcome.body, re.M)
        value = float(found.group(1)) if found else None
        if value:
            self.fail("metrics-processing-stuck", f"requests_processing {value} on an idle server")
        return value

    def final_stop(self) -> Json:
        process = self.process
        if process is None or process.poll() is not None:
            return None
        t0 = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=self.args.exit_limit)
            return {"seconds": round(time.monotonic() - t0, 2), "code": code}
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
            self.fail("sigterm-hang", "no exit after the final SIGTERM (idle server); killed")
            return {"seconds": None, "code": "killed after the limit"}

    def tracebacks(self) -> dict[str, int]:
        log = self.live._log
        log.flush()
        log.seek(0)
        text = log.read().decode("utf-8", "replace")
        found: collections.Counter[str] = collections.Counter()
        for block in text.split("Traceback (most recent call last):")[1:]:
            lines = [line for line in block.splitlines() if line and not line.startswith((" ", "\t"))]
            found[re.sub(r"\d+", "N", lines[0])[:160] if lines else "?"] += 1
        return dict(found.most_common())

    def report(self, processing: float | None, final_exit: Json) -> Json:
        runs: dict[int, list[int]] = collections.defaultdict(list)
        for _t, run, rss in self.rss:
            runs[run].append(rss)
        return {
            "args": vars(self.args), "elapsed_s": round(time.monotonic() - self.started, 1),
            "requests": sum(self.counts.values()), "by_kind": dict(self.counts.most_common()),
            "failures": dict(self.failures), "failure_examples": self.failure_examples,
            "rss_mib": {"max": max((r for _t, _r, r in self.rss), default=0) >> 20,
                        "per_run": {run: {"start": v[0] >> 20, "end": v[-1] >> 20, "max": max(v) >> 20}
                                    for run, v in runs.items()}},
            "rss_samples": [(t, run, rss >> 20) for t, run, rss in self.rss[::5]],
            "sigterm_exits": self.exits, "final_exit": final_exit, "start_seconds": self.starts,
            "idle_requests_processing": processing, "server_log_tracebacks": self.tracebacks(),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--restart-every", type=float, default=300.0, help="seconds between SIGTERM cycles (0: none)")
    parser.add_argument("--exit-limit", type=float, default=20.0, help="seconds the server may take to exit")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--ctx-size", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache-ram", type=int, default=8192,
                        help="MiB of saved slot prompts (the server's default; RSS grows until it is full)")
    parser.add_argument("--request-limit", type=float, default=fb.REQUEST_LIMIT_S)
    parser.add_argument("--hostile-pool", type=int, default=300, help="hostile requests drawn at the start")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--model", default=None)
    parser.add_argument("--report", default="fuzz-soak.json")
    args = parser.parse_args(argv)
    from llamact.models import smollm2_path

    report = Soak(args, Path(args.model) if args.model else smollm2_path()).run()
    Path(args.report).write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    shown = {k: v for k, v in report.items() if k not in ("rss_samples", "args")}
    print(json.dumps(shown, indent=1, default=str))
    print(f"report: {args.report}")
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
