"""Shrinking: delta debugging over a JSON input's structure.

What enters :func:`shrink`: a failing input, a predicate ``still_fails(candidate)`` (the same kind
of failure), the top-level keys that must stay (they name things, e.g. the template), and a budget
of predicate calls. What leaves: the smallest failing input found and the number of calls spent.

Greedy and structural: candidates remove whole parts first (object keys, chunks of lists, chunks of
lines, then of characters, halving the chunk size as in ddmin), then simplify scalars (numbers
towards 0, true to false), then recurse into children; the first candidate that still fails is
kept and the search restarts from it, until no candidate fails or the budget is spent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ...json_types import Json

__all__ = ["candidates", "shrink"]


def _chunks(n: int) -> Iterator[tuple[int, int]]:
    """(start, end) spans to remove: halves first, then quarters, ... then single items."""
    size = n // 2 if n > 1 else 1
    while size >= 1:
        for start in range(0, n, size):
            yield start, min(n, start + size)
        if size == 1:
            break
        size //= 2


def _string_candidates(text: str) -> Iterator[str]:
    lines = text.splitlines(keepends=True)
    if len(lines) > 2:
        for start, end in _chunks(len(lines)):
            yield "".join(lines[:start] + lines[end:])
    for start, end in _chunks(len(text)):
        yield text[:start] + text[end:]


def candidates(value: Json, fixed_keys: frozenset[str] = frozenset()) -> Iterator[Json]:
    """Every one-step simplification of ``value``, biggest first (``fixed_keys``: top level only)."""
    if isinstance(value, dict):
        keys = list(value)
        for key in keys:
            if key not in fixed_keys:
                yield {k: v for k, v in value.items() if k != key}
        for key in keys:
            if key in fixed_keys:
                continue
            for child in candidates(value[key]):
                yield {k: (child if k == key else v) for k, v in value.items()}
    elif isinstance(value, list):
        if value:
            for start, end in _chunks(len(value)):
                yield value[:start] + value[end:]
        for i, item in enumerate(value):
            for child in candidates(item):
                yield value[:i] + [child] + value[i + 1:]
    elif isinstance(value, str):
        yield from _string_candidates(value)
    elif value is True:
        yield False
    elif value is False or value is None:
        return
    elif isinstance(value, int):
        if value != 0:
            yield 0
        if abs(value) > 1:
            yield value // 2
    elif isinstance(value, float):
        if value != 0.0:
            yield 0.0
        if value != int(value) and abs(value) < 1e15:
            yield float(int(value))


def shrink(value: Json, still_fails: Callable[[Json], bool], fixed_keys: frozenset[str] = frozenset(),
           budget: int = 200) -> tuple[Json, int]:
    calls = 0
    current = value
    improved = True
    while improved and calls < budget:
        improved = False
        for candidate in candidates(current, fixed_keys):
            if calls >= budget:
                break
            calls += 1
            if still_fails(candidate):
                current, improved = candidate, True
                break
    return current, calls
