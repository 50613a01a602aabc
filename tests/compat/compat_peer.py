"""The peer, llama-cpp-python, seen from the tests' process: peer_runner.py run by the peer venv's
python in a subprocess (its libllama never loads beside llamact's), all cases in one run."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("peer_runner.py")
# where scripts/_env.sh makes it
PEER_VENV = Path(os.environ.get("LLAMACT_PEER_VENV", Path.home() / ".cache/llamact/venv-peer"))


def peer_version() -> str:
    """The pinned llama-cpp-python version (pyproject.toml's [tool.llamact.peer])."""
    # read without tomllib (Python 3.11+; the package supports 3.10)
    text = (REPO / "pyproject.toml").read_text()
    match = re.search(r'^\[tool\.llamact\.peer\]$[^\[]*?^version = "([^"]+)"', text, re.M)
    assert match, "pyproject.toml has no [tool.llamact.peer] version"
    return match.group(1)


class PeerError(RuntimeError):
    pass


def run_peer(cases: list[dict[str, Any]], timeout: float = 600) -> list[dict[str, Any]]:
    """Each case's answer, {"ok": result} or {"error": "Type: message"}, in order."""
    python = PEER_VENV / "bin" / "python"
    if not python.exists():
        raise PeerError(f"{python} is missing: scripts/test.sh (scripts/_env.sh) makes the peer's venv")
    # nothing of llamact's environment may reach the peer's libllama
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "LD_PRELOAD")}
    env.setdefault("OMP_WAIT_POLICY", "passive")
    proc = subprocess.run([str(python), str(RUNNER)], input=json.dumps(cases), capture_output=True, text=True,
                          env=env, timeout=timeout)
    if proc.returncode != 0:
        raise PeerError(f"peer_runner.py exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    answers: list[dict[str, Any]] = json.loads(proc.stdout)
    return answers
