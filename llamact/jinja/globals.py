"""The globals a template sees: raise_exception, namespace, strftime_now, range, tojson.

Enters: the call's arguments (and, for strftime_now, the render's ``now`` in epoch seconds).
Leaves: template values. Raises ``TemplateError`` with upstream's messages
("Jinja Exception: <msg>" for raise_exception).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .budget import container_cost, current_budget
from .errors import TemplateError
from .methods import tojson
from .values import Builtin, Namespace, is_int, type_name

# Bounds a hostile range() cannot exceed (a list is built eagerly, as upstream does).
MAX_RANGE = 1_000_000
_INT = 32  # approximate bytes of an int object


def raise_exception(*args: Any, **_kwargs: Any) -> Any:
    if len(args) != 1 or not isinstance(args[0], str):
        raise TemplateError("raise_exception: expected one string argument")
    raise TemplateError("Jinja Exception: " + args[0])


def namespace(*args: Any, **kwargs: Any) -> Namespace:
    if args:
        raise TemplateError("namespace() arguments must be kwargs")
    current_budget().charge(container_cost(len(kwargs)))
    return Namespace(kwargs)


def range_(*args: Any) -> list[int]:
    if not 1 <= len(args) <= 3:
        raise TemplateError(f"Function 'range' expected between 1 and 3 arguments, got {len(args)}")
    for a in args:
        if not is_int(a):
            raise TemplateError(f"range: expected Int, got {type_name(a)}")
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
    if step == 0:
        raise TemplateError("range() step argument must not be zero")
    out = range(start, stop, step)
    if len(out) > MAX_RANGE:
        raise TemplateError(f"range() of {len(out)} items exceeds the bound of {MAX_RANGE}")
    current_budget().charge(container_cost(len(out)) + len(out) * _INT)
    return list(out)


def strftime_now(now: float | None) -> Callable[..., str]:
    def strftime(*args: Any) -> str:
        if len(args) != 1 or not isinstance(args[0], str):
            raise TemplateError("strftime_now: expected one string argument")
        instant = time.time() if now is None else now
        text = time.strftime(args[0], time.gmtime(instant)) if args[0] else ""
        if not text:
            raise TemplateError("strftime_now: failed to format time")
        return text

    return strftime


def make_globals(now: float | None) -> dict[str, Any]:
    """The globals of one render; ``now`` fixes the clock (None: the wall clock)."""
    return {
        "raise_exception": Builtin(raise_exception),
        "namespace": Builtin(namespace),
        "strftime_now": Builtin(strftime_now(now)),
        "range": Builtin(range_),
        "tojson": Builtin(tojson),
    }
