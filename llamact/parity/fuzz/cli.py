"""``python -m llamact.parity fuzz``: differential fuzzing against the oracle (see ``__init__``).

    python -m llamact.parity fuzz --seconds 600 --seed 1 --state fuzz-state.json
    python -m llamact.parity fuzz --targets gbnf,json_schema --cases 500 --json tallies.json

Exit status: 0 when no new finding (different / error / crash) was made, 1 otherwise, 2 for bad
arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from ..oracle import OracleClient
from .registry import all_targets
from .runner import FuzzRunner, Tally
from .saved import default_corpus_dir
from .target import FuzzContext


def _vocab_model(explicit: str | None) -> Path | None:
    if explicit:
        return Path(explicit)
    try:
        from ...models import smollm2_path

        return smollm2_path()
    except Exception:  # noqa: BLE001 - without the model, token soup falls back to a few pieces
        return None


def render_tallies(tallies: dict[str, Tally]) -> str:
    head = (f"{'target':<14}{'cases':>9}{'units':>10}{'equal':>9}{'diff':>6}{'error':>6}{'crash':>6}{'known':>7}"
            f"{'dev':>6}{'unsent':>7}{'other':>6}{'saved':>6}{'sec':>8}")
    lines = [head, "-" * len(head)]
    for name, t in tallies.items():
        other = t.uncomparable + t.oracle_failed
        lines.append(f"{name:<14}{t.cases:>9}{t.units:>10}{t.equal:>9}{t.different:>6}{t.error:>6}{t.crash:>6}"
                     f"{t.known:>7}{t.deviation:>6}{t.unsent:>7}{other:>6}{t.saved:>6}{t.seconds:>8.0f}")
        for label, n in sorted(t.known_labels.items()):
            lines.append(f"{'':<14}known: {label} x {n}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m llamact.parity fuzz", description=sys.modules[__package__].__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", help="comma-separated targets (default: all)")
    parser.add_argument("--seconds", type=float, help="time box for this run (checked between batches)")
    parser.add_argument("--cases", type=int, help="cases per target for this run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--state", help="state file: resume from it, and keep it up to date")
    parser.add_argument("--corpus-dir", help="where findings are saved (default: tests/parity/fuzz_corpus)")
    parser.add_argument("--no-save", action="store_true", help="do not write findings anywhere")
    parser.add_argument("--llama-cpp", help="the pinned llama.cpp tree")
    parser.add_argument("--oracle", help="the oracle executable")
    parser.add_argument("--model", help="GGUF whose vocabulary feeds token soup (default: SmolLM2)")
    parser.add_argument("--json", dest="json_path", help="write the tallies and findings as JSON here")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.seconds is None and args.cases is None:
        parser.error("give --seconds and/or --cases")

    from ..locate import find_llama_cpp

    factories = all_targets()
    names = [t.strip() for t in args.targets.split(",") if t.strip()] if args.targets else list(factories)
    unknown = [n for n in names if n not in factories]
    if unknown or not names:
        print(f"llamact.parity fuzz: unknown targets {unknown or '(none given)'}; known: {', '.join(factories)}",
              file=sys.stderr)
        return 2
    corpus_dir = None if args.no_save else Path(args.corpus_dir) if args.corpus_dir else default_corpus_dir()
    log = (lambda m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    with OracleClient(args.oracle, timeout=60) as oracle:
        ctx = FuzzContext(oracle, find_llama_cpp(args.llama_cpp), _vocab_model(args.model))
        runner = FuzzRunner(ctx, [factories[n](ctx) for n in names], args.seed, corpus_dir,
                            Path(args.state) if args.state else None, log)
        tallies = runner.run(args.seconds, args.cases)
    print(render_tallies(tallies))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps({"seed": args.seed, "tallies": {n: asdict(t) for n, t in
                                                   tallies.items()}, "findings": runner.findings},
                                                   ensure_ascii=False, indent=1))
    return 1 if any(t.findings for t in tallies.values()) else 0
