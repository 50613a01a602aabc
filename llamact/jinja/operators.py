"""Upstream's binary and unary operators (runtime.cpp ``binary_expression``), on template values.

Enters: an operator (``+ - * / % ~ == != < > <= >= in notin``) and two values. Leaves: the result.
Numbers are computed as doubles (integer results cast back); ``/`` is always a float and never
raises; a string operand makes ``+``/``~`` concatenate; ``<``-style comparisons are numeric only;
``str + none/undefined`` is the string. Raises ``TemplateError`` with upstream's message otherwise.
Results that grow (string concatenation and repeat, list concatenation) are charged to the render's
budget before they are built.
"""

from __future__ import annotations

import math
from typing import Any

from .budget import container_cost, current_budget
from .errors import TemplateError
from .tests import is_in
from .values import as_string, equal, is_int, is_number, is_undefined, type_name


def _divide(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _arith(op: str, a: Any, b: Any) -> Any:
    x, y = float(a), float(b)
    is_float = isinstance(a, float) or isinstance(b, float)
    if op in ("+", "-", "*"):
        res = x + y if op == "+" else x - y if op == "-" else x * y
        return res if is_float else _to_int(res)
    if op == "/":
        return _divide(x, y)
    if op == "%":
        rem = math.fmod(x, y) if y != 0 else math.nan
        return rem if is_float else _to_int(rem)
    if op == "<":
        return x < y
    if op == ">":
        return x > y
    if op == ">=":
        return x >= y
    if op == "<=":
        return x <= y
    raise TemplateError(f'Unknown operator "{op}" between {type_name(a)} and {type_name(b)}')


def _to_int(x: float) -> int:
    if math.isnan(x) or math.isinf(x):
        return -(2**63)
    return int(x)


def _concat_nullish(op: str, a: Any, b: Any) -> Any:
    null_a = a is None or is_undefined(a)
    null_b = b is None or is_undefined(b)
    if op in ("+", "~") and ((null_a and isinstance(b, str)) or (null_b and isinstance(a, str))):
        return ("" if null_a else as_string(a)) + ("" if null_b else as_string(b))
    return None


def binop(op: str, a: Any, b: Any) -> Any:
    if type(a) is str and type(b) is str and (op == "~" or op == "+"):
        # the hot path (templates concatenate text all the time); the general rule below agrees
        current_budget().charge_string(len(a) + len(b))
        return a + b
    if op == "==":
        return equal(a, b)
    if op == "!=":
        return not equal(a, b)
    if is_undefined(a) or is_undefined(b):
        if is_undefined(b) and op in ("in", "notin"):
            return op == "notin"
        res = _concat_nullish(op, a, b)
        if res is not None:
            return res
        shown = "not in" if op == "notin" else op
        raise TemplateError(f"Cannot perform operation {shown} on undefined values")
    if a is None or b is None:
        if b is not None and op in ("in", "notin"):
            return is_in(a, b) != (op == "notin")
        res = _concat_nullish(op, a, b)
        if res is not None:
            return res
        raise TemplateError("Cannot perform operation on null values")
    if is_number(a) and is_number(b) and op not in ("in", "notin", "~"):
        return _arith(op, a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if op == "+":
            current_budget().charge(container_cost(len(a) + len(b)))
            return list(a) + list(b)
    elif isinstance(b, (list, tuple)) and op in ("in", "notin"):
        return is_in(a, b) != (op == "notin")
    if (isinstance(a, str) or isinstance(b, str)) and op in ("~", "+"):
        left, right = as_string(a), as_string(b)
        current_budget().charge_string(len(left) + len(right))
        return left + right
    if op == "*" and ((isinstance(a, str) and is_int(b)) or (is_int(a) and isinstance(b, str))):
        text, times = (a, b) if isinstance(a, str) else (b, a)
        if times <= 0:
            return ""
        current_budget().charge_string(len(text) * times)
        return text * times
    if isinstance(a, str) and isinstance(b, str) and op in ("in", "notin"):
        return is_in(a, b) != (op == "notin")
    if isinstance(b, dict) and op in ("in", "notin"):
        return is_in(a, b) != (op == "notin")
    shown = "not in" if op == "notin" else op
    raise TemplateError(f'Unknown operator "{shown}" between {type_name(a)} and {type_name(b)}')


def chain(op: str, first: Any, *rest: Any) -> Any:
    """``first op rest[0] op rest[1] ...`` evaluated left to right, for ``~`` and ``+``.

    Once the running value is a string each further operand only appends its text (as ``binop``
    would: ``as_string``, nothing for none/undefined), so the result is built and charged once
    instead of one ever longer copy per operator: ``ns.out ~ a ~ b`` costs the result, not three.
    """
    acc = first
    i = 0
    while not isinstance(acc, str):
        if i == len(rest):
            return acc
        try:
            acc = binop(op, acc, rest[i])
        except TemplateError as exc:
            exc.operand_index = i  # type: ignore[attr-defined]  # which operator upstream blames
            raise
        i += 1
    if i == len(rest):
        return acc
    parts = [acc]
    size = len(acc)
    for b in rest[i:]:
        text = b if isinstance(b, str) else "" if b is None or is_undefined(b) else as_string(b)
        parts.append(text)
        size += len(text)
    current_budget().charge_string(size)
    return "".join(parts)


def unop(op: str, v: Any) -> Any:
    if op == "-":
        if is_number(v):
            return -v
        raise TemplateError("Unary - operator requires numeric operand")
    if op == "+":
        if is_number(v):
            return v
        raise TemplateError("Unary + operator requires numeric operand")
    raise TemplateError(f"Unknown unary operator '{op}'")
