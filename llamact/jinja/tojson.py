"""Upstream's ``tojson`` text, byte for byte.

Enters: a template value and tojson's options. Leaves: the JSON text upstream's engine writes:
insertion order, separators ``", "``/``": "`` (``","`` between items when an indent is given), numbers
as C++ ``ostream << double`` (``%g``, six significant digits), undefined as ``null``, control
characters as lowercase ``\\u00xx``; with ``ensure_ascii`` every non-ASCII character becomes a
lowercase ``\\uxxxx`` escape (surrogate pairs above the BMP). Raises nothing for JSON-shaped values;
functions and other values print ``null`` as upstream does.
"""

from __future__ import annotations

import json.encoder
import math
from typing import Any

from jinja2.runtime import LoopContext, Undefined

_encode_string = json.encoder.encode_basestring  # the C implementation where available


def format_g(x: float) -> str:
    """C++ ``ostream << double``: ``%g`` with six significant digits."""
    if math.isnan(x):
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    if math.isinf(x):
        return "-inf" if x < 0 else "inf"
    return "%g" % x  # noqa: UP031 - C printf semantics are the point


def _string(s: str) -> str:
    # The C encoder of the json module escapes exactly what upstream does for text ('"', '\\',
    # \b \f \n \r \t, other controls as lowercase \u00xx, nothing else): same bytes, much faster
    # than a per-character loop (tojson of tool schemas dominates some templates' render time).
    return _encode_string(s)


def _write(out: list[str], v: Any, level: int, indent: int, item_sep: str, key_sep: str) -> None:
    newline = "\n" if indent >= 0 else ""
    pad = " " * (level * indent) if indent > 0 else ""
    step = " " * indent if indent > 0 else ""
    if v is None or isinstance(v, Undefined):
        out.append("null")
    elif isinstance(v, bool):
        out.append("true" if v else "false")
    elif isinstance(v, int):
        out.append(str(v))
    elif isinstance(v, float):
        out.append(format_g(v))
    elif isinstance(v, str):
        out.append(_string(v))
    elif isinstance(v, (list, tuple)):
        out.append("[")
        if v:
            out.append(newline)
            for i, item in enumerate(v):
                out.append(pad + step)
                _write(out, item, level + 1, indent, item_sep, key_sep)
                if i < len(v) - 1:
                    out.append(item_sep)
                out.append(newline)
            out.append(pad)
        out.append("]")
    elif isinstance(v, (dict, LoopContext)):
        items = list(v.items()) if isinstance(v, dict) else []
        out.append("{")
        if items:
            out.append(newline)
            for i, (key, val) in enumerate(items):
                out.append(pad + step)
                from .values import as_string

                out.append(_string(as_string(key)))
                out.append(key_sep)
                _write(out, val, level + 1, indent, item_sep, key_sep)
                if i < len(items) - 1:
                    out.append(item_sep)
                out.append(newline)
            out.append(pad)
        out.append("}")
    else:
        out.append("null")


def to_json(v: Any, indent: int = -1, item_sep: str | None = None, key_sep: str = ": ",
            ensure_ascii: bool = False) -> str:
    """The JSON text of ``v``; ``indent < 0`` means one line."""
    if item_sep is None:
        item_sep = ", " if indent < 0 else ","
    out: list[str] = []
    _write(out, v, 0, indent, item_sep, key_sep)
    text = "".join(out)
    if ensure_ascii:
        text = ascii_escape(text)
    return text


def ascii_escape(text: str) -> str:
    """Every non-ASCII character as lowercase ``\\uxxxx`` (pairs above U+FFFF), as upstream does
    inside and outside strings alike for characters it meets in string values."""
    out = []
    for ch in text:
        cp = ord(ch)
        if cp < 0x80:
            out.append(ch)
        elif cp <= 0xFFFF:
            out.append(f"\\u{cp:04x}")
        else:
            cp -= 0x10000
            out.append(f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}")
    return "".join(out)
