"""Running Python code in a fresh interpreter, so that a crash of native code fails a test
instead of killing pytest. The child prints ``KEY value`` lines; ``lines_of`` reads them back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_child(code: str, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (cwd away from the source tree, so the installed
    package is imported unless PYTHONPATH says otherwise)."""
    env = {**os.environ, "GGML_NO_BACKTRACE": "1"}  # a crash should not wait for gdb to attach
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env
    )


def lines_of(proc: subprocess.CompletedProcess[str], key: str) -> list[str]:
    """The rest of each stdout line that starts with ``key`` and a space; fails on a crashed child."""
    assert proc.returncode == 0, (
        f"the child process died (exit {proc.returncode}): native code crashed\n"
        f"stdout: {proc.stdout[-3000:]}\nstderr: {proc.stderr[-3000:]}"
    )
    return [line[len(key) + 1 :] for line in proc.stdout.splitlines() if line.startswith(key + " ")]
