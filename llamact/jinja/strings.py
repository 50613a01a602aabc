"""Upstream's string builtins (``value_string_t::get_builtins``): ASCII-only case mapping, byte
lengths and slices, split/rsplit/replace/format/int/float/indent in upstream's argument forms.

Enters: a string and the call's arguments. Leaves: a template value. Raises ``TemplateError`` or
``NotImplementedTemplateError`` with upstream's messages.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .callargs import (
    UNDEF,
    Fn,
    arg,
    default_value,
    ensure_vals,
    not_implemented,
    pos,
    slice_bounds,
    slice_seq,
    tojson,
)
from .errors import NotImplementedTemplateError, TemplateError
from .values import as_bool, as_string, is_int, is_number, is_undefined, type_name, utf8_len


def _ascii_map(s: str, fn: Callable[[str], str]) -> str:
    return "".join(fn(c) if c.isascii() else c for c in s)


def _upper(s: str) -> str:
    return _ascii_map(s, str.upper)


def _lower(s: str) -> str:
    return _ascii_map(s, str.lower)


def _title(s: str) -> str:
    out, start = [], True
    for c in s:
        if c in " \t\n\r\v\f":
            start = True
            out.append(c)
        elif start:
            out.append(c.upper() if c.isascii() else c)
            start = False
        else:
            out.append(c.lower() if c.isascii() else c)
    return "".join(out)


def _capitalize(s: str) -> str:
    if not s:
        return s
    return (s[0].upper() if s[0].isascii() else s[0]) + _lower(s[1:])


_SPACE = " \t\n\r\v\f"


def _strip_fn(left: bool, right: bool, name: str) -> Fn:
    def strip(v: Any, *args: Any, **kwargs: Any) -> str:
        if not isinstance(v, str):
            raise TemplateError(f"{name}() first argument must be a string")
        chars = arg(args, kwargs, "chars", 0)
        cs = _SPACE if is_undefined(chars) else as_string(chars)
        if left:
            v = v.lstrip(cs)
        if right:
            v = v.rstrip(cs)
        return v

    return strip


def _split(v: Any, *args: Any) -> list[str]:
    if not isinstance(v, str):
        raise TemplateError("split() first argument must be a string")
    delim = as_string(args[0]) if args else " "
    if not delim:
        raise TemplateError("empty separator")
    maxsplit = int(args[1]) if len(args) > 1 and is_number(args[1]) else -1
    return v.split(delim, maxsplit)


def _rsplit(v: Any, *args: Any) -> list[str]:
    if not isinstance(v, str):
        raise TemplateError("rsplit() first argument must be a string")
    delim = as_string(args[0]) if args else " "
    if not delim:
        raise TemplateError("empty separator")
    maxsplit = int(args[1]) if len(args) > 1 and is_number(args[1]) else -1
    return v.rsplit(delim, maxsplit)


def _replace(v: Any, old: Any = UNDEF, new: Any = UNDEF, count: Any = UNDEF) -> str:
    if not (isinstance(v, str) and isinstance(old, str) and isinstance(new, str)):
        raise TemplateError("replace: arguments must be strings")
    if is_int(count) and count > 0:
        raise NotImplementedTemplateError("String replace with count argument not implemented")
    if old == new:
        return v
    if old == "":
        return new + "".join(c + new for c in v)
    return v.replace(old, new)


_KWARG = object()  # a keyword argument, which upstream passes on as a positional KwArg value


def _format(v: Any, *args: Any, **kwargs: Any) -> str:
    if not isinstance(v, str):
        raise TemplateError("format() first argument must be a string")
    values = (*args, *(_KWARG for _ in kwargs))
    out, i, k = [], 0, 0
    while i < len(v):
        c = v[i]
        if c != "{":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(v) or v[i + 1] != "}":
            raise NotImplementedTemplateError("format() only supports simple '{}' placeholders")
        value = pos(values, k, "format")
        if value is _KWARG or is_undefined(value):  # upstream's as_string() refuses these two
            raise TemplateError(f"{'KwArg' if value is _KWARG else type_name(value)} is not a string value")
        out.append(as_string(value))
        k += 1
        i += 2
    return "".join(out)


_INT_RE = re.compile(r"\s*([+-]?)(0[xX]|0[bB]|0[oO])?([0-9a-zA-Z]+)")


def _stoi(s: str, base: int) -> int:
    """``std::stoi``: leading blanks, a sign, the longest valid prefix; ValueError when none."""
    s = s.lstrip(" \t\n\r\v\f")
    sign = 1
    if s[:1] in "+-" and s:
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if base in (0, 16) and s[:2].lower() == "0x" and len(s) > 2:
        s, base = s[2:], 16
    elif base == 0:
        base = 8 if s[:1] == "0" and len(s) > 1 else 10
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"[:base]
    n = 0
    while n < len(s) and s[n].lower() in digits:
        n += 1
    if n == 0:
        raise ValueError(s)
    value = sign * int(s[:n], base)
    if not -(2**31) <= value < 2**31:
        raise ValueError(s)
    return value


def _str_int(v: Any, *args: Any, **kwargs: Any) -> int:
    dflt = arg(args, kwargs, "default", 0)
    base_v = arg(args, kwargs, "base", 1)
    base = 10 if is_undefined(base_v) else int(base_v)
    if base != 0 and not 2 <= base <= 36:
        raise TemplateError("int() base must be 0 or between 2 and 36")
    if not isinstance(v, str):
        raise TemplateError("int() first argument must be a string")
    try:
        return _stoi(v, base)
    except ValueError:
        return 0 if is_undefined(dflt) else int(dflt)


_FLOAT_RE = re.compile(r"\s*[+-]?(inf(inity)?|nan|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)", re.IGNORECASE)


def _str_float(v: Any, *args: Any, **kwargs: Any) -> float:
    dflt = arg(args, kwargs, "default", 0)
    m = _FLOAT_RE.match(v)
    if m:
        try:
            return float(m.group(0))
        except ValueError:
            pass
    return 0.0 if is_undefined(dflt) else float(dflt)


def _str_slice(v: Any, *args: Any) -> str:
    start, stop, step = slice_bounds(args)
    data = v.encode("utf-8", "surrogatepass")
    return bytes(slice_seq(data, start, stop, step)).decode("utf-8", "replace")


def _indent(v: Any, *args: Any, **kwargs: Any) -> str:
    width = arg(args, kwargs, "width", 0)
    first = as_bool(arg(args, kwargs, "first", 1))
    blank = as_bool(arg(args, kwargs, "blank", 2))
    if not isinstance(v, str):
        raise TemplateError("indent() first argument must be a string")
    if is_int(width):
        pad = " " * max(width, 0)
    elif isinstance(width, str):
        pad = width
    else:
        pad = "    "
    lines = v.split("\n")
    if v.endswith("\n"):
        lines.pop()
    out: list[str] = []
    for i, line in enumerate(lines):
        if i == 0 and not v:
            break
        if (first if i == 0 else (line != "" or blank)):
            line = pad + line
        out.append(line)
    text = "\n".join(out)
    if v.endswith("\n"):
        text += "\n" + (pad if blank else "")
    return text


def _affix(name: str, v: str, args: tuple[Any, ...]) -> bool:
    """``startswith`` / ``endswith``: one string argument (type-checked as upstream does), by bytes."""
    ensure_vals(name, (v, *args), ("string", "string"))
    return v.encode().startswith(args[0].encode()) if name == "startswith" else v.encode().endswith(args[0].encode())


STRING: dict[str, Fn] = {
    "default": default_value,
    "upper": _upper,
    "lower": _lower,
    "strip": _strip_fn(True, True, "strip"),
    "rstrip": _strip_fn(False, True, "rstrip"),
    "lstrip": _strip_fn(True, False, "lstrip"),
    "title": _title,
    "capitalize": _capitalize,
    "length": utf8_len,
    "startswith": lambda v, *a: _affix("startswith", v, a),
    "endswith": lambda v, *a: _affix("endswith", v, a),
    "split": _split,
    "rsplit": _rsplit,
    "replace": _replace,
    "format": _format,
    "int": _str_int,
    "float": _str_float,
    "string": lambda v: v,
    "slice": _str_slice,
    "safe": lambda v: v,
    "tojson": tojson,
    "indent": _indent,
    "join": not_implemented("String join builtin not implemented"),
}
