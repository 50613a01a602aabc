"""The oracle's own tests ask a live process: they test the program and its protocol (the process
survives a bad line, keeps its pid, restarts, answers a greedy generation equal to llamact's in
this run), so here ``oracle`` is a fresh process per module with no answer cache, where the rest
of the suite shares one cached client (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llamact.parity.oracle import OracleClient, OracleProcessError


@pytest.fixture(scope="module")
def oracle() -> Iterator[OracleClient]:
    try:
        client = OracleClient(cache=False, timeout=300)
    except OracleProcessError as exc:
        pytest.fail(str(exc))
    with client:
        yield client
