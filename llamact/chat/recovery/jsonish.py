"""JSON and Python call syntax as models write them: read leniently, each leniency named.

    loads_lenient(text) -> (value, rules) | None      JSON, or JSON with single quotes, Python literals
                                                      (True / False / None) or trailing commas
    python_calls(text) -> [(name, args, positional)] | None
                                                      ``f(a=1)`` / ``[f(a=1), g(b="x")]`` read as
                                                      calls (literal values only: nothing is evaluated)
    Brackets                                          where a bracketed value that starts at an offset
                                                      ends, found incrementally as text is appended

Enters: text. Leaves: plain JSON values (dict, list, str, int, float, bool, None) and the names of
the leniencies used (``SINGLE_QUOTES``, ``TRAILING_COMMA``). Raises nothing: what cannot be read is
None. Python's ``ast`` only parses the text (``literal_eval`` on each value node): no code runs.
"""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Any

from ..peg_mappers import normalize_quotes_to_json
from .rules import PYTHON_CALL, SINGLE_QUOTES, TRAILING_COMMA

__all__ = ["Brackets", "loads_lenient", "python_calls"]

# a candidate longer than this is not read as a call (bounds the work one reply can cause)
MAX_CALL_TEXT = 256 * 1024
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_STRING_OR_COMMA = re.compile(r'"(?:[^"\\]|\\.)*"|,\s*[}\]]', re.S)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _strict(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def _drop_trailing_commas(text: str) -> str:
    """JSON text (double-quoted strings) without the commas right before a ``}`` or ``]``."""
    if "," not in text:
        return text

    def fix(m: re.Match[str]) -> str:
        token = m.group()
        return token if token.startswith('"') else _TRAILING_COMMA.sub(r"\1", token)

    return _STRING_OR_COMMA.sub(fix, text)


def loads_lenient(text: str) -> tuple[Any, frozenset[str]] | None:
    """``text`` as a JSON value and the leniencies it needed (none for valid JSON); None when even
    the lenient reading fails."""
    if len(text) > MAX_CALL_TEXT:
        return None
    try:
        return _strict(text), frozenset()
    except (ValueError, RecursionError):
        pass
    rules: set[str] = set()
    fixed = normalize_quotes_to_json(text)
    if fixed != text:
        rules.add(SINGLE_QUOTES)
    no_commas = _drop_trailing_commas(fixed)
    if no_commas != fixed:
        rules.add(TRAILING_COMMA)
    if not rules:
        return None
    try:
        return _strict(no_commas), frozenset(rules)
    except (ValueError, RecursionError):
        return None


# -- Python calls ------------------------------------------------------------------------------------

_JSON_NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


class _NotLiteral(Exception):
    pass


def _plain(value: Any) -> Any:
    """A literal_eval result as a JSON value (tuples become lists); _NotLiteral for anything else."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotLiteral
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise _NotLiteral
        return {k: _plain(v) for k, v in value.items()}
    raise _NotLiteral


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise _NotLiteral
        keys = [_literal(k) for k in node.keys if k is not None]
        if not all(isinstance(k, str) for k in keys):
            raise _NotLiteral
        return dict(zip(keys, (_literal(v) for v in node.values), strict=True))
    try:
        return _plain(ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise _NotLiteral from exc


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def _call(node: ast.expr) -> tuple[str, dict[str, Any], list[Any]] | None:
    if not isinstance(node, ast.Call):
        return None
    name = _dotted(node.func)
    if name is None or any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        return None
    try:
        positional = [_literal(a) for a in node.args]
        keywords = {str(k.arg): _literal(k.value) for k in node.keywords}
    except _NotLiteral:
        return None
    return name, keywords, positional


def python_calls(text: str) -> tuple[list[tuple[str, dict[str, Any], list[Any]]], frozenset[str]] | None:
    """The calls of ``f(a=1)``, ``f(1, b="x")`` or a list / tuple of such calls, as (name, keyword
    arguments, positional arguments); None unless the whole text is such calls."""
    text = text.strip()
    if not text or len(text) > MAX_CALL_TEXT:
        return None
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    body = tree.body
    nodes = body.elts if isinstance(body, (ast.List, ast.Tuple)) else [body]
    calls = [_call(n) for n in nodes]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None], frozenset({PYTHON_CALL})


# -- where a bracketed value ends --------------------------------------------------------------------

_CLOSE = {"{": "}", "[": "]", "(": ")"}
_SPECIAL_CHARS = re.compile(r"""[\\"'(){}\[\]]""")


class Brackets:
    """Finds where the bracketed value opening at ``start`` (``{``, ``[`` or ``(``) closes, with
    strings in either quote skipped, over a text that may still grow: :meth:`end` resumes where the
    last call stopped (the text must only have been appended to)."""

    __slots__ = ("start", "_pos", "_stack", "_quote", "_result")

    def __init__(self, start: int) -> None:
        self.start = start
        self._pos = start
        self._stack: list[str] = []
        self._quote = ""
        self._result: int | None = None

    def end(self, text: str) -> int | None:
        """The offset just past the closing bracket; -1 when a bracket closes the wrong one (not a
        value); None when it has not closed yet."""
        if self._result is not None:
            return self._result
        i, n = self._pos, len(text)
        stack = self._stack
        while i < n:
            m = _SPECIAL_CHARS.search(text, i)
            if m is None:
                i = n
                break
            i = m.start()
            c = text[i]
            if c == "\\":
                if i + 1 >= n:
                    break   # the escaped character has not come yet: resume at the backslash
                i += 2
                continue
            if self._quote:
                if c == self._quote:
                    self._quote = ""
            elif c in "\"'":
                self._quote = c
            elif c in _CLOSE:
                stack.append(_CLOSE[c])
            elif not stack or c != stack[-1]:
                self._result = -1
                return -1
            else:
                stack.pop()
                if not stack:
                    self._result = i + 1
                    return self._result
            i += 1
        self._pos = i
        return None
