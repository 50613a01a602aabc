"""JSON values as upstream's ``common_json`` (nlohmann ``ordered_json``) sees them.

The schema model and the converter read plain Python JSON values (``dict``/``list``/``str``/``int``/
``float``/``bool``/``None``); this module gives them nlohmann's meaning where it differs from
Python's:

* :func:`normalize` -- what enters: any JSON-compatible Python value. What leaves: the value that
  upstream holds after parsing its JSON text: an integer outside ``[-2**63, 2**64)`` becomes a
  float (nlohmann parses it as a double), a tuple becomes a list, insertion order is kept.
  Raises ``LlamaUnsupportedException`` for a value JSON cannot carry (NaN, infinities, a number
  too large even for a double, a non-string object key, any other Python type).
* :func:`is_integer` / :func:`is_number` -- nlohmann's ``is_number_integer`` / ``is_number``
  (a ``bool`` is not a number).
* :func:`to_int32` / :func:`to_int64` -- ``get<int>()`` / ``get<int64_t>()``: two's-complement
  truncation, as the C++ casts do.
* :func:`dump` -- ``dump()`` with no indent: compact separators, strings escaped as nlohmann
  escapes them (``\\b \\f \\n \\r \\t``, other controls as lowercase ``\\u00xx``, non-ASCII raw),
  floats as nlohmann's Grisu2 writes them (:mod:`.nlohmann_dtoa`) (``1.0``, ``1e+16``, ``1.5e-07``, ``-0.0``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..errors import LlamaUnsupportedException
from .nlohmann_dtoa import grisu2

__all__ = ["dump", "dump_indented", "is_integer", "is_number", "nlohmann_type_name", "normalize", "to_int32",
           "to_int64"]

_INT64_MIN = -(2**63)
_UINT64_END = 2**64


def normalize(value: Any, path: str = "#") -> Any:
    """The value as upstream holds it after parsing (see the module docstring)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if _INT64_MIN <= value < _UINT64_END:
            return int(value)
        try:
            return float(value)
        except OverflowError:
            raise LlamaUnsupportedException(f"JSON number at {path} is too large for a double",
                                            {"path": path}) from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise LlamaUnsupportedException(f"JSON cannot carry the number {value!r} at {path}", {"path": path})
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise LlamaUnsupportedException(f"JSON object key {key!r} at {path} is not a string", {"path": path})
            out[key] = normalize(item, f"{path}/{key}")
        return out
    if isinstance(value, (list, tuple)):
        return [normalize(item, f"{path}/{i}") for i, item in enumerate(value)]
    raise LlamaUnsupportedException(f"{type(value).__name__} at {path} is not a JSON value", {"path": path})


def is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def to_int32(value: int) -> int:
    """``static_cast<int>`` of an int64/uint64 value."""
    return ((value + 2**31) % 2**32) - 2**31


def to_int64(value: int) -> int:
    """``static_cast<int64_t>`` (wrapping) of an integer."""
    return ((value + 2**63) % 2**64) - 2**63


def dump(value: Any) -> str:
    """nlohmann's compact ``dump()`` of a normalized value."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _dump_float(value)
    if isinstance(value, str):
        return dump_string(value)
    if isinstance(value, list):
        return "[" + ",".join(dump(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(dump_string(k) + ":" + dump(v) for k, v in value.items()) + "}"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def dump_indented(value: Any, indent: int = 2, _level: int = 0) -> str:
    """nlohmann's ``dump(indent)``: one member per line, ``": "`` after keys, ``{}`` / ``[]`` when empty."""
    if isinstance(value, dict) and value:
        inner = " " * (indent * (_level + 1))
        members = [f"{inner}{dump_string(k)}: {dump_indented(v, indent, _level + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(members) + "\n" + " " * (indent * _level) + "}"
    if isinstance(value, list) and value:
        inner = " " * (indent * (_level + 1))
        items = [inner + dump_indented(v, indent, _level + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * (indent * _level) + "]"
    return dump(value)


def nlohmann_type_name(value: Any) -> str:
    """nlohmann's ``type_name()`` of a JSON value (used in its exception texts)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "discarded"


_ESCAPES = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r", 0x22: '\\"', 0x5C: "\\\\"}
_ESCAPE_TABLE = {c: _ESCAPES.get(c, f"\\u{c:04x}") for c in range(0x20)}
_ESCAPE_TABLE[0x22] = '\\"'
_ESCAPE_TABLE[0x5C] = "\\\\"


def dump_string(text: str) -> str:
    return '"' + text.translate(_ESCAPE_TABLE) + '"'


def _dump_float(value: float) -> str:
    if not math.isfinite(value):
        return "null"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    value = abs(value)
    if value == 0.0:
        return sign + "0.0"
    digits, decimal_exponent = grisu2(value)
    return sign + _format_buffer(digits, len(digits) + decimal_exponent)


def _format_buffer(digits: str, n: int, min_exp: int = -4, max_exp: int = 15) -> str:
    """nlohmann's ``format_buffer``: ``digits`` with the decimal point ``n`` places from their start."""
    k = len(digits)
    if k <= n <= max_exp:
        return digits + "0" * (n - k) + ".0"
    if 0 < n <= max_exp:
        return digits[:n] + "." + digits[n:]
    if min_exp < n <= 0:
        return "0." + "0" * (-n) + digits
    mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
    e = n - 1
    return mantissa + "e" + ("-" if e < 0 else "+") + (f"{abs(e):02d}")
