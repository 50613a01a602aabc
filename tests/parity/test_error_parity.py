"""Upstream's failures on its own Jinja vectors, met by llamact with the same kind of error and the
same text (the rule of llamact.parity.error_kinds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamact.errors import LlamaException
from llamact.jinja import render
from llamact.parity.components import ORACLE_NOW
from llamact.parity.error_kinds import match_error
from llamact.parity.oracle import OracleClient, OracleError
from llamact.parity.upstream_vectors import jinja_vectors

pytestmark = pytest.mark.parity

LLAMA_CPP = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp"

# Known differences, in llamact.jinja (reported; not the parity layer's to fix): llamact reports the
# Python TypeError of its format() instead of upstream's NotImplemented message.
KNOWN = {"string.format() named fields"}


def test_vectors_upstream_refuses_fail_with_upstreams_error(oracle: OracleClient) -> None:
    refused, problems, known = 0, [], set()
    for v in jinja_vectors(LLAMA_CPP):
        expected = oracle.request("jinja_render", template=v.template, context=v.context)
        if not isinstance(expected, OracleError):
            continue
        refused += 1
        try:
            got = render(v.template, v.context, now=ORACLE_NOW, source_name="vector")
        except LlamaException as exc:
            why = match_error("jinja", {"kind": expected.kind, "message": expected.message}, exc)
        else:
            why = f"rendered {got!r}"
        if why is None:
            continue
        if v.name in KNOWN:
            known.add(v.name)
        else:
            problems.append(f"{v.group}/{v.name}: {why}")
    assert refused >= 10
    assert not problems, "\n".join(problems)
    assert known == KNOWN, "a known difference is gone: remove it from KNOWN"
