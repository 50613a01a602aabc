"""Fitting a conversation into the context: which oldest turns to leave out of a request.

    fit_history(history, count_tokens, budget) -> Fit

What enters: the conversation (OpenAI-style message dicts, the system prompt excluded), a function
that renders a candidate message list through the chat template and counts its prompt tokens,
and the token budget. What leaves: the longest suffix of the history whose rendered prompt fits.

The history may only be cut where a user message starts: a cut anywhere else could separate an
assistant's tool calls from their tool results (or leave a conversation that starts with an
assistant turn, which many templates reject). The rendered length shrinks as the cut moves
forward, so the best cut is found by binary search over the cut points: O(log n) renders instead
of one per dropped turn. The newest user turn (and what follows it) is always kept; when even
that does not fit, ``Fit.fits`` is False.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Fit", "cut_points", "fit_history"]

Message = Mapping[str, Any]


@dataclass(frozen=True)
class Fit:
    """The messages to send: ``history[start:]``; ``n_tokens`` is their rendered prompt's length."""

    start: int
    n_tokens: int
    fits: bool


def cut_points(history: Sequence[Message]) -> list[int]:
    """Where the history may start: 0 and every user message (never inside a tool exchange)."""
    points = [i for i, m in enumerate(history) if i > 0 and m.get("role") == "user"]
    return [0, *points]


def fit_history(history: Sequence[Message], count_tokens: Callable[[Sequence[Message]], int],
                budget: int) -> Fit:
    """The earliest cut point whose suffix renders to at most ``budget`` tokens (see the module doc)."""
    points = cut_points(history)
    full = count_tokens(history)
    if full <= budget or len(points) == 1:
        return Fit(0, full, full <= budget)
    # invariant: points[hi] fits (or hi is the last point, checked below); points[lo] does not
    lo, hi = 0, len(points) - 1
    last = count_tokens(history[points[hi]:])
    if last > budget:
        return Fit(points[hi], last, False)
    best = last
    while hi - lo > 1:
        mid = (lo + hi) // 2
        n = count_tokens(history[points[mid]:])
        if n <= budget:
            hi, best = mid, n
        else:
            lo = mid
    return Fit(points[hi], best, True)
