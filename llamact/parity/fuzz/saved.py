"""The fuzz corpus: shrunk findings, one JSON object per line in ``<dir>/<target>.jsonl``.

Each entry: ``{"target", "input", "outcome", "why", "seed", "index", "known"?}`` -- the whole input
(replayable without any generator), what happened when it was found (``different`` / ``error`` /
``crash``) and why, where it came from, and, for a difference already reported and not fixed
here, its label in known_differences.py; or, for a real difference diagnosed and reported whose
fix belongs elsewhere, ``"open"``: the diagnosis; or ``"deviation"``: llamact differs on purpose
(documented where it does), which the replay confirms. tests/parity/test_fuzz.py replays every entry: it
must now be equal, still be exactly its known difference, or (open) still differ.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...json_types import Json

__all__ = ["append_finding", "default_corpus_dir", "load_findings"]


def default_corpus_dir() -> Path:
    """tests/parity/fuzz_corpus of a source checkout, else ./fuzz_corpus."""
    repo = Path(__file__).resolve().parents[3]
    if (repo / "tests" / "parity").is_dir():
        return repo / "tests" / "parity" / "fuzz_corpus"
    return Path("fuzz_corpus")


def _key(inp: Json) -> str:
    return json.dumps(inp, sort_keys=True, ensure_ascii=False)


def load_findings(directory: Path, target: str | None = None) -> list[Json]:
    files = [directory / f"{target}.jsonl"] if target else sorted(directory.glob("*.jsonl"))
    out = []
    for path in files:
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    out.append(json.loads(line))
    return out


def append_finding(directory: Path, entry: Json) -> bool:
    """Append ``entry`` unless the same input is already saved; True when it was written."""
    directory.mkdir(parents=True, exist_ok=True)
    if any(_key(e["input"]) == _key(entry["input"]) for e in load_findings(directory, entry["target"])):
        return False
    with (directory / f"{entry['target']}.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return True
