"""Fixtures of the llama-cpp-python compatibility tests (issue 28)."""

from __future__ import annotations

from typing import Any

import pytest
from compat_peer import PeerError, run_peer


class Peer:
    """Runs a module's cases through llama-cpp-python: one subprocess per batch of cases."""

    def __init__(self) -> None:
        self._answers: dict[int, dict[str, Any]] = {}

    def answers(self, cases: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """{name: {"ok": ...} or {"error": ...}} for ``cases`` ({name: case}), run once per dict."""
        if id(cases) not in self._answers:
            try:
                results = run_peer(list(cases.values()))
            except PeerError as exc:
                pytest.fail(str(exc))  # the peer is part of the test setup: missing it is a failure
            self._answers[id(cases)] = dict(zip(cases, results, strict=True))
        return self._answers[id(cases)]

    def run(self, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A separate, unbatched run (a diagnosis after a difference)."""
        try:
            return run_peer(cases)
        except PeerError as exc:
            pytest.fail(str(exc))


@pytest.fixture(scope="session")
def peer() -> Peer:
    return Peer()
