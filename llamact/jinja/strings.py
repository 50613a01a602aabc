"""Upstream's string builtins (``value_string_t::get_builtins``): ASCII-only case mapping, byte
lengths and slices, split/rsplit/replace/format/int/float/indent in upstream's argument forms.

Enters: a string and the call's arguments. Leaves: a template value. Raises ``TemplateError`` or
``NotImplementedTemplateError`` with upstream's messages. A string may be as long as the render's
bound (millions of characters), so each builtin computes its result's size and charges the budget
before building it, and works at C speed or in chunks that check the clock.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from .budget import OBJECT_BYTES, container_cost, current_budget
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

_LOWERCASE = "abcdefghijklmnopqrstuvwxyz"
_UPPER_TABLE = str.maketrans(_LOWERCASE, _LOWERCASE.upper())
_LOWER_TABLE = str.maketrans(_LOWERCASE.upper(), _LOWERCASE)
_CHUNK = 1 << 16  # characters a Python-level pass handles between clock checks


def _charged(length: int) -> None:
    current_budget().charge_string(length)


def _upper(s: str) -> str:
    _charged(len(s))
    return s.translate(_UPPER_TABLE)  # ASCII letters only, as upstream


def _lower(s: str) -> str:
    _charged(len(s))
    return s.translate(_LOWER_TABLE)


def _title_part(s: str, start: bool) -> str:
    out = []
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


def _title(s: str) -> str:
    budget = current_budget()
    budget.charge_string(len(s))
    parts = []
    for i in range(0, len(s), _CHUNK):
        budget.check_time()
        parts.append(_title_part(s[i:i + _CHUNK], i == 0 or s[i - 1] in " \t\n\r\v\f"))
    return "".join(parts)


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
        _charged(len(v))
        if len(cs) > 64:
            return _strip_set(v, frozenset(cs), left, right)
        if left:
            v = v.lstrip(cs)
        if right:
            v = v.rstrip(cs)
        return v

    return strip


def _strip_set(v: str, cs: frozenset[str], left: bool, right: bool) -> str:
    """``strip`` with a long set of characters: str.strip scans the whole set for every character
    it removes, so long sets are matched through a set, in chunks that check the clock."""
    budget = current_budget()
    start, end = 0, len(v)
    while left and start < end:
        budget.check_time()
        chunk_end = min(start + _CHUNK, end)
        while start < chunk_end and v[start] in cs:
            start += 1
        if start < chunk_end:
            break
    while right and end > start:
        budget.check_time()
        chunk_start = max(end - _CHUNK, start)
        while end > chunk_start and v[end - 1] in cs:
            end -= 1
        if end > chunk_start:
            break
    return v[start:end]


def _split_fn(name: str, right: bool) -> Fn:
    def split(v: Any, *args: Any) -> list[str]:
        if not isinstance(v, str):
            raise TemplateError(f"{name}() first argument must be a string")
        delim = as_string(args[0]) if args else " "
        if not delim:
            raise TemplateError("empty separator")
        maxsplit = int(args[1]) if len(args) > 1 and is_number(args[1]) else -1
        pieces = v.count(delim) + 1
        if maxsplit >= 0:
            pieces = min(pieces, maxsplit + 1)
        # the pieces' characters, a string object per piece, and their list
        current_budget().charge(len(v) + pieces * OBJECT_BYTES + container_cost(pieces))
        return v.rsplit(delim, maxsplit) if right else v.split(delim, maxsplit)

    return split


def _replace(v: Any, old: Any = UNDEF, new: Any = UNDEF, count: Any = UNDEF) -> str:
    if not (isinstance(v, str) and isinstance(old, str) and isinstance(new, str)):
        raise TemplateError("replace: arguments must be strings")
    if is_int(count) and count > 0:
        raise NotImplementedTemplateError("String replace with count argument not implemented")
    if old == new:
        return v
    if old == "":
        # ``new`` before every character and at the end
        _charged(len(v) + len(new) * (len(v) + 1))
        return new + new.join(v) + new if v else new
    _charged(len(v) + v.count(old) * (len(new) - len(old)))
    return v.replace(old, new)


_KWARG = object()  # a keyword argument, which upstream passes on as a positional KwArg value


def _format(v: Any, *args: Any, **kwargs: Any) -> str:
    if not isinstance(v, str):
        raise TemplateError("format() first argument must be a string")
    values = (*args, *(_KWARG for _ in kwargs))
    budget = current_budget()
    pieces = v.split("{")  # every piece after the first must open with the placeholder's "}"
    out = [pieces[0]]
    size = len(pieces[0])
    for k, piece in enumerate(pieces[1:]):
        if not k % 1024:
            budget.check_time()
        if not piece.startswith("}"):
            raise NotImplementedTemplateError("format() only supports simple '{}' placeholders")
        value = pos(values, k, "format")
        if value is _KWARG or is_undefined(value):  # upstream's as_string() refuses these two
            raise TemplateError(f"{'KwArg' if value is _KWARG else type_name(value)} is not a string value")
        text = as_string(value)
        size += len(text) + len(piece) - 1
        if size > budget.limits.max_output_chars:
            budget.charge_string(size)  # raises before the pieces outgrow the bound
        out.append(text)
        out.append(piece[1:])
    budget.charge_string(size)
    return "".join(out)


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
    run = _digit_run(base).match(s)
    if run is None:
        raise ValueError(s)
    digits = run.group().lstrip("0") or "0"
    if len(digits) > 32:  # past int32 in any base: out of range, without converting millions of digits
        raise ValueError(s)
    value = sign * int(digits, base)
    if not -(2**31) <= value < 2**31:
        raise ValueError(s)
    return value


_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


@functools.lru_cache(maxsize=64)
def _digit_run(base: int) -> re.Pattern[str]:
    """The longest prefix of digits valid in ``base`` (either case)."""
    valid = _DIGITS[:base]
    return re.compile("[" + re.escape(valid + valid.upper()) + "]+")


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
    _charged(len(v) * 4)  # the bytes, their slice, and the decoded text at most
    data = v.encode("utf-8", "surrogatepass")
    return bytes(slice_seq(data, start, stop, step)).decode("utf-8", "replace")


def _indent(v: Any, *args: Any, **kwargs: Any) -> str:
    width = arg(args, kwargs, "width", 0)
    first = as_bool(arg(args, kwargs, "first", 1))
    blank = as_bool(arg(args, kwargs, "blank", 2))
    if not isinstance(v, str):
        raise TemplateError("indent() first argument must be a string")
    if is_int(width):
        _charged(max(width, 0))  # the pad itself, before it is built
        pad = " " * max(width, 0)
    elif isinstance(width, str):
        pad = width
    else:
        pad = "    "
    if not v:
        return ""
    trailing = v.endswith("\n")
    body = v[:-1] if trailing else v
    # at most one pad per line, plus one after the trailing newline
    _charged(len(v) + len(pad) * (body.count("\n") + 2))
    head, newline, rest = body.partition("\n")
    text = pad + head if first else head
    if newline:
        rest = "\n" + rest
        if blank:
            rest = rest.replace("\n", "\n" + pad)
        else:  # pad only the lines that are not empty
            rest = _NONEMPTY_LINE.sub("\n" + pad.replace("\\", "\\\\"), rest)
        text += rest
    if trailing:
        text += "\n" + (pad if blank else "")
    return text


_NONEMPTY_LINE = re.compile(r"\n(?=[^\n])")


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
    "split": _split_fn("split", right=False),
    "rsplit": _split_fn("rsplit", right=True),
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
