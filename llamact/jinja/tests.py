"""Upstream's tests (``x is name(args)``): a table of small functions.

Enters: the tested value and the test's arguments. Leaves: a bool. Raises ``TemplateError`` where
upstream's test refuses its input, ``NotImplementedTemplateError`` for sameas/escaped/filter.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .budget import current_budget, paced
from .errors import NotImplementedTemplateError, TemplateError
from .values import as_string, compare, equal, is_int, is_number, is_object, is_undefined, type_name


def _int_arg(v: Any, name: str) -> int:
    if not is_int(v):
        raise TemplateError(f"{name}: expected Int, got {type_name(v)}")
    return int(v)


def is_in(needle: Any, haystack: Any) -> bool:
    """``needle in haystack`` as upstream's ``test_is_in``."""
    if is_undefined(haystack):
        return False
    if isinstance(haystack, (list, tuple)):
        # short lists (``role in ['user', 'system']``, the common case) are not worth a clock read
        items = haystack if len(haystack) <= 32 else paced(haystack, current_budget(), 64)
        return any(equal(needle, item) for item in items)
    if isinstance(haystack, str):
        if not isinstance(needle, str):
            raise TemplateError("'in' test expects args[1] as string when args[0] is string, got args[1] as "
                                + type_name(needle))
        return needle in haystack
    if isinstance(haystack, dict):
        keys = haystack if len(haystack) <= 32 else paced(haystack, current_budget(), 64)
        return any(equal(needle, k) for k in keys)
    raise TemplateError("'in' test expects iterable as first argument, got " + type_name(haystack))


def _refuse(what: str) -> Callable[..., bool]:
    def test(*_args: Any) -> bool:
        raise NotImplementedTemplateError(what)

    return test


_ASCII_UPPER = re.compile("[A-Z]")  # upstream's case tests look at ASCII letters only
_ASCII_LOWER = re.compile("[a-z]")


def _is_lower(v: Any) -> bool:
    if not isinstance(v, str):
        raise TemplateError("lower: expected String")
    return _ASCII_UPPER.search(v) is None


def _is_upper(v: Any) -> bool:
    if not isinstance(v, str):
        raise TemplateError("upper: expected String")
    return _ASCII_LOWER.search(v) is None


TESTS: dict[str, Callable[..., bool]] = {
    "boolean": lambda v: isinstance(v, bool),
    "callable": lambda v: callable(v) and not is_undefined(v),
    "odd": lambda v: _int_arg(v, "odd") % 2 != 0,
    "even": lambda v: _int_arg(v, "even") % 2 == 0,
    "false": lambda v: v is False,
    "true": lambda v: v is True,
    "divisibleby": lambda v, n: _int_arg(v, "divisibleby") % _int_arg(n, "divisibleby") == 0,
    "string": lambda v: isinstance(v, str),
    "integer": is_int,
    "float": lambda v: isinstance(v, float),
    "number": is_number,
    "iterable": lambda v: isinstance(v, (list, tuple, str)) or is_undefined(v),
    "sequence": lambda v: isinstance(v, (list, tuple, str)) or is_undefined(v),
    "mapping": is_object,
    "lower": _is_lower,
    "upper": _is_upper,
    "none": lambda v: v is None,
    "defined": lambda v: not is_undefined(v),
    "undefined": is_undefined,
    "eq": lambda a, b: compare(a, b, "eq"),
    "equalto": lambda a, b: compare(a, b, "eq"),
    "ge": lambda a, b: compare(a, b, "ge"),
    "gt": lambda a, b: compare(a, b, "gt"),
    "greaterthan": lambda a, b: compare(a, b, "gt"),
    "lt": lambda a, b: compare(a, b, "lt"),
    "lessthan": lambda a, b: compare(a, b, "lt"),
    "ne": lambda a, b: compare(a, b, "ne"),
    "in": is_in,
    "test": lambda v: isinstance(v, str) and as_string(v) in TESTS,
    "sameas": _refuse("sameas test not implemented"),
    "escaped": _refuse("escaped test not implemented"),
    "filter": _refuse("filter test not implemented"),
}


def run_test(name: str, value: Any, *args: Any) -> bool:
    test = TESTS.get(name)
    if test is None:
        raise TemplateError(f"Unknown test '{name}'")
    try:
        return bool(test(value, *args))
    except TypeError:
        raise TemplateError(f"Test '{name}': wrong number of arguments") from None
