"""Helpers for the jinja suites: compare llamact.jinja with upstream's engine (the oracle)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from llamact.errors import LlamaException
from llamact.jinja import render
from llamact.parity.oracle import OracleError


def outcome_pair(oracle: Any, template: str, context: dict[str, Any]) -> tuple[Any, Any]:
    """(upstream's answer, llamact's answer); an error on either side is ("error", message)."""
    answer = oracle.request("jinja_render", template=template, context=context)
    expected = ("error", answer.message) if isinstance(answer, OracleError) else answer
    now = oracle.request("version")["default_now"]  # the oracle's fixed clock, for strftime_now
    try:
        got: Any = render(template, context, now=now, source_name="test")
    except LlamaException as exc:
        got = ("error", str(exc))
    return expected, got


def check_like_oracle(oracle: Any, template: str, context: dict[str, Any] | None = None) -> None:
    expected, got = outcome_pair(oracle, template, dict(context or {}))
    if isinstance(expected, tuple) and isinstance(got, tuple):
        return  # both refuse: an error answer is matched by a raised LlamaException
    if expected != got:
        pytest.fail(f"template: {template!r}\ncontext: {context!r}\nexpected: {expected!r}\ngot:      {got!r}")


@pytest.fixture(scope="module")
def like_oracle(oracle: Any) -> Callable[..., None]:
    """``like_oracle(template, context)``: llamact renders what upstream renders, or both refuse."""

    def check(template: str, context: dict[str, Any] | None = None) -> None:
        check_like_oracle(oracle, template, context)

    return check
