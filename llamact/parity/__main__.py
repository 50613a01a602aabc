"""``python -m llamact.parity``: build the corpora with the oracle and print the parity scoreboard.

    python -m llamact.parity                      # full corpus, every template, both models
    python -m llamact.parity --templates Qwen-Qwen3-0.6B,google-gemma-2-2b-it   # a subset
    python -m llamact.parity --json score.json --report report.json --corpus-out corpus/
    python -m llamact.parity fuzz --seconds 60    # differential fuzzing (python -m llamact.parity fuzz -h)
    python -m llamact.parity --no-server          # without the server_e2e row (llama-server, minutes)

The pinned tree's templates come from ``--llama-cpp DIR``, else a source checkout's
``vendor/llama.cpp``, else the verified cache (``~/.cache/llamact/src``). The oracle is the one
installed with the package unless ``--oracle PATH``; llama-server (the server_e2e row: upstream's
server answering chat requests, compared with ``engine.create()``) likewise unless ``--server PATH``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .components import ModelRunners, components
from .corpus import build_corpus, oracle_errors_by_group, template_files
from .llama_server import LlamaServerError, find_llama_server
from .locate import available_models, find_llama_cpp
from .oracle import OracleClient
from .scoreboard import render_table, report_json, score, summary_json


def server_e2e_exclusion(args: argparse.Namespace, models: dict[str, Path], templates: list[str] | None) -> str:
    """Why the server_e2e row is left out of this run ("" when it runs)."""
    if args.no_server:
        return "--no-server"
    if not models:
        return "--no-models" if args.no_models else "no model available"
    if templates is not None:
        return "--templates (the row's case matrix is fixed)"
    try:
        find_llama_server(args.server)
    except LlamaServerError as exc:
        if args.server:   # asked for by name: a mistake to report, not a row to leave out quietly
            raise SystemExit(f"llamact.parity: --server: {exc}") from exc
        return f"llama-server not found: {exc}"
    return ""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["fuzz"]:
        from .fuzz.cli import main as fuzz_main

        return fuzz_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m llamact.parity", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama-cpp", help="the pinned llama.cpp tree (for its templates and test vectors)")
    parser.add_argument("--oracle", help="the oracle executable (default: the installed one)")
    parser.add_argument("--templates", help="comma-separated template file stems (default: all)")
    parser.add_argument("--no-models", action="store_true", help="leave out the real-model components")
    parser.add_argument("--no-cache", action="store_true",
                        help="ask the oracle and llama-server afresh (no answer caches)")
    parser.add_argument("--no-server", action="store_true",
                        help="leave out the server_e2e row (which asks llama-server: minutes)")
    parser.add_argument("--server", help="the llama-server executable (default: the installed one)")
    parser.add_argument("--json", dest="json_path", help="write the summary as JSON here")
    parser.add_argument("--report", help="write the full report (every difference) as JSON here")
    parser.add_argument("--corpus-out", help="write the corpus (JSON lines per component) into this directory")
    args = parser.parse_args(argv)

    llama_cpp = find_llama_cpp(args.llama_cpp)
    templates = None
    if args.templates is not None:
        templates = [t.strip() for t in args.templates.split(",") if t.strip()]
        known = {p.stem for p in template_files(llama_cpp)}
        unknown = [t for t in templates if t not in known]
        if unknown or not templates:
            print(f"llamact.parity: --templates names no vendored template: {', '.join(unknown) or '(empty)'} "
                  f"(the names are file stems in {llama_cpp / 'models' / 'templates'})", file=sys.stderr)
            return 2
    models = available_models(not args.no_models)
    started = time.perf_counter()
    with OracleClient(args.oracle, cache=not args.no_cache) as oracle:
        corpus = build_corpus(oracle, llama_cpp, models, templates)
    excluded = {"tokenize": "--no-models", "generate_greedy": "--no-models"} if args.no_models else {}
    server_excluded = server_e2e_exclusion(args, models, templates)
    if server_excluded:
        excluded["server_e2e"] = server_excluded
    else:
        from .server_e2e import add_server_e2e_cases

        add_server_e2e_cases(corpus, models, llama_cpp, with_answers=True, executable=find_llama_server(args.server),
                             cache=not args.no_cache)
    built = time.perf_counter() - started
    runners = ModelRunners(models, llama_cpp) if models else None
    try:
        rows = score(corpus, components(runners, corpus), excluded)
    finally:
        if runners is not None:
            runners.close()

    print(render_table(rows))
    errors = oracle_errors_by_group(corpus, ["caps", "chat_apply", "chat_parse", "msg_diffs"])
    print(f"\ncorpus built in {built:.1f} s (digest {corpus.digest()[:16]}); "
          f"templates where upstream itself errors: {len(errors)}")
    for group, counts in sorted(errors.items()):
        print(f"  {group}: " + ", ".join(f"{c} {n}" for c, n in sorted(counts.items())))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(summary_json(rows), indent=1) + "\n")
    if args.report:
        Path(args.report).write_text(report_json(rows, corpus, {
            "corpus_digest": corpus.digest(), "oracle_errors_by_template": errors}))
    if args.corpus_out:
        corpus.write(Path(args.corpus_out))
    failing = [r for r in rows if r.failing]
    for r in failing:
        if r.problem:
            print(f"llamact.parity: {r.component}: {r.problem}", file=sys.stderr)
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
