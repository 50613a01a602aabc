"""Strict structural comparison of JSON values, for parity: what Python's ``==`` lets through is a difference.

What enters: two JSON-shaped values (``dict``/``list``/``str``/``int``/``float``/``bool``/``None``),
the oracle's ``expected`` and llamact's ``got``, and whether object key order is significant.
What leaves: :func:`first_difference` returns None when the values are the same, else a short
description of the first place they differ (``$.tool_calls[0].arguments: ...``).

Why not ``==``: Python says ``True == 1 == 1.0`` and ``0.0 == -0.0``, and two dicts with the same
items in another order are equal. Upstream's JSON tells all of these apart (``true`` / ``1`` /
``1.0``; nlohmann writes ``-0.0``), so here:

* types must match exactly: ``bool`` is not ``int``, ``int`` is not ``float``, a ``tuple`` is not a
  ``list`` (results must be plain JSON values);
* floats are compared by their bits (``-0.0`` differs from ``0.0``);
* lists are compared in order;
* object keys are compared as sets, and also in order when ``ordered`` says the object's order is
  upstream's. Key order is significant only where *both* sides are ordered by meaning: a value
  upstream produces as nlohmann ``ordered_json`` (e.g. a PEG arena's JSON) or as a ``std::map``
  (sorted keys). Shapes the oracle itself builds to carry an answer (a parsed message, a diff) have
  no upstream order, so they are compared as sets. ``ordered`` is a bool (the whole value) or a
  set of top-level keys whose values are ordered (e.g. ``{"parser"}`` inside chat params), and
  ``unordered`` names paths inside an ordered value whose keys still have no upstream order (a PEG
  arena's ``rules`` object is a ``std::unordered_map`` upstream: its order is a hash table's).
"""

from __future__ import annotations

import struct
from collections.abc import Collection

from ..json_types import Json

Ordered = bool | Collection[str]

__all__ = ["Ordered", "first_difference", "same"]

_MAX_SHOWN = 80


def same(expected: Json, got: Json, ordered: Ordered = False, unordered: Collection[str] = ()) -> bool:
    return first_difference(expected, got, ordered, unordered) is None


def first_difference(expected: Json, got: Json, ordered: Ordered = False,
                     unordered: Collection[str] = ()) -> str | None:
    """None when ``got`` is ``expected`` in the strict sense above, else where and how they differ."""
    if isinstance(ordered, bool):
        return _diff(expected, got, "$", ordered, unordered)
    if type(expected) is dict and type(got) is dict:
        # top-level keys: a set; the listed keys' values: ordered
        problem = _keys(expected, got, "$", False)
        if problem:
            return problem
        for key in expected:
            found = _diff(expected[key], got[key], f"$.{key}", key in ordered, unordered)
            if found:
                return found
        return None
    return _diff(expected, got, "$", False, unordered)


def _show(value: Json) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def _string_difference(expected: str, got: str) -> str:
    """Where two strings part: the offset and a window of each from a little before it."""
    if len(expected) + len(got) <= 2 * _MAX_SHOWN:
        return f"expected {expected!r}, got {got!r}"
    at = next((i for i, (a, b) in enumerate(zip(expected, got, strict=False)) if a != b), min(len(expected), len(got)))
    start = max(0, at - 20)
    return (f"first difference at character {at} (of {len(expected)} / {len(got)}): "
            f"expected ...{expected[start:at + 40]!r}, got ...{got[start:at + 40]!r}")


def _diff(expected: Json, got: Json, path: str, ordered: bool, unordered: Collection[str] = ()) -> str | None:
    te, tg = type(expected), type(got)
    if te is not tg:
        return f"{path}: expected {te.__name__} {_show(expected)}, got {tg.__name__} {_show(got)}"
    if te is dict:
        problem = _keys(expected, got, path, ordered and path not in unordered)
        if problem:
            return problem
        for key in expected:
            found = _diff(expected[key], got[key], f"{path}.{key}", ordered, unordered)
            if found:
                return found
        return None
    if te is list:
        for i, (e, g) in enumerate(zip(expected, got, strict=False)):
            found = _diff(e, g, f"{path}[{i}]", ordered, unordered)
            if found:
                return found
        if len(expected) != len(got):
            return f"{path}: expected {len(expected)} items, got {len(got)}"
        return None
    if te is float:
        if struct.pack("<d", expected) != struct.pack("<d", got):
            return f"{path}: expected {expected!r}, got {got!r}"
        return None
    if te is str:
        if expected != got:
            return f"{path}: {_string_difference(expected, got)}"
        return None
    if te in (int, bool) or expected is None:
        if expected != got:
            return f"{path}: expected {_show(expected)}, got {_show(got)}"
        return None
    return f"{path}: {te.__name__} is not a JSON value"


def _keys(expected: dict[str, Json], got: dict[str, Json], path: str, ordered: bool) -> str | None:
    if expected.keys() != got.keys():
        missing = [k for k in expected if k not in got]
        extra = [k for k in got if k not in expected]
        return f"{path}: keys missing {missing}, unexpected {extra}"
    if ordered and list(expected) != list(got):
        return f"{path}: key order: expected {list(expected)}, got {list(got)}"
    return None
