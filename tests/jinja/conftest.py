"""Helpers for the jinja suites: compare llamact.jinja with upstream's engine (the oracle).

Judged as the scoreboard judges (llamact/parity/error_kinds.py): a render must be the same text,
and a failure must be the same failure: an upstream error is matched only by a llamact error of the
paired kind with upstream's text; anything that is not a LlamaException escaping is a bug.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from llamact.jinja import render
from llamact.parity.error_kinds import match_error
from llamact.parity.oracle import OracleError


def outcome_pair(oracle: Any, template: str, context: dict[str, Any]) -> tuple[Any, Any]:
    """(upstream's answer, llamact's answer): a string, or the OracleError / exception raised."""
    expected = oracle.request("jinja_render", template=template, context=context)
    now = oracle.request("version")["default_now"]  # the oracle's fixed clock, for strftime_now
    try:
        got: Any = render(template, context, now=now, source_name="test")
    except Exception as exc:  # noqa: BLE001 - judged below: a non-LlamaException is a bug to report
        got = exc
    return expected, got


def mismatch(expected: Any, got: Any) -> str | None:
    """None when ``got`` is what upstream answered (``expected``), else why not."""
    if isinstance(expected, OracleError):
        if not isinstance(got, BaseException):
            return f"upstream failed ({expected.kind}: {expected.message!r}), llamact rendered {got!r}"
        return match_error("jinja", {"kind": expected.kind, "message": expected.message}, got)
    if isinstance(got, BaseException):
        return f"upstream rendered {expected!r}, llamact raised {type(got).__name__}: {got}"
    if type(got) is not str or got != expected:
        return f"expected {expected!r}, got {got!r}"
    return None


def check_like_oracle(oracle: Any, template: str, context: dict[str, Any] | None = None) -> None:
    expected, got = outcome_pair(oracle, template, dict(context or {}))
    why = mismatch(expected, got)
    if why is not None:
        pytest.fail(f"template: {template!r}\ncontext: {context!r}\n{why}")


@pytest.fixture(scope="module")
def like_oracle(oracle: Any) -> Callable[..., None]:
    """``like_oracle(template, context)``: llamact renders what upstream renders, or fails as it fails."""

    def check(template: str, context: dict[str, Any] | None = None) -> None:
        check_like_oracle(oracle, template, context)

    return check
