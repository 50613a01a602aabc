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


def test_test_modules_have_unique_basenames(repo_root: Path) -> None:
    # tests/ has no __init__.py files: pytest imports each module under its bare name, so two
    # test files with one name end the whole run at collection ("import file mismatch").
    seen: dict[str, Path] = {}
    clashes = []
    for path in sorted((repo_root / "tests").rglob("test_*.py")):
        if path.name in seen:
            clashes.append(f"{seen[path.name].relative_to(repo_root)} and {path.relative_to(repo_root)}")
        seen.setdefault(path.name, path)
    assert not clashes, "test modules sharing a name: " + "; ".join(clashes)
