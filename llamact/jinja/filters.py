"""Filters: ``x|name(args)`` dispatched, as upstream does, to the input type's builtin table.

Enters: the filter name, the input and the call's arguments. Leaves: the builtin's result.
Aliases (count, d, e, trim) and upstream's string coercion for capitalize/lower/replace/strip/
title/upper/wordcount apply first. Raises ``TemplateError`` ("Unknown (built-in) filter 'x' for
type T") when the input's type has no such builtin.
"""

from __future__ import annotations

from typing import Any

from .errors import TemplateError
from .methods import builtins_for, call_builtin
from .values import as_string, is_undefined, type_name

ALIASES = {"count": "length", "d": "default", "e": "escape", "trim": "strip"}
_COERCED = frozenset({"capitalize", "lower", "replace", "strip", "title", "upper", "wordcount"})


def apply_filter(name: str, value: Any, *args: Any, **kwargs: Any) -> Any:
    name = ALIASES.get(name, name)
    if name in _COERCED and not is_undefined(value) and not isinstance(value, str):
        value = as_string(value)
    fn = builtins_for(value).get(name)
    if fn is None:
        raise TemplateError(f"Unknown (built-in) filter '{name}' for type {type_name(value)}")
    return call_builtin(fn, name, value, args, kwargs)
