"""Upstream's value model on plain Python values.

Template values are JSON-shaped Python values: ``str``, ``int``, ``float``, ``bool``, ``None``,
``list`` (array), ``tuple`` (upstream's tuple, e.g. ``items()`` pairs), ``dict`` (object), jinja2's
``Undefined`` and callables. This module holds what upstream's ``value_t`` methods define:
type names, ``as_string`` (printing and ``~``), truthiness, equality and ordering, the output rule
(``gather_string_parts``) and string length / indexing by UTF-8 bytes. Nothing here raises except
the comparisons upstream refuses (``TemplateError``).
"""

from __future__ import annotations

import json.encoder
import math
from collections.abc import Callable
from typing import Any

from jinja2.nodes import EvalContext
from jinja2.runtime import LoopContext, Macro, Undefined
from jinja2.utils import missing, pass_eval_context

from .budget import current_budget, paced
from .errors import JinjaLimitExceeded, TemplateError

Value = Any


class Namespace(dict[str, Any]):
    """What ``namespace()`` returns: an object the template made, so it may always write to it
    (isolation.py looks no further)."""

    __slots__ = ()


class Function:
    """Upstream's function value (a global, a builtin bound to its value): callable, and no
    boolean -- upstream's ``as_bool`` refuses one, so ``if``, ``and``, ``or``, ``not`` and the
    builtins that test truth do."""

    __slots__ = ()

    def __bool__(self) -> bool:
        raise TemplateError("Function is not a bool value")


class Builtin(Function):
    """A global function (raise_exception, namespace, ...) as a template sees it."""

    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)


class FunctionMacro(Macro):
    """A macro (or a call block's ``caller``): jinja2's, with ``Function``'s rule and upstream's
    argument binding (runtime.cpp ``bind_parameters``): the i-th parameter takes the keyword of its
    name, else the i-th argument when that is positional; a parameter past the arguments given takes
    its default, or fails when it has none; arguments past the parameters are ignored."""

    def __init__(self, environment: Any, func: Callable[..., str], name: str, arguments: list[str],
                 catch_kwargs: bool, catch_varargs: bool, caller: bool, default_autoescape: bool | None = None,
                 required: int = 0) -> None:
        super().__init__(environment, func, name, arguments, catch_kwargs, catch_varargs, caller, default_autoescape)
        self._required = required

    def __bool__(self) -> bool:
        raise TemplateError("Function is not a bool value")

    @pass_eval_context
    def __call__(self, *args: Any, **kwargs: Any) -> str:
        if args and isinstance(args[0], EvalContext):
            autoescape, args = args[0].autoescape, args[1:]
        else:
            autoescape = self._default_autoescape
        caller = kwargs.pop("caller", None) if self.caller else None
        given = len(args) + len(kwargs)
        undefined = self._environment.undefined
        values: list[Any] = []
        for i, name in enumerate(self.arguments):
            if i < given:
                values.append(kwargs[name] if name in kwargs else args[i] if i < len(args) else undefined())
            elif i < self._required:
                raise TemplateError(f"Not enough arguments provided to '{self.name}'")
            else:
                values.append(missing)  # the macro's code evaluates the default
        if self.caller:
            values.append(caller if caller is not None else undefined(name="caller"))
        if self.catch_kwargs:  # not upstream's: ``kwargs`` and ``varargs`` are plain names there
            values.append(undefined(name="kwargs"))
        if self.catch_varargs:
            values.append(undefined(name="varargs"))
        return self._invoke(values, autoescape)


def is_undefined(v: Value) -> bool:
    return isinstance(v, Undefined)


def is_int(v: Value) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Value) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_array(v: Value) -> bool:
    return isinstance(v, (list, tuple))


def is_object(v: Value) -> bool:
    return isinstance(v, (dict, LoopContext))


def type_name(v: Value) -> str:
    """Upstream's ``type()`` text, used in error messages."""
    if isinstance(v, bool):
        return "Boolean"
    if isinstance(v, int):
        return "Integer"
    if isinstance(v, float):
        return "Float"
    if isinstance(v, str):
        return "String"
    if isinstance(v, tuple):
        return "Tuple"
    if isinstance(v, list):
        return "Array"
    if is_object(v):
        return "Object"
    if v is None:
        return "None"
    if is_undefined(v):
        hint = getattr(v, "_undefined_name", None)  # what was looked up, as upstream's hint
        return f"Undefined (hint: '{hint}')" if isinstance(hint, str) and hint else "Undefined"
    if callable(v):
        return "Function"
    return "Unknown"


def format_float(x: float) -> str:
    """``std::to_string`` (six decimals) with trailing zeros trimmed, one kept after the point."""
    if math.isnan(x):
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    if math.isinf(x):
        return "-inf" if x < 0 else "inf"
    out = f"{x:.6f}".rstrip("0")
    return out + "0" if out.endswith(".") else out


def as_string(v: Value) -> str:
    """Upstream's ``as_string``: what ``~``/``+`` concatenation and ``string`` produce."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return format_float(v)
    if v is None:
        return "None"
    if isinstance(v, (list, tuple, dict)):
        return _Text().container(v)
    if is_undefined(v):
        return ""
    return type_name(v)


def as_repr(v: Value) -> str:
    """Upstream's ``value_to_string_repr``: strings quoted (JSON when they hold a quote)."""
    if isinstance(v, str):
        return _json_string(v) if "'" in v else "'" + v + "'"
    if is_undefined(v):
        return "Undefined"
    if v is None:
        return "None"
    return as_string(v)


def _json_string(s: str) -> str:
    """``to_json(s)`` for a string (tojson.py, which imports this module): the same text, the same
    bound checked first and the same charge after."""
    budget = current_budget()
    limit = budget.limits.max_output_chars
    if len(s) + 2 > limit:
        raise JinjaLimitExceeded(f"tojson output of more than {limit} characters exceeds the bound")
    text = json.encoder.encode_basestring(s)
    budget.charge_string(len(text))
    return text


class _Text:
    """``as_string`` of a container, bounded: a container may hold the same value many times (or
    nest shared values exponentially deep), so the text is measured as it is written, and the walk
    checks the clock at every container, before its size passes the render's string bound."""

    __slots__ = ("parts", "size", "budget", "limit")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.budget = current_budget()
        self.limit = self.budget.limits.max_output_chars

    def container(self, v: Value) -> str:
        self._write(v)
        self.budget.charge_string(self.size)
        return "".join(self.parts)

    def _add(self, s: str) -> None:
        self.size += len(s)
        if self.size > self.limit:
            raise JinjaLimitExceeded(f"a string of more than {self.limit} characters exceeds the bound")
        self.parts.append(s)

    def _write(self, v: Value) -> None:
        if not isinstance(v, (list, tuple, dict)):
            self._add(as_repr(v))
            return
        self.budget.check_time()
        items = v.items() if isinstance(v, dict) else v
        self._add("{" if isinstance(v, dict) else "(" if isinstance(v, tuple) else "[")
        for i, item in enumerate(items):
            if i:
                self._add(", ")
                if not i & 1023:
                    self.budget.check_time()
            if isinstance(v, dict):
                self._add(as_repr(item[0]))
                self._add(": ")
                self._write(item[1])
            else:
                self._write(item)
        if isinstance(v, tuple) and len(v) == 1:
            self._add(",")
        self._add("}" if isinstance(v, dict) else ")" if isinstance(v, tuple) else "]")


def as_bool(v: Value) -> bool:
    if is_undefined(v) or v is None:
        return False
    if isinstance(v, (str, list, tuple, dict)):
        return len(v) > 0
    if isinstance(v, (int, float)):
        return v != 0
    if callable(v):
        raise TemplateError(f"{type_name(v)} is not a bool value")
    return True


def printed(v: Value) -> str:
    """Upstream's output rule: strings and numbers print, arrays print their elements, the rest nothing."""
    if isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        return as_string(v)
    if isinstance(v, (list, tuple)):
        text = _Printed()
        text.write(v)
        text.budget.charge_string(text.size)
        return "".join(text.parts)
    return ""


class _Printed(_Text):
    """The printed text of an array: its elements, bounded like ``_Text`` (an array of arrays of
    empty arrays prints nothing yet may hold exponentially many, hence the clock check per array)."""

    __slots__ = ()

    def write(self, v: Value) -> None:
        for item in paced(v, self.budget):
            if isinstance(item, str):
                self._add(item)
            elif isinstance(item, (int, float)):
                self._add(as_string(item))
            elif isinstance(item, (list, tuple)):
                self.write(item)


def _trunc(x: int | float) -> int:
    return int(x) if math.isfinite(x) else 0


def _hashable(v: Value) -> bool:
    if isinstance(v, (list, tuple)):
        return all(_immutable_hashable(x) for x in paced(v, current_budget()))
    if isinstance(v, dict):
        return all(_immutable_hashable(x) for x in paced(v.values(), current_budget()))
    return True


def _immutable_hashable(v: Value) -> bool:
    # Upstream: only immutable, hashable members let containers compare equal; a nested list or
    # object is mutable, a tuple is immutable when its members are.
    if isinstance(v, (list, dict)):
        return False
    if isinstance(v, tuple):
        # paced: tuples may nest shared tuples exponentially deep
        return all(_immutable_hashable(x) for x in paced(v, current_budget()))
    return True


def equal(a: Value, b: Value) -> bool:
    """Upstream's ``==``: numbers by value, strings by bytes, containers structurally (hashable only)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        # numbers and booleans are equivalent when both their integer and double views agree
        return float(a) == float(b) and _trunc(a) == _trunc(b)
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if a is None or b is None:
        return a is None and b is None
    if is_undefined(a) or is_undefined(b):
        return is_undefined(a) and is_undefined(b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if isinstance(a, tuple) != isinstance(b, tuple) or len(a) != len(b):
            return False
        if not (_hashable(a) and _hashable(b)):
            return False
        # paced: nested containers check the clock themselves, scalars are cheap
        return all(equal(x, y) for x, y in paced(zip(a, b, strict=True), current_budget()))
    if isinstance(a, dict) and isinstance(b, dict):
        if len(a) != len(b) or not (_hashable(a) and _hashable(b)):
            return False
        pairs = paced(zip(a.items(), b.items(), strict=True), current_budget())
        return all(equal(ka, kb) and equal(va, vb) for (ka, va), (kb, vb) in pairs)
    return a is b


_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
    "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y, "le": lambda x, y: x <= y,
}


def compare(a: Value, b: Value, op: str) -> bool:
    """Upstream's ``value_compare`` (tests, sort, min/max, dictsort): numbers, then strings by bytes."""
    fn = _ORDER[op]
    if is_number(a) and is_number(b):
        return bool(fn(float(a), float(b)))
    if (isinstance(a, str) and (is_number(b) or isinstance(b, str))) or (isinstance(b, str) and is_number(a)):
        return bool(fn(as_string(a).encode(), as_string(b).encode()))
    if isinstance(a, bool) and isinstance(b, bool):
        if op in ("eq", "ne"):
            return bool(fn(a, b))
        raise TemplateError("Unsupported comparison operator for bool type")
    return False


def utf8_len(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def utf8_index(s: str, index: int) -> Value:
    """One byte of the string as a string (a lone byte of a multi-byte character decodes lossily)."""
    data = s.encode("utf-8", "surrogatepass")
    if 0 <= index < len(data):
        return data[index:index + 1].decode("utf-8", "replace")
    return None
