"""BFCL v4 for the tool-calling bench (scripts/bench/bench_bfcl.py): data, scorer, text-call detector."""
