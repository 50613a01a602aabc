"""Fixtures of the llama-cpp-python compatibility tests (issue 28)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from compat_peer import PeerError, run_peer


@pytest.fixture(scope="session")
def peer() -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """Runs a list of cases through llama-cpp-python (one subprocess per call: a module asks once
    for all its cases) and returns each case's answer."""

    def run(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
        try:
            return run_peer(cases)
        except PeerError as exc:
            pytest.fail(str(exc))  # the peer is part of the test setup (scripts/_env.sh): never a skip

    return run
