"""Argument handling shared by the builtins: upstream's ``get_kwarg_or_pos`` forms, slicing and
the builtins every type has (``default``, ``tojson``).

Enters: the input value and a call's positional/keyword arguments. Leaves: values. Raises
``TemplateError`` / ``NotImplementedTemplateError`` with upstream's messages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jinja2.runtime import Undefined

from .errors import NotImplementedTemplateError, TemplateError
from .tojson import to_json
from .values import as_bool, as_string, is_array, is_int, is_undefined, type_name

Fn = Callable[..., Any]
UNDEF = Undefined()


def arg(args: tuple[Any, ...], kwargs: dict[str, Any], name: str, pos: int) -> Any:
    """``get_kwarg_or_pos``: the keyword if given, else positional ``pos`` (after the input)."""
    if name in kwargs:
        return kwargs[name]
    return args[pos] if pos < len(args) else UNDEF


def pos(args: tuple[Any, ...], pos: int, fn: str) -> Any:
    if pos < len(args):
        return args[pos]
    raise TemplateError(f"Function '{fn}' expected at least {pos + 2} arguments, got {len(args) + 1}")


def count(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    return 1 + len(args) + len(kwargs)


def slice_seq(seq: Any, start: int, stop: int, step: int) -> Any:
    """Upstream's Python-like slicing (clamped bounds, negative steps), as a list (bytes for bytes)."""
    n = len(seq)
    if step > 0:
        start = max(n + start, 0) if start < 0 else min(start, n)
        stop = max(n + stop, 0) if stop < 0 else min(stop, n)
        # every index in [start, stop) is valid: Python's own slice takes exactly those, at C speed
        out = seq[start:stop:step]
    elif step < 0:
        # upstream clamps a negative start to 0 where Python would take nothing: clamp first, then
        # slice down to ``stop`` (-1 means "through index 0", which Python spells None)
        start = max(n + start, 0) if start < 0 else min(start, n - 1)
        stop = max(n + stop, -1) if stop < -1 else min(stop, n - 1)
        if n == 0 or start < 0:
            return seq[0:0] if isinstance(seq, bytes) else []
        out = seq[start:(None if stop < 0 else stop):step]
    else:
        return []
    return out if isinstance(out, (list, bytes)) else list(out)


# Upstream names the expected type with typeid(std::shared_ptr<jinja::value_<kind>_t>).name(): the
# Itanium ABI mangling the pinned build (GCC / Clang) prints.
_KINDS: dict[str, Callable[[Any], bool]] = {"string": lambda v: isinstance(v, str), "int": is_int}


def _typeid(kind: str) -> str:
    name = f"value_{kind}_t"
    return f"St10shared_ptrIN5jinja{len(name)}{name}EE"


def ensure_vals(fn: str, values: tuple[Any, ...], kinds: tuple[str, ...]) -> None:
    """Upstream's ``func_args::ensure_vals``: at least ``len(kinds)`` arguments (the input counts
    as the first), each of its kind (``"any"``: checked by the caller); the same messages."""
    if len(values) < len(kinds):
        raise TemplateError(f"Function '{fn}' expected between {len(kinds)} and 999 arguments, got {len(values)}")
    for value, kind in zip(values, kinds, strict=False):
        if kind != "any" and not _KINDS[kind](value):
            raise TemplateError(f"Function '{fn}' expected value of type {_typeid(kind)}, got {type_name(value)}")


def slice_bounds(args: tuple[Any, ...]) -> tuple[int, int, int]:
    # Upstream counts the input among the arguments (so one bound reads an undefined stop) and
    # type-checks the start (ensure_vals); the other bounds fail in as_int.
    if len(args) > 3:
        raise TemplateError(f"Function 'slice' expected between 1 and 4 arguments, got {len(args) + 1}")
    ensure_vals("slice", (None, *args), ("any", "int"))
    if len(args) < 2:
        raise TemplateError("Undefined is not an int value")
    for a in args:
        if not is_int(a):
            raise TemplateError(f"{type_name(a)} is not an int value")
    start, stop = int(args[0]), int(args[1])
    step = int(args[2]) if len(args) > 2 else 1
    if step == 0:
        raise TemplateError("slice step cannot be zero")
    return start, stop, step


# -- shared -----------------------------------------------------------------------------------


def default_value(v: Any, *args: Any, **kwargs: Any) -> Any:
    if not 2 <= count(args, kwargs) <= 3:
        raise TemplateError("Function 'default' expected between 2 and 3 arguments")
    fallback = pos(args, 0, "default")
    if as_bool(arg(args, kwargs, "boolean", 1)):
        missing = not as_bool(v)
    else:
        missing = is_undefined(v) or v is None
    return fallback if missing else v


def tojson(v: Any, *args: Any, **kwargs: Any) -> str:
    indent_v = arg(args, kwargs, "indent", 1)
    seps = arg(args, kwargs, "separators", 2)
    if as_bool(arg(args, kwargs, "sort_keys", 3)):
        raise NotImplementedTemplateError("tojson sort_keys=true not implemented")
    indent = int(indent_v) if is_int(indent_v) else -1
    seps = list(seps) if is_array(seps) else []
    item_sep = as_string(seps[0]) if seps else None
    key_sep = as_string(seps[1]) if len(seps) > 1 else ": "
    return to_json(v, indent, item_sep, key_sep, ensure_ascii=as_bool(arg(args, kwargs, "ensure_ascii", 0)))


def not_implemented(what: str) -> Fn:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise NotImplementedTemplateError(what)

    return refuse
