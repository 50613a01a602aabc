"""The proof behind ``grammar_engine="auto"``: llguidance's allowed tokens equal llama.cpp's grammar's.

    python scripts/grammar_engine_equality.py [--model smollm2|gemma3] [--steps 32] [--walks 1]
                                              [--only template,schema,upstream,fuzz] [--fuzz 200]
                                              [--json report.json]

Over the grammar corpus (``llamact.parity.grammar_corpus``: every vendored template's tool grammar
under each tool choice, the schema corpus, upstream's GBNF test vectors, the fuzzer's random schemas
and GBNF), each grammar is walked on
both engines (``llamact.engine.grammar_equality``): its drives (a rendered tool call, upstream's
passing strings), then seeded random walks, comparing at every step the allowed set over the whole
vocabulary, end-of-generation tokens included. Prints, per grammar class: grammars, steps, tokens
compared, the equal share, and each differing grammar with its first difference; ``--json`` writes
every case. The classes equal at every step are the candidates for ``PROVEN_CLASSES``
(llamact/grammar/engines/choice.py). CPU-heavy: run it with ``nice``.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import sys
import time
from pathlib import Path

from llamact import LlamaEngine, ModelParams, models
from llamact.engine.grammar_equality import CaseResult, compare_grammar
from llamact.parity.grammar_corpus import fuzz_cases, schema_cases, template_cases, upstream_gbnf_cases

ROOT = Path(__file__).resolve().parent.parent
LLAMA_CPP = ROOT / "vendor" / "llama.cpp"


def _piece(engine: LlamaEngine, token: int) -> str:
    return f"{token}:{engine.token_piece(token)!r}"


def _write(path: Path, results: list[CaseResult]) -> None:
    path.write_text(json.dumps([{
        "name": r.name, "class": r.cls, "steps": r.steps, "equal_steps": r.equal_steps,
        "tokens_compared": r.tokens_compared, "utf8_steps": r.utf8_steps, "ended": r.ended,
        "skipped": r.skipped, "seconds": r.seconds, "lexemes": r.lexemes, "fallback": r.fallback,
        "differences": [d.__dict__ for d in r.differences]} for r in results], indent=1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2", choices=("smollm2", "gemma3"))
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--walks", type=int, default=1, help="seeded random walks per grammar (after its drives)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="template,schema,upstream,fuzz")
    ap.add_argument("--fuzz", type=int, default=200, help="random schemas and random GBNF grammars, each")
    ap.add_argument("--limit", type=int, default=0, help="at most this many grammars per corpus (0: all)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)   # the fuzzer's schemas warn about patterns they cannot hold
    path = models.smollm2_path() if args.model == "smollm2" else models.gemma3_path()
    kinds = set(args.only.split(","))
    results: list[CaseResult] = []
    start = time.perf_counter()
    with LlamaEngine.load(path, ModelParams(n_ctx=512, n_threads=1, n_threads_batch=1)) as engine:
        corpora = []
        if "template" in kinds:
            corpora.append(template_cases(engine, LLAMA_CPP / "models" / "templates"))
        if "schema" in kinds:
            corpora.append(schema_cases(engine))
        if "upstream" in kinds:
            corpora.append(upstream_gbnf_cases(engine, LLAMA_CPP))
        if "fuzz" in kinds:
            corpora.append(fuzz_cases(engine, args.fuzz, args.seed))
        for corpus in corpora:
            for i, case in enumerate(corpus):
                if args.limit and i >= args.limit:
                    break
                result = compare_grammar(engine, case, steps=args.steps, random_walks=args.walks, seed=args.seed)
                results.append(result)
                if args.json:   # after every case: a run cut short keeps what it measured
                    _write(args.json, results)
                mark = "skip" if result.skipped else ("equal" if result.equal else "DIFF")
                if mark == "equal" and result.utf8_steps:
                    mark = "utf8"
                print(f"{mark:5} {result.name} [{result.cls}] steps={result.steps} lexemes={result.lexemes} "
                      f"{result.seconds:.1f}s" + (f" (char-level: {result.fallback})" if result.fallback else "")
                      + (f" ({result.skipped})" if result.skipped else ""), file=sys.stderr, flush=True)
                for d in [d for d in result.differences if d.kind != "invalid-utf8"][:2]:
                    print(f"      {d.walk} step {d.step}: llama only {d.n_only_llama} "
                          f"{[_piece(engine, t) for t in d.only_llama[:4]]}, llguidance only {d.n_only_llguidance} "
                          f"{[_piece(engine, t) for t in d.only_llguidance[:4]]}", file=sys.stderr, flush=True)
    by_class: dict[str, list[CaseResult]] = collections.defaultdict(list)
    for r in results:
        by_class[r.cls].append(r)
    print(f"\nmodel {path.name}; {args.steps} steps a walk, {args.walks} random walk(s) + drives; "
          f"{time.perf_counter() - start:.0f} s")
    print("| class | grammars | skipped | steps | tokens compared | equal steps | invalid-UTF-8 only (dev. 20) "
          "| other differing steps | equal share | equal but dev. 20 | grammars differing otherwise |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for cls, rs in sorted(by_class.items()):
        compared = [r for r in rs if r.steps]
        steps = sum(r.steps for r in compared)
        equal = sum(r.equal_steps for r in compared)
        utf8 = sum(r.utf8_steps for r in compared)
        tokens = sum(r.tokens_compared for r in compared)
        differing = [r.name for r in compared if r.equal_steps + r.utf8_steps != r.steps]
        share = f"{equal / steps:.4%}" if steps else "-"
        modulo = f"{(equal + utf8) / steps:.4%}" if steps else "-"
        print(f"| {cls} | {len(rs)} | {sum(1 for r in rs if r.skipped)} | {steps} | {tokens:,} | {equal} | {utf8} "
              f"| {steps - equal - utf8} | {share} | {modulo} | {len(differing)} |")
    fallbacks = [f"{cls}: {sum(1 for r in rs if r.fallback)} of {len(rs)}" for cls, rs in sorted(by_class.items())]
    print("\nconverted one code point per lexeme (over the planner's bounds): " + ", ".join(fallbacks))
    for r in results:
        if r.steps and r.equal_steps + r.utf8_steps != r.steps:
            print(f"differs {r.name}: {[d.__dict__ for d in r.differences if d.kind != 'invalid-utf8'][:1]}")
    for r in results:
        if r.skipped:
            print(f"skipped {r.name}: {r.skipped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
