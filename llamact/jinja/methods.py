"""Upstream's built-in functions per value type: the one table behind both ``x|name`` and ``x.name()``.

Enters: the input value plus the call's positional and keyword arguments (upstream's
``get_kwarg_or_pos`` forms). Leaves: a template value. Raises ``TemplateError`` with upstream's
message where upstream throws, ``NotImplementedTemplateError`` for what upstream refuses.
``builtins_for(value)`` is the table for a value's type (``{}`` for values without builtins).
Builtins that build containers charge the render's budget first; their loops check its clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jinja2.runtime import LoopContext

from .budget import OBJECT_BYTES, SLOT_BYTES, container_cost, current_budget, paced
from .callargs import UNDEF, Fn, arg, default_value, ensure_vals, not_implemented, slice_bounds, slice_seq, tojson
from .errors import NotImplementedTemplateError, TemplateError
from .isolation import before_write
from .strings import STRING
from .values import (
    Function,
    as_bool,
    as_string,
    compare,
    equal,
    is_int,
    is_number,
    is_undefined,
    type_name,
)

# -- numbers and booleans -----------------------------------------------------------------------

INT: dict[str, Fn] = {
    "default": default_value,
    "abs": lambda v: abs(v),
    "int": lambda v: v,
    "float": lambda v: float(v),
    "safe": tojson,
    "string": tojson,
    "tojson": tojson,
}

FLOAT: dict[str, Fn] = {
    "default": default_value,
    "abs": lambda v: abs(v),
    "int": lambda v: int(v) if v == v and abs(v) != float("inf") else 0,
    "float": lambda v: v,
    "safe": tojson,
    "string": tojson,
    "tojson": tojson,
}

BOOL: dict[str, Fn] = {
    "default": default_value,
    "int": lambda v: 1 if v else 0,
    "float": lambda v: 1.0 if v else 0.0,
    "safe": lambda v: "True" if v else "False",
    "string": lambda v: "True" if v else "False",
    "tojson": tojson,
}


# -- arrays -----------------------------------------------------------------------------------


def _charged(v: Any) -> Any:
    """``v``, once the render's budget has been charged for a container of its length."""
    current_budget().charge(container_cost(len(v)))
    return v


def _select(reject: bool, fn: str) -> Fn:
    def select(arr: Any, *args: Any, **kwargs: Any) -> list[Any]:
        from .tests import TESTS

        n = 1 + len(args)
        if not 2 <= n + len(kwargs) <= 4:  # upstream counts keyword arguments too
            raise TemplateError(f"Function '{fn}' expected between 2 and 4 arguments, got {n + len(kwargs)}")
        ensure_vals(fn, (arr, *args), ("any", "string"))
        if not 2 <= n <= 4:
            raise TemplateError("selectattr: invalid number of arguments")
        budget = current_budget()
        budget.charge(container_cost(len(arr)))
        out = []
        if n == 2:
            for item in paced(arr, budget):
                if not isinstance(item, dict):
                    raise TemplateError("selectattr: item is not an object")
                if as_bool(item.get(args[0], UNDEF)) != reject:
                    out.append(item)
            return out
        name = as_string(args[0] if n == 3 else args[1])
        test = TESTS.get(name)
        if test is None:
            raise TemplateError(f"selectattr: unknown test '{name}'")
        extra = args[1] if n == 3 else args[2]
        for item in paced(arr, budget, 1):  # a test may cost as much as its input
            subject = item
            if n == 4:
                if not isinstance(item, dict):
                    raise TemplateError("selectattr: item is not an object")
                subject = item.get(args[0], UNDEF)
            if as_bool(test(subject, extra)) != reject:
                out.append(item)
        return out

    return select


def _at(item: Any, attr: Any, default: Any) -> Any:
    if is_int(attr):
        if isinstance(item, (list, tuple)):
            i = attr + len(item) if attr < 0 else attr
            return item[i] if 0 <= i < len(item) else default
        return default
    if isinstance(item, dict):
        return item.get(attr, default)
    return default


def _join(arr: Any, *args: Any, **kwargs: Any) -> str:
    delim = arg(args, kwargs, "d", 0)
    attr = arg(args, kwargs, "attribute", 1)
    if not is_undefined(attr) and not isinstance(attr, str) and not is_int(attr):
        raise TemplateError("join() attribute must be string or integer")
    budget = current_budget()
    budget.charge(container_cost(len(arr)))
    limit = budget.limits.max_output_chars
    parts = []
    size = 0
    for item in paced(arr, budget):
        if not is_undefined(attr):
            if is_int(attr) and isinstance(item, (list, tuple)):
                if not -len(item) <= attr < len(item):
                    raise TemplateError(f"Index {attr} out of bounds for array of size {len(item)}")
                item = item[attr]
            elif not is_int(attr) and isinstance(item, dict):
                if attr not in item:
                    raise TemplateError(f"Key '{attr}' not found in value of type Object")
                item = item[attr]
        if not (isinstance(item, str) or is_number(item)):
            raise TemplateError("join() can only join arrays of strings or numerics")
        part = as_string(item)
        size += len(part)
        if size > limit:
            budget.charge_string(size)  # raises: stop before the parts outgrow the bound
        parts.append(part)
    sep = "" if is_undefined(delim) else as_string(delim)
    budget.charge_string(size + len(sep) * max(len(parts) - 1, 0))
    return sep.join(parts)


def _map(arr: Any, *args: Any, **kwargs: Any) -> Any:
    if args and "attribute" not in kwargs:
        raise NotImplementedTemplateError("map: filter-mapping not implemented")
    attr = arg(args, kwargs, "attribute", 0)
    if not isinstance(attr, str) and not is_int(attr):
        raise TemplateError("map: attribute must be string or integer")
    default = kwargs.get("default", UNDEF)
    budget = current_budget()
    budget.charge(container_cost(len(arr)))
    out = [_at(item, attr, default) for item in paced(arr, budget)]
    return tuple(out) if isinstance(arr, tuple) else out


def _append(arr: Any, item: Any) -> Any:
    if not isinstance(arr, list):
        raise TemplateError("append: first argument must be an array")
    # a slot, and room for the small container literal it may keep alive (literals are not charged)
    before_write(arr).charge(SLOT_BYTES + OBJECT_BYTES)
    arr.append(item)
    return arr


def _pop(arr: Any, index: Any = -1) -> Any:
    if not isinstance(arr, list):
        raise TemplateError("pop: first argument must be an array")
    if not arr:
        raise TemplateError("pop from empty list")
    i = index + len(arr) if index < 0 else index
    if not 0 <= i < len(arr):
        raise TemplateError(f"pop index {index} out of range")
    before_write(arr)
    return arr.pop(i)


def _sort_key_cmp(reverse: bool) -> Callable[[Any, Any], int]:
    op = "gt" if reverse else "lt"
    check_time = current_budget().check_time

    def cmp(a: Any, b: Any) -> int:
        check_time()  # a comparison may encode long strings; a sort makes n log n of them
        if compare(a, b, op):
            return -1
        if compare(b, a, op):
            return 1
        return 0

    return cmp


def _sort(arr: Any, *args: Any, **kwargs: Any) -> Any:
    import functools

    reverse = as_bool(arg(args, kwargs, "reverse", 0))
    attr = arg(args, kwargs, "attribute", 2)
    current_budget().charge(container_cost(len(arr)))
    items = list(arr)
    cmp = _sort_key_cmp(reverse)

    def pick(x: Any) -> Any:
        if is_undefined(attr):
            return x
        if is_int(attr) and isinstance(x, (list, tuple)):
            return x[attr]
        if not is_int(attr) and isinstance(x, dict):
            if attr not in x:
                raise TemplateError(f"Key '{attr}' not found in value of type Object")
            return x[attr]
        raise TemplateError(f"sort: unsupported object attribute comparison between {type_name(x)} and {type_name(x)}")

    items.sort(key=functools.cmp_to_key(lambda a, b: cmp(pick(a), pick(b))))
    return tuple(items) if isinstance(arr, tuple) else items


def _extreme(op: str) -> Fn:
    def pick(arr: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_undefined(arg(args, kwargs, "attribute", 1)):
            raise NotImplementedTemplateError(f"{'min' if op == 'lt' else 'max'}: attribute not implemented")
        if not arr:
            return UNDEF
        best = arr[0]
        for item in paced(arr[1:], current_budget(), 1):
            if compare(item, best, op):
                best = item
        return best

    return pick


def _arr_slice(arr: Any, *args: Any) -> Any:
    start, stop, step = slice_bounds(args)
    current_budget().charge(container_cost(len(arr)))
    out = slice_seq(arr, start, stop, step)
    return tuple(out) if isinstance(arr, tuple) else out


ARRAY: dict[str, Fn] = {
    "default": default_value,
    "list": lambda v: list(_charged(v)),
    "first": lambda v: v[0] if v else UNDEF,
    "last": lambda v: v[-1] if v else UNDEF,
    "length": lambda v: len(v),
    "slice": _arr_slice,
    "selectattr": _select(False, "selectattr"),
    "select": _select(False, "select"),
    "rejectattr": _select(True, "rejectattr"),
    "reject": _select(True, "reject"),
    "join": _join,
    "string": as_string,
    "tojson": tojson,
    "map": _map,
    "append": _append,
    "pop": _pop,
    "sort": _sort,
    "reverse": lambda v: tuple(reversed(_charged(v))) if isinstance(v, tuple) else list(reversed(_charged(v))),
    "min": _extreme("lt"),
    "max": _extreme("gt"),
    "unique": not_implemented("Array unique builtin not implemented"),
}


# -- objects ----------------------------------------------------------------------------------


def _get(obj: Any, key: Any = UNDEF, default: Any = None) -> Any:
    if not isinstance(key, str):
        raise TemplateError("get: second argument must be a string (key)")
    return obj.get(key, default)


def _items(obj: Any) -> list[tuple[Any, Any]]:
    current_budget().charge(container_cost(len(obj)) + len(obj) * container_cost(2))  # the list, a pair per item
    return [tuple(p) for p in obj.items()]


def _dictsort(obj: Any, *args: Any, **kwargs: Any) -> dict[Any, Any]:
    import functools

    by = arg(args, kwargs, "by", 1)
    reverse = as_bool(arg(args, kwargs, "reverse", 2))
    index = 1 if by == "value" else 0
    cmp = _sort_key_cmp(reverse)
    def order(a: tuple[Any, Any], b: tuple[Any, Any]) -> int:
        return cmp(a[index], b[index])

    current_budget().charge(container_cost(len(obj)) * 3)  # the pairs, their list, the dict
    pairs = sorted(obj.items(), key=functools.cmp_to_key(order))
    return dict(pairs)


OBJECT: dict[str, Fn] = {
    "get": _get,
    "keys": lambda v: list(_charged(v).keys()),
    "values": lambda v: list(_charged(v).values()),
    "items": _items,
    "tojson": tojson,
    "string": as_string,
    "length": lambda v: len(v),
    "dictsort": _dictsort,
    "join": not_implemented("object join not implemented"),
}


def _const(value: Callable[[], Any]) -> Fn:
    return lambda *_a, **_k: value()


NONE: dict[str, Fn] = {
    "default": default_value,
    "tojson": tojson,
    "string": lambda v: "None",
    "safe": lambda v: "None",
    **{name: _const(list) for name in ("items", "map", "reject", "rejectattr", "select", "selectattr", "unique")},
}

UNDEFINED: dict[str, Fn] = {
    "default": default_value,
    **{name: _const(str) for name in ("capitalize", "join", "lower", "replace", "safe", "string", "strip", "title",
                                      "truncate", "upper")},
    **{name: _const(list) for name in ("items", "list", "map", "reject", "rejectattr", "reverse", "select",
                                       "selectattr", "sort", "unique")},
    **{name: _const(lambda: UNDEF) for name in ("first", "last", "max", "min")},
    **{name: _const(int) for name in ("length", "sum", "wordcount")},
}


def builtins_for(v: Any) -> dict[str, Fn]:
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, int):
        return INT
    if isinstance(v, float):
        return FLOAT
    if isinstance(v, str):
        return STRING
    if isinstance(v, (list, tuple)):
        return ARRAY
    if isinstance(v, dict):
        return OBJECT
    if isinstance(v, LoopContext):
        return {}
    if v is None:
        return NONE
    if is_undefined(v):
        return UNDEFINED
    return {}


class BoundBuiltin(Function):
    """The builtin ``name`` bound to its value: ``obj.method`` as a template sees it."""

    __slots__ = ("_fn", "_name", "_value")

    def __init__(self, fn: Fn, name: str, value: Any) -> None:
        self._fn, self._name, self._value = fn, name, value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return call_builtin(self._fn, self._name, self._value, args, kwargs)


def bind(v: Any, name: str) -> Fn | None:
    """The builtin ``name`` bound to ``v`` (a method), or None when the type has none."""
    fn = builtins_for(v).get(name)
    return None if fn is None else BoundBuiltin(fn, name, v)


def call_builtin(fn: Fn, name: str, v: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        return fn(v, *args, **kwargs)
    except TypeError as exc:
        raise TemplateError(f"{name}: invalid arguments for type {type_name(v)} ({exc})") from None


__all__ = ["builtins_for", "bind", "call_builtin", "equal", "slice_seq", "tojson", "default_value"]
