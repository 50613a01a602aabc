"""Upstream's ``tojson`` text, byte for byte.

Enters: a template value and tojson's options. Leaves: the JSON text upstream's engine writes:
insertion order, separators ``", "``/``": "`` (``","`` between items when an indent is given), numbers
as C++ ``ostream << double`` (``%g``, six significant digits), undefined as ``null``, control
characters as lowercase ``\\u00xx``; with ``ensure_ascii`` every non-ASCII character becomes a
lowercase ``\\uxxxx`` escape (surrogate pairs above the BMP). Functions and other values print
``null`` as upstream does. Raises ``JinjaLimitExceeded`` past the render's bounds (budget.py): the
text is measured while it is written, before it is joined.
"""

from __future__ import annotations

import json.encoder
import math
import re
from typing import Any

from jinja2.runtime import LoopContext, Undefined

from .budget import current_budget
from .errors import JinjaLimitExceeded
from .values import as_string

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


class _Writer:
    """The JSON text of one value, measured as it is written: a value may hold the same long string
    many times, or nest shared containers exponentially deep, so the walk stops (raising
    JinjaLimitExceeded) before the text passes the render's string bound, and checks the clock at
    every container."""

    __slots__ = ("out", "size", "limit", "budget", "indent", "newline", "item_sep", "key_sep", "_pads")

    def __init__(self, indent: int, item_sep: str, key_sep: str) -> None:
        self.out: list[str] = []
        self.size = 0
        self.budget = current_budget()
        self.limit = self.budget.limits.max_output_chars
        self.indent = indent
        self.newline = "\n" if indent >= 0 else ""
        self.item_sep = item_sep
        self.key_sep = key_sep
        self._pads: list[tuple[str, str]] = []

    def text(self) -> str:
        self.budget.charge_string(sum(map(len, self.out)))
        return "".join(self.out)

    def _grow(self, n: int) -> None:
        self.size += n
        if self.size > self.limit:
            raise JinjaLimitExceeded(f"tojson output of more than {self.limit} characters exceeds the bound")

    def _pad(self, level: int) -> tuple[str, str]:
        """(the closing bracket's indentation, an item's indentation) at ``level``."""
        pads = self._pads
        while len(pads) <= level:
            depth = len(pads)
            if self.indent > 0:
                self._grow(self.indent * (depth + 1))  # before building pads as wide as the template asks
                pads.append((" " * (depth * self.indent), " " * ((depth + 1) * self.indent)))
            else:
                pads.append(("", ""))
        return pads[level]

    def write(self, v: Any, level: int) -> None:
        out = self.out
        if v is None or isinstance(v, Undefined):
            out.append("null")
        elif isinstance(v, bool):
            out.append("true" if v else "false")
        elif isinstance(v, int):
            out.append(str(v))
        elif isinstance(v, float):
            out.append(format_g(v))
        elif isinstance(v, str):
            self._grow(len(v) + 2)
            text = _string(v)
            self.size += len(text) - len(v) - 2
            out.append(text)
        elif isinstance(v, (list, tuple)):
            self._container("[", "]", v, level, None)
        elif isinstance(v, dict):
            self._container("{", "}", v, level, self.key_sep)
        elif isinstance(v, LoopContext):
            out.append("{}")
        else:
            out.append("null")

    def _container(self, opening: str, closing: str, v: Any, level: int, key_sep: str | None) -> None:
        out = self.out
        budget = self.budget
        budget.check_time()
        out.append(opening)
        if v:
            close_pad, item_pad = self._pad(level)
            newline, item_sep = self.newline, self.item_sep
            per_item = 1 + len(item_pad) + len(newline) + len(item_sep) + (len(key_sep) if key_sep else 0)
            last = len(v) - 1
            out.append(newline)
            items = v.items() if key_sep is not None else v
            for i, item in enumerate(items):
                if i & 1023 == 1023:
                    budget.check_time()
                self._grow(per_item)
                out.append(item_pad)
                if key_sep is not None:
                    key = _string(as_string(item[0]))
                    self._grow(len(key))
                    out.append(key)
                    out.append(key_sep)
                    self.write(item[1], level + 1)
                else:
                    self.write(item, level + 1)
                if i < last:
                    out.append(item_sep)
                out.append(newline)
            out.append(close_pad)
        out.append(closing)


def to_json(v: Any, indent: int = -1, item_sep: str | None = None, key_sep: str = ": ",
            ensure_ascii: bool = False) -> str:
    """The JSON text of ``v``; ``indent < 0`` means one line. Raises JinjaLimitExceeded past the
    render's bounds (budget.py)."""
    if item_sep is None:
        item_sep = ", " if indent < 0 else ","
    writer = _Writer(indent, item_sep, key_sep)
    writer.write(v, 0)
    text = writer.text()
    if ensure_ascii:
        text = ascii_escape(text)
    return text


def ascii_escape(text: str) -> str:
    """Every non-ASCII character as lowercase ``\\uxxxx`` (pairs above U+FFFF), as upstream does
    inside and outside strings alike for characters it meets in string values."""
    if text.isascii():
        return text
    budget = current_budget()
    # six characters per UTF-16 unit of each non-ASCII character: measured at C speed, charged first
    ascii_count = len(text.encode("ascii", "ignore"))
    units = len(text.encode("utf-16-le", "surrogatepass")) // 2
    budget.charge_string(ascii_count + 6 * (units - ascii_count))
    parts = []
    for i in range(0, len(text), _CHUNK):
        budget.check_time()
        parts.append(_NON_ASCII.sub(_escape_char, text[i:i + _CHUNK]))
    return "".join(parts)


_CHUNK = 1 << 16
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _escape_char(match: re.Match[str]) -> str:
    cp = ord(match.group())
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    cp -= 0x10000
    return f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}"
