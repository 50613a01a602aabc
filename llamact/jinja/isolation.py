"""A template never changes the caller's data.

Upstream renders from a copy of the context (``global_from_json``): a template may change its own
copy (``messages.pop()`` affects later reads in the same render) but never what the application
passed in. Copying every context up front would cost a deep walk per render, and almost no template
writes to the caller's data, so llamact copies on the first such write instead:

- A template writes only through ``append``, ``pop`` and ``{% set obj.attr = v %}``; each calls
  ``before_write(obj)`` first.
- A ``namespace()`` object is the template's own. Anything else is looked up among the containers
  reachable from the caller's context (that set is built on the first such write, once per render);
  a container the template built is not among them.
- A write to the caller's data raises ``CopyNeeded`` before anything changed; the façade renders
  again from ``private_copy(context)`` (same budget) and remembers the template, so its later
  renders copy up front.

``private_copy`` copies dicts, lists and tuples (plain types out) and shares everything else (strings
and numbers are immutable; other objects have no builtin that writes). Like upstream's JSON copy it
does not keep aliasing: a dict passed twice becomes two dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .budget import Budget, current_budget
from .errors import JinjaLimitExceeded
from .values import Namespace


class CopyNeeded(Exception):
    """The template is about to write to the caller's data: render again from a private copy."""


class CallerData:
    """The containers of the caller's context, found lazily (``before_write`` asks)."""

    __slots__ = ("_roots", "_ids")

    def __init__(self, context: Mapping[str, Any]) -> None:
        self._roots = list(context.values())
        self._ids: set[int] | None = None

    def holds(self, obj: Any) -> bool:
        if self._ids is None:
            self._ids = _reachable_containers(self._roots)
        # The caller's containers stay alive (and unchanged) for the whole render: their ids are theirs.
        return id(obj) in self._ids


def before_write(obj: Any, budget: Budget | None = None) -> Budget:
    """Raise ``CopyNeeded`` when ``obj`` belongs to the caller; returns the render's budget."""
    budget = budget or current_budget()
    caller = budget.caller
    if caller is not None and type(obj) is not Namespace and caller.holds(obj):
        raise CopyNeeded
    return budget


def _reachable_containers(roots: list[Any]) -> set[int]:
    seen: set[int] = set()
    stack = [v for v in roots if isinstance(v, (dict, list, tuple))]
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        for item in (v.values() if isinstance(v, dict) else v):
            if isinstance(item, (dict, list, tuple)):
                stack.append(item)
    return seen


def _copy(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _copy(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_copy(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_copy(x) for x in v)
    return v


def private_copy(context: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``context``'s containers. Raises JinjaLimitExceeded for a cyclic or too deep one."""
    try:
        return {k: _copy(v) for k, v in context.items()}
    except RecursionError:
        raise JinjaLimitExceeded("the context nests too deeply (or holds a cycle) to be copied") from None


__all__ = ["CallerData", "CopyNeeded", "before_write", "private_copy"]
