#!/usr/bin/env python3
"""A longer fuzzing campaign against ``llamact serve`` (issue 26), outside CI: the strategies of
``tests/fuzz_bodies.py`` (the same as ``tests/server/test_http_fuzz.py``) for N requests or T minutes,
whichever comes first, against a fresh server on 127.0.0.1; with ``--differential``, each request also
goes to upstream's llama-server at the pin (started as ``tests/server/test_wire_parity.py`` starts it,
the same model, slots, context and default token limit).

Figures printed and saved as JSON (``--report``): requests per route, per kind and per status class;
5xx answers, crashes (the server died; it is restarted), hangs (no whole answer within
``--request-limit``; the server is restarted so that a held slot does not stall what follows) and RSS
kills (the server is killed as soon as its RSS passes ``fb.RSS_LIMIT`` during a request, and
restarted), each with deduplicated examples; the server's largest RSS. In differential mode, each request whose two
status classes differ is listed: "llamact stricter" (llamact 4xx where llama-server answered 2xx,
5xx, crashed or hung: expected, counted by category) or "to report" (llamact 5xx, crash or hang, or
2xx where llama-server answered 4xx); llama-server's own crashes and hangs are counted (and it is
restarted). Everything runs on loopback; both servers are stopped at the end.

    source ~/.cache/llamact/venv-py311/bin/activate     # the venv scripts/test.sh set up
    python scripts/fuzz/campaign.py --minutes 30 [--differential] [--report fuzz-report.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from llamact.json_types import Json

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

import fuzz_bodies as fb  # noqa: E402
from hypothesis import given, seed, settings  # noqa: E402
from server_live import LiveServer  # noqa: E402

MAX_EXAMPLES_PER_KEY = 3
LLAMACT_ONLY = ("/template-details",)   # routes llama-server does not have (its 404 is no difference)


class Done(Exception):
    """Raised from an example once the time or the request count is spent: Hypothesis would otherwise
    go on generating (and skipping) examples up to its ``max_examples``."""


def server_args(args: argparse.Namespace) -> list[str]:
    return ["--threads", str(args.threads), "--ctx-size", str(args.ctx_size), "--parallel", str(args.parallel),
            "--n-predict", str(args.n_predict)]


class Target:
    """One server under fuzzing (llamact's or llama-server), restarted when it dies or hangs."""

    def __init__(self, name: str, make: Any) -> None:
        self.name = name
        self.make = make
        self.server: Any = None
        self.crashes = 0
        self.hangs = 0
        self.rss_kills = 0   # killed for passing fb.RSS_LIMIT during a request
        self.restarts = 0
        self.rss_max = 0

    def start(self) -> None:
        self.server = self.make()
        self.server.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def restart(self) -> None:
        self.stop()
        self.restarts += 1
        self.start()

    @property
    def port(self) -> int:
        return int(self.server.port)

    @property
    def pid(self) -> int | None:
        process = getattr(self.server, "_process", None)
        return process.pid if process is not None else None

    def alive(self) -> bool:
        pid = self.pid
        return pid is not None and fb.alive(pid)

    def log_tail(self) -> str:
        return str(self.server.log_tail(1500))

    def ask(self, case: fb.Case, limit: float) -> tuple[fb.Outcome, str]:
        """The answer, and what became of the server: "ok", "crash" or "hang" (then restarted)."""
        with fb.RssWatch(self.pid) as watch:
            outcome = fb.send(self.port, case, limit)
        self.rss_max = max(self.rss_max, watch.peak)
        fate = "ok"
        if watch.killed:
            fate, self.rss_kills = "rss", self.rss_kills + 1
        elif not self.alive():
            fate, self.crashes = "crash", self.crashes + 1
        elif outcome.error == "timeout":
            fate, self.hangs = "hang", self.hangs + 1
        else:
            probe = fb.send(self.port, fb.Case("GET", "/health", None, {}, "health"), 10.0)
            if probe.status != 200:
                fate = "crash" if not self.alive() else "hang"
                if fate == "crash":
                    self.crashes += 1
                else:
                    self.hangs += 1
        pid = self.pid
        if fate == "ok" and pid is not None:
            self.rss_max = max(self.rss_max, fb.rss_bytes(pid))
        return outcome, fate


def message_of(outcome: fb.Outcome) -> str:
    """The error message of an answer, digits folded (for grouping)."""
    try:
        body = json.loads(outcome.body)
        message = body["error"]["message"] if isinstance(body, dict) and "error" in body else ""
    except (ValueError, KeyError, TypeError):
        message = outcome.body[:120].decode("utf-8", "replace")
    errors = outcome.stream_errors()
    if errors and not message:
        message = "stream: " + json.dumps(errors[0])[:200]
    return re.sub(r"\d+", "N", str(message))[:160]


def route_of(case: fb.Case) -> str:
    path = case.path.split("?", 1)[0]
    known = fb.POST_ROUTES + fb.GET_ROUTES
    return f"{case.method} {path}" if path in known else f"{case.method} (unknown route)"


class Figures:
    def __init__(self) -> None:
        self.sent = 0
        self.per_route: collections.Counter[str] = collections.Counter()
        self.per_kind: collections.Counter[str] = collections.Counter()
        self.status: collections.Counter[str] = collections.Counter()
        self.findings: dict[str, dict[str, Any]] = {}   # key -> {"count", "examples"}
        self.differences: dict[str, dict[str, Any]] = {}
        self.upstream_status: collections.Counter[str] = collections.Counter()
        self.slowest: list[tuple[float, str]] = []

    @staticmethod
    def _add(table: dict[str, dict[str, Any]], key: str, example: Json) -> None:
        entry = table.setdefault(key, {"count": 0, "examples": []})
        entry["count"] += 1
        if len(entry["examples"]) < MAX_EXAMPLES_PER_KEY:
            entry["examples"].append(example)


def example(case: fb.Case, outcome: fb.Outcome, log: str | None = None) -> Json:
    out = {"request": case.describe(), "answer": outcome.describe()}
    if log:
        out["server_log_end"] = log
    return out


def run(args: argparse.Namespace) -> Json:
    from llamact.models import smollm2_path

    model = Path(args.model) if args.model else smollm2_path()
    # the slot folder holds special files (a FIFO, a directory, links to /dev/zero and outside): the
    # "slots" family's names; file:// media are read there too
    slots = fb.special_slot_dir(Path(tempfile.mkdtemp(prefix="llamact-fuzz-")))
    fb.N_SLOTS = args.parallel   # what an id_slot is taken modulo (the "slots" family's expectations)
    ours = Target("llamact", lambda: LiveServer("--model", str(model), *server_args(args), "--slot-save-path",
                                                str(slots), "--media-path", str(slots)))
    theirs: Target | None = None
    if args.differential:
        from llamact.parity.llama_server import LlamaServer, ServerConfig, find_llama_server

        extra = ("--parallel", str(args.parallel), "--n-predict", str(args.n_predict), "--slot-save-path", str(slots))
        theirs = Target("llama-server", lambda: LlamaServer(
            ServerConfig(model, n_ctx=args.ctx_size, n_threads=args.threads, extra_args=extra), find_llama_server()))
    figures = Figures()
    started = time.monotonic()
    deadline = started + args.minutes * 60
    families = args.families.split(",") if args.families else list(fb.FAMILIES)
    strategy = fb.st.one_of([fb.FAMILIES[f]() for f in families])

    def one(case: fb.Case) -> None:
        if time.monotonic() > deadline or figures.sent >= args.requests:
            raise Done
        figures.sent += 1
        route = route_of(case)
        figures.per_route[route] += 1
        figures.per_kind[case.kind] += 1
        outcome, fate = ours.ask(case, args.request_limit)
        klass = {"crash": "crash", "hang": "hang", "rss": "rss-kill"}.get(fate, outcome.status_class)
        figures.status[klass] += 1
        figures.slowest = sorted([*figures.slowest, (round(outcome.elapsed, 2), case.describe(300))], reverse=True)[:10]
        problems = fb.problems(case, outcome)
        if fate != "ok":
            problems.append(f"server {fate}")
        if problems:
            key = f"{route} | {'; '.join(p for p in problems if not p.startswith('error event'))[:80]} | " \
                  f"{message_of(outcome)}"
            if key not in figures.findings:
                print(f"[{time.monotonic() - started:6.0f}s] FINDING {key}\n    {case.describe(300)}", flush=True)
            Figures._add(figures.findings, key, example(case, outcome, ours.log_tail() if fate != "ok" else None))
        if fate != "ok":
            ours.restart()
        if theirs is not None:
            their_outcome, their_fate = theirs.ask(case, args.request_limit)
            their_class = {"crash": "crash", "hang": "hang", "rss": "rss-kill"}.get(their_fate,
                                                                             their_outcome.status_class)
            figures.upstream_status[their_class] += 1
            if their_fate != "ok":
                theirs.restart()
            if their_class != klass:
                ours_bad = klass in ("5xx", "crash", "hang", "no-answer", "rss-kill")
                if case.path.split("?", 1)[0] in LLAMACT_ONLY:
                    verdict = "llamact's own route"
                elif klass == "4xx" and their_class in ("2xx", "5xx", "crash", "hang", "no-answer", "rss-kill"):
                    verdict = "llamact stricter"
                elif ours_bad or (klass == "2xx" and their_class == "4xx"):
                    verdict = "to report"
                else:
                    verdict = "other"
                key = f"{verdict} | {route} [{case.kind.split('+')[0]}] | llamact {klass} vs llama-server " \
                      f"{their_class} | {message_of(outcome)}"
                Figures._add(figures.differences, key,
                             {**example(case, outcome), "llama_server_answer": their_outcome.describe(400)})
        if figures.sent % 50 == 0:
            print(f"[{time.monotonic() - started:6.0f}s] {figures.sent} requests, {dict(figures.status)}", flush=True)

    ours.start()
    if theirs is not None:
        theirs.start()
    try:
        if args.ci:   # the test suite's examples, family by family, without stopping at a failure
            for family in families:
                settings(settings.get_profile("fuzz-ci"), max_examples=fb.CI_EXAMPLES[family])(
                    given(fb.FAMILIES[family]())(one))()
        else:
            test = settings(settings.get_profile("fuzz-long"), max_examples=args.requests)(given(strategy)(one))
            while time.monotonic() < deadline and figures.sent < args.requests:   # hypothesis may stop early
                try:
                    seed(args.seed + figures.sent)(test)()
                except Done:
                    break
    finally:
        ours.stop()
        if theirs is not None:
            theirs.stop()
    report: Json = {
        "args": vars(args), "elapsed_s": round(time.monotonic() - started, 1), "requests": figures.sent,
        "per_route": dict(figures.per_route.most_common()), "per_kind": dict(figures.per_kind.most_common()),
        "status_classes": dict(figures.status), "count_5xx": figures.status.get("5xx", 0),
        "crashes": ours.crashes, "hangs": ours.hangs, "rss_kills": ours.rss_kills, "restarts": ours.restarts,
        "rss_max_mib": ours.rss_max >> 20,
        "slowest": figures.slowest, "findings": figures.findings,
    }
    if theirs is not None:
        by_verdict: collections.Counter[str] = collections.Counter()
        for key, entry in figures.differences.items():
            by_verdict[key.split(" | ")[0]] += entry["count"]
        report["llama_server"] = {"status_classes": dict(figures.upstream_status), "crashes": theirs.crashes,
                                  "hangs": theirs.hangs, "rss_kills": theirs.rss_kills, "restarts": theirs.restarts,
                                  "rss_max_mib": theirs.rss_max >> 20}
        report["differences_by_verdict"] = dict(by_verdict)
        report["differences"] = dict(sorted(figures.differences.items()))
    return report


def summary(report: Json) -> str:
    lines = [f"requests {report['requests']} in {report['elapsed_s']} s; status classes {report['status_classes']}",
             f"5xx {report['count_5xx']}, crashes {report['crashes']}, hangs {report['hangs']}, "
             f"killed for RSS {report['rss_kills']}, "
             f"restarts {report['restarts']}, RSS max {report['rss_max_mib']} MiB",
             "per route: " + ", ".join(f"{k}: {v}" for k, v in report["per_route"].items())]
    lines.append(f"findings ({len(report['findings'])} kinds):")
    for key, entry in report["findings"].items():
        lines.append(f"  {entry['count']:4d} x {key}")
        lines.append(f"         e.g. {entry['examples'][0]['request'][:400]}")
    if "llama_server" in report:
        lines.append(f"llama-server: {report['llama_server']}")
        lines.append(f"differences by verdict: {report['differences_by_verdict']}")
        for key, entry in report["differences"].items():
            lines.append(f"  {entry['count']:4d} x {key}")
            if not key.startswith(("llamact stricter", "llamact's own")):
                lines.append(f"         e.g. {entry['examples'][0]['request'][:300]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0, help="stop after this long (default 30)")
    parser.add_argument("--requests", type=int, default=100_000, help="stop after this many requests")
    parser.add_argument("--differential", action="store_true", help="send every request to llama-server too")
    parser.add_argument("--families", default="", help=f"comma-separated, of {','.join(fb.FAMILIES)} (default all)")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--ci", action="store_true",
                        help="send tests/server/test_http_fuzz.py's examples (profile fuzz-ci) instead, then stop")
    parser.add_argument("--model", default=None, help="GGUF file (default: the bundled SmolLM2)")
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--ctx-size", type=int, default=1024)
    parser.add_argument("--n-predict", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--request-limit", type=float, default=fb.REQUEST_LIMIT_S, help="seconds per request")
    parser.add_argument("--report", default="fuzz-campaign.json", help="where the JSON report goes")
    args = parser.parse_args(argv)
    report = run(args)
    Path(args.report).write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    print(summary(report))
    print(f"report: {args.report}")
    bad = report["count_5xx"] + report["crashes"] + report["hangs"] + report["rss_kills"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
