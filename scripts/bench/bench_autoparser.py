#!/usr/bin/env python3
"""Autoparser analysis cost: llamact's ``run_analysis`` vs upstream's ``analyze_template``.

For every vendored template (or those named):

* upstream: the oracle's ``analyze_timing`` op runs ``autoparser::analyze_template`` on the
  compiled template ``--reps`` times, each timed inside the process (median taken);
* llamact: ``run_analysis`` on the compiled template (caps included, as upstream's template carries
  them), ``--reps`` times, median. Every run renders all its probes afresh: nothing from an earlier
  analysis is reused except the probe parsers compiled once per process (their one-off cost is
  the first analysis in the process, reported apart);
* llamact cached: ``analyze_template`` once the template has been analysed (what every request
  after the first pays; upstream re-runs the analysis on every request).

Each analysis is checked equal to upstream's before it is timed.

    cd /tmp && python /work/main/scripts/bench/bench_autoparser.py [--templates A,B] [--reps 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from llamact.chat.autoparser.analysis import analyze_template, run_analysis
from llamact.chat.templates import load_chat_templates
from llamact.parity.oracle import OracleClient, OracleError

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--templates", help="comma-separated template stems (default: all)")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    paths = sorted(TEMPLATES_DIR.glob("*.jinja"))
    if args.templates:
        wanted = set(args.templates.split(","))
        paths = [p for p in paths if p.stem in wanted]

    rows = []
    first_in_process = None
    with OracleClient(cache=False) as oracle:
        for path in paths:
            source = path.read_text(encoding="utf-8")
            tmpl = load_chat_templates(source, bos_token="<s>", eos_token="</s>").default
            t0 = time.perf_counter()
            ours = run_analysis(tmpl).to_json()
            if first_in_process is None:
                first_in_process = time.perf_counter() - t0
            expected = oracle.request("analyze", template=source, bos_token="<s>", eos_token="</s>")
            if isinstance(expected, OracleError) or ours != expected:
                print(f"{path.stem}: not equal to upstream, skipped")
                continue
            timing = oracle.request("analyze_timing", template=source, bos_token="<s>", eos_token="</s>",
                                    iterations=args.reps)
            upstream_ms = statistics.median(timing["analysis_us"]) / 1000
            runs = []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                run_analysis(tmpl)
                runs.append(time.perf_counter() - t0)
            ours_ms = statistics.median(runs) * 1000
            analyze_template(tmpl)
            t0 = time.perf_counter()
            analyze_template(tmpl)
            cached_us = (time.perf_counter() - t0) * 1e6
            rows.append((path.stem, upstream_ms, ours_ms, cached_us))
            print(f"{path.stem:<55} upstream {upstream_ms:7.2f} ms  llamact {ours_ms:7.2f} ms "
                  f"({ours_ms / upstream_ms:5.1f}x)  cached {cached_us:6.1f} us")

    if rows:
        up = [r[1] for r in rows]
        us = [r[2] for r in rows]
        print(f"\n{len(rows)} templates: upstream median {statistics.median(up):.2f} ms "
              f"(mean {statistics.mean(up):.2f}), "
              f"llamact median {statistics.median(us):.2f} ms (mean {statistics.mean(us):.2f}), "
              f"ratio of means {statistics.mean(us) / statistics.mean(up):.1f}x; "
              f"cached median {statistics.median(r[3] for r in rows):.1f} us")
        if first_in_process is not None:
            print(f"first analysis in the process (probe parsers compiled): {first_in_process * 1000:.1f} ms")


if __name__ == "__main__":
    main()
