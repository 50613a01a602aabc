"""Per-render bounds: wall time, the size of any one string, and what a render may allocate in total.

    RenderLimits(max_seconds, max_output_chars, max_allocated)
    Budget(limits)                 the running render's account
    current_budget()               the account in force (a fresh default one outside a render)

Templates come from model files, so a hostile one must end with ``JinjaLimitExceeded``: it may not
exhaust memory or hold a thread. Two rules make that so:

- Every operation that builds a value whose size depends on data (string repeat / replace / join /
  format / indent / concatenation, list concatenation, append, tojson, printing, range, dict and
  list results of filters, macro output) computes the size of its result first and calls
  ``charge_string`` / ``charge`` before allocating it.
- Work proportional to data checks the clock where it is done (``check_time``): each loop
  iteration, call and filter, and the inner loops of builtins (sort comparisons, select tests,
  tojson / printing / equality walks), so no single step runs long past the deadline.

Sizes are approximate bytes: one per character of a string, ``SLOT_BYTES`` per item of a container plus
``OBJECT_BYTES`` per new object. ``max_output_chars`` bounds the output and any one string; ``max_allocated``
bounds the sum of every charge in the render, temporaries included: a conservative stand-in for live
memory that costs one addition per charge. The one free it hears of is the one that makes templates
quadratic otherwise: ``{% set ns.out = ns.out ~ piece %}`` replacing a string nothing else holds
(``credit``; environment.py), with ``~``/``+`` chains built in one piece (operators.py ``chain``).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .errors import JinjaLimitExceeded

# Approximate sizes in bytes (CPython, 64-bit): a pointer slot, and a small object's header.
SLOT_BYTES = 16
OBJECT_BYTES = 64

_clock = time.monotonic
_T = TypeVar("_T")


@dataclass(frozen=True)
class RenderLimits:
    """Bounds one render (or one caps probe, all its renders together) may not exceed.

    ``max_seconds``: wall time. ``max_output_chars``: characters of output, and of any one string
    built while rendering. ``max_allocated``: approximate bytes allocated over the whole render.
    """

    max_seconds: float = 10.0
    max_output_chars: int = 16 * 1024 * 1024
    # Measured: a 20-message, 10-tool render charges ~0.1 MB; a 1900-message, 200-tool one at most
    # 118 MB (google-gemma-4, whose look-ahead loops are quadratic and near the time bound there).
    max_allocated: int = 512 * 1024 * 1024


def container_cost(items: int) -> int:
    """The approximate bytes of a new list, tuple or dict of ``items`` entries."""
    return OBJECT_BYTES + SLOT_BYTES * items


class CallerContainers(Protocol):
    """The render's view of the caller's data (``isolation.CallerData``; a protocol, so this module
    need not import isolation.py, which imports it)."""

    def holds(self, obj: Any) -> bool: ...


class Budget:
    """The running render's account. Every check raises ``JinjaLimitExceeded`` (without a source
    name: the façade adds it). ``caller`` is the render's view of the caller's data (isolation.py)."""

    __slots__ = ("limits", "deadline", "allocated", "caller", "_max_string", "_max_allocated")

    def __init__(self, limits: RenderLimits, caller: CallerContainers | None = None) -> None:
        self.limits = limits
        self.deadline = _clock() + limits.max_seconds
        self.allocated = 0
        self.caller = caller
        self._max_string = limits.max_output_chars
        self._max_allocated = limits.max_allocated

    def check_time(self) -> None:
        if _clock() > self.deadline:
            raise JinjaLimitExceeded(f"rendering took longer than {self.limits.max_seconds} s")

    def check_size(self, n: int) -> None:
        """The output so far is ``n`` characters."""
        if n > self._max_string:
            raise JinjaLimitExceeded(f"rendering produced more than {self._max_string} characters")

    def charge_string(self, length: int) -> None:
        """A string of ``length`` characters is about to be built."""
        if length > self._max_string:
            raise JinjaLimitExceeded(f"a string of {length} characters exceeds the bound of {self._max_string}")
        self.allocated += length
        if self.allocated > self._max_allocated:
            self._over()

    def charge(self, size: int) -> None:
        """A value of ``size`` approximate bytes (a container, or any non-string) is about to be built."""
        self.allocated += size
        if self.allocated > self._max_allocated:
            self._over()

    def credit(self, size: int) -> None:
        """A charged value of ``size`` was just freed (a namespace slot held its only reference)."""
        self.allocated -= size

    def _over(self) -> None:
        raise JinjaLimitExceeded(f"rendering allocated more than {self._max_allocated} bytes")


def paced(items: Iterable[_T], budget: Budget, every: int = 1024) -> Iterator[_T]:
    """``items``, checking the clock before the first and then every ``every`` items (a builtin's
    loop over a container that may hold millions of items)."""
    for i, item in enumerate(items):
        if not i % every:
            budget.check_time()
        yield item


_BUDGET: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("llamact_jinja_budget", default=None)


def current_budget() -> Budget:
    return _BUDGET.get() or Budget(RenderLimits())


def set_budget(budget: Budget | None) -> contextvars.Token[Budget | None]:
    return _BUDGET.set(budget)


def reset_budget(token: contextvars.Token[Budget | None]) -> None:
    _BUDGET.reset(token)


__all__ = ["RenderLimits", "Budget", "current_budget", "set_budget", "reset_budget", "container_cost", "paced",
           "SLOT_BYTES", "OBJECT_BYTES"]
