"""Differential fuzzing: generated inputs, run by llamact and by upstream (the oracle), judged by the
scoreboard's rules; any difference or crash is shrunk and saved to a corpus the tests replay.

    python -m llamact.parity fuzz --seconds 60 --seed 7 --state fuzz-state.json
    python -m llamact.parity fuzz --targets json_schema,gbnf --cases 200

What enters: a seed, a time box (``--seconds``) or a number of cases, a state file to resume from.
What leaves: counts per target (cases, units: renders / parses / schemas / grammars; equal,
different, crash, known), and for every new finding a shrunk case appended to
``tests/parity/fuzz_corpus/<target>.jsonl`` (``saved.py``), which ``tests/parity/test_fuzz.py``
replays on every run. Nothing is raised for a finding: findings are the output.

The pieces: ``target.py`` (the Target interface), ``registry.py`` (the built-in targets by name: a new
target is one more entry there), the generators (``gen_*.py``), the targets (``targets_*.py``),
``shrink.py`` (delta debugging over the input's JSON structure), ``runner.py`` (the loop: seeded,
batched oracle requests, time-boxed, resumable) and ``cli.py``.

Invariants: case ``i`` of target ``t`` under seed ``s`` is generated from its own
``random.Random(f"{s}:{t}:{i}")``, so a run resumed from its state file continues the same sequence
and any case can be regenerated alone; a saved case holds its whole input, so replaying it needs no
generator.
"""
