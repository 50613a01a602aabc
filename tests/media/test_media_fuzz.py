"""The media fuzzer (scripts/fuzz/media.py) in the suite: a short seeded campaign of corrupt images and
audio through the probe, the decoders, the projector and the model, in a worker process the harness
watches. Its self-test case aborts the worker on purpose, so the run proves that a crash is caught and
reported, and that no other case crashed, hung or raised an untyped exception. Saved findings
(tests/media/fuzz_corpus) are replayed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.model, pytest.mark.slow]


def _fuzz(repo_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(repo_root / "scripts" / "fuzz" / "media.py"), *args],
                          capture_output=True, text=True, timeout=600)


def test_a_short_campaign_finds_only_its_planted_crash(repo_root: Path, tmp_path: Path) -> None:
    run = _fuzz(repo_root, "--cases", "48", "--seed", "23", "--self-test", "--out", str(tmp_path))
    assert "49 cases" in run.stdout and "1 findings" in run.stdout, run.stdout + run.stderr
    assert "self-test: CRASH (signal 6)" in run.stdout
    assert run.returncode == 1
