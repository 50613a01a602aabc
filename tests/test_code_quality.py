"""The house rules that tools can check: ruff over the code, mypy over the package (docs/design.md)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed; scripts/test.sh installs it with the test dependencies")
    return path


def test_ruff(repo_root: Path) -> None:
    proc = subprocess.run([_tool("ruff"), "check", "llamact", "tests", "scripts", "build_backend"], cwd=repo_root,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy(repo_root: Path) -> None:
    proc = subprocess.run([_tool("mypy"), "llamact"], cwd=repo_root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
