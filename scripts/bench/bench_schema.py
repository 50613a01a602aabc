#!/usr/bin/env python3
"""JSON schema -> GBNF conversion time: llamact's converter vs upstream's (through the oracle).

Both sides convert the same corpus (upstream's 81 test vectors + llamact's schema corpus). The
oracle's time is measured inside one long-lived process per request, so it includes the JSON-lines
round trip; to make the baseline fair, the round trip of a trivial request (``version``) is
measured too and subtracted. Prints the per-schema medians, the corpus total and the ratio
llamact / upstream (lower is faster), and the slowest schemas. The issue's bar: nothing over 100 ms.

    cd /tmp && python /work/main/scripts/bench/bench_schema.py [--reps 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from llamact.errors import LlamaUnsupportedException
from llamact.grammar import json_schema_to_grammar
from llamact.parity.oracle import OracleClient
from llamact.parity.schema_corpus import SCHEMA_CORPUS
from llamact.parity.upstream_vectors import json_schema_vectors


def corpus(llama_cpp: Path) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for vec in json_schema_vectors(llama_cpp):
        try:
            out.append((f"upstream/{vec.name}", json.loads(vec.schema_text)))
        except ValueError:
            continue
    return out + [(f"corpus/{name}", schema) for name, schema in SCHEMA_CORPUS]


def time_llamact(schema: Any) -> float:
    started = time.perf_counter()
    try:
        json_schema_to_grammar(schema)
    except LlamaUnsupportedException:
        pass
    return time.perf_counter() - started


def time_oracle(oracle: OracleClient, schema: Any, round_trip: float) -> float:
    started = time.perf_counter()
    oracle.request("json_schema_to_grammar", schema=schema)
    return max(0.0, time.perf_counter() - started - round_trip)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama-cpp", default=str(Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp"))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    schemas = corpus(Path(args.llama_cpp))
    ours: dict[str, list[float]] = {name: [] for name, _ in schemas}
    theirs: dict[str, list[float]] = {name: [] for name, _ in schemas}
    with OracleClient(cache=False) as oracle:
        trips = []
        for _ in range(200):
            t0 = time.perf_counter()
            oracle.request("version")
            trips.append(time.perf_counter() - t0)
        round_trip = statistics.median(trips)
        for rep in range(args.reps):
            order = schemas if rep % 2 == 0 else list(reversed(schemas))
            for name, schema in order:  # interleaved, alternating direction, against drift
                ours[name].append(time_llamact(schema))
                theirs[name].append(time_oracle(oracle, schema, round_trip))
    med_ours = {n: statistics.median(v) for n, v in ours.items()}
    med_theirs = {n: statistics.median(v) for n, v in theirs.items()}
    total_ours, total_theirs = sum(med_ours.values()), sum(med_theirs.values())
    slowest = sorted(med_ours.items(), key=lambda kv: -kv[1])[:5]
    print(f"schemas: {len(schemas)}, reps: {args.reps}, oracle round trip subtracted: {round_trip * 1e6:.0f} us")
    print(f"corpus total   llamact {total_ours * 1000:8.1f} ms   upstream {total_theirs * 1000:8.1f} ms   "
          f"ratio {total_ours / total_theirs:.1f}x")
    print(f"median schema  llamact {statistics.median(med_ours.values()) * 1e6:8.0f} us   "
          f"upstream {statistics.median(med_theirs.values()) * 1e6:8.0f} us")
    print("slowest (llamact): " + ", ".join(f"{n} {t * 1000:.1f} ms" for n, t in slowest))
    over = [n for n, t in med_ours.items() if t > 0.1]
    print(f"over 100 ms: {len(over)}" + (f" ({', '.join(over)})" if over else ""))
    if args.json:
        Path(args.json).write_text(json.dumps({"round_trip_s": round_trip, "llamact_s": med_ours,
                                               "upstream_s": med_theirs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
