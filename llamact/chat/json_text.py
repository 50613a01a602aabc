"""JSON text read as upstream reads it (nlohmann ``ordered_json::parse``).

    parse_json(text) -> Json         raises JsonParseError

What enters: JSON text (tool-call arguments, template kwargs, a response-format schema given as
text). What leaves: the value upstream holds: keys in first-seen order with the last value of a
repeated key, integers past 64 bits as doubles. NaN / Infinity literals, numbers that overflow a
double and trailing text are errors, as they are for nlohmann.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..errors import LlamaInferenceException
from ..grammar.json_value import normalize

__all__ = ["JsonParseError", "parse_json"]

Json = Any


class JsonParseError(LlamaInferenceException):
    """Text that is not JSON; ``message`` says where."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid literal '{name}'")


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number overflow parsing '{text}'")
    return value


def parse_json(text: str) -> Json:
    """``text`` parsed as upstream parses it; raises JsonParseError."""
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_float)
    except json.JSONDecodeError as exc:
        raise JsonParseError(f"parse error at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                             {"line": exc.lineno, "column": exc.colno}) from None
    except (ValueError, RecursionError) as exc:
        raise JsonParseError(f"parse error: {exc}") from None
    return normalize(value)
