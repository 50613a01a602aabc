"""Output parsers and their grammars, built once per request shape (issue 30's warm apply).

A chat request's parser (a PEG arena) and grammar depend on the template and the request's tools,
tool choice, response format, reasoning settings and generation prompt, not on the conversation.
Building them is most of a warm apply (10 tools: ~60-80% of it), and a chat's next turn asks for
the same ones again. So :func:`build_chat_peg_parser` (through :func:`build_once`) keys each build
by what its root function can see, and :func:`grammar_once` keys a grammar by its arena.

**What the root function can see** is its code and its closure: the builders pass booleans, strings,
lists of strings, nested helper functions, the request's :class:`~llamact.chat.render.TemplateInputs`
and the template's cached autoparser analysis. :func:`closure_key` turns those into a hashable key:
plain values as they are, functions as (code, their own closure's key), objects through their
``memo_key()`` (the template inputs: every field but the messages, as JSON; the analysis: its
identity, since it is cached per template and frozen). Anything else -- or code that reads
``messages`` anywhere in the function tree -- makes the key ``None`` and the parser is built afresh:
a missed reuse costs time, a wrong one would cost correctness.

Arenas are immutable (frozen dataclasses of tuples), so one arena serves many requests.
``LLAMACT_PARSER_MEMO``: ``on`` (default), ``off``, or ``verify`` (the test suite's setting: every
hit is rebuilt and compared, and a difference raises, so the whole parity corpus checks the keys).
"""

from __future__ import annotations

import os
import threading
import types
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["Identity", "MemoStats", "build_once", "clear_parser_memo", "closure_key", "grammar_once", "stats"]

_MAX_ARENAS = 32      # a request shape per entry (tools x settings); an arena of 10 tools is ~0.2 MB
_MAX_GRAMMARS = 32


class Identity:
    """A key part equal only to the same object (for cached, never-mutated values)."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Identity) and other.obj is self.obj


class MemoStats:
    __slots__ = ("hits", "misses", "unkeyed")

    def __init__(self) -> None:
        self.hits = self.misses = self.unkeyed = 0


stats = MemoStats()
_lock = threading.Lock()
_arenas: OrderedDict[Hashable, Any] = OrderedDict()
_grammars: OrderedDict[tuple[int, bool], tuple[Any, str]] = OrderedDict()
_reads_messages: dict[types.CodeType, bool] = {}


def _mode() -> str:
    return os.environ.get("LLAMACT_PARSER_MEMO", "on")


def clear_parser_memo() -> None:
    """Forget every memoised parser and grammar (benchmarks measuring cold applies)."""
    with _lock:
        _arenas.clear()
        _grammars.clear()


def _code_reads_messages(code: types.CodeType) -> bool:
    known = _reads_messages.get(code)
    if known is None:
        known = "messages" in code.co_names or any(
            isinstance(c, types.CodeType) and _code_reads_messages(c) for c in code.co_consts)
        _reads_messages[code] = known
    return known


def _part(value: Any, depth: int) -> Hashable | None:
    if value is None or isinstance(value, (str, bool, int, float)):
        return (type(value).__name__, value)
    if depth > 8:
        return None
    if isinstance(value, (list, tuple)):
        parts = tuple(_part(v, depth + 1) for v in value)
        return None if any(p is None for p in parts) else (type(value).__name__, parts)
    if isinstance(value, types.FunctionType):
        return closure_key(value, depth + 1)
    memo_key = getattr(value, "memo_key", None)
    if callable(memo_key):
        return (type(value).__qualname__, memo_key())
    return None


def closure_key(fn: Callable[..., Any], depth: int = 0) -> Hashable | None:
    """A key equal for two functions that compute the same thing, or None (see the module docstring)."""
    if not isinstance(fn, types.FunctionType) or _code_reads_messages(fn.__code__):
        return None
    # the code object itself, not its value: equal code from two modules may read different globals
    parts: list[Hashable] = [Identity(fn.__code__)]
    for cell in fn.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # a cell not yet assigned (a helper defined after the root)
            parts.append("<empty>")
            continue
        part = _part(value, depth)
        if part is None:
            return None
        parts.append(part)
    if fn.__defaults__:
        defaults = _part(fn.__defaults__, depth)
        if defaults is None:
            return None
        parts.append(defaults)
    if fn.__kwdefaults__:
        return None
    return tuple(parts)


def build_once(fn: Callable[..., Any], build: Callable[[Callable[..., Any]], Any]) -> Any:
    """``build(fn)``, reused for every later ``fn`` with the same :func:`closure_key`."""
    mode = _mode()
    if mode == "off":
        return build(fn)
    key = closure_key(fn)
    if key is None:
        stats.unkeyed += 1
        return build(fn)
    with _lock:
        arena = _arenas.get(key)
        if arena is not None:
            _arenas.move_to_end(key)
    if arena is None:
        stats.misses += 1
        arena = build(fn)
        with _lock:
            _arenas[key] = arena
            while len(_arenas) > _MAX_ARENAS:
                _arenas.popitem(last=False)
        return arena
    stats.hits += 1
    if mode == "verify":
        fresh = build(fn)
        if fresh != arena:
            raise RuntimeError(  # verify mode only: a defect of the key, never a request's fault
                "parser memo: a reused parser differs from a fresh build (its key misses an input of "
                f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno})")
    return arena


def grammar_once(arena: Any, lazy: bool, build: Callable[[Any, bool], str]) -> str:
    """``build(arena, lazy)``, reused while the same arena object is asked for again."""
    mode = _mode()
    if mode == "off":
        return build(arena, lazy)
    key = (id(arena), lazy)
    with _lock:
        entry = _grammars.get(key)
        if entry is not None and entry[0] is arena:
            _grammars.move_to_end(key)
            text = entry[1]
        else:
            text = None
    if text is None:
        text = build(arena, lazy)
        with _lock:
            _grammars[key] = (arena, text)  # holds the arena, so its id is not reused meanwhile
            while len(_grammars) > _MAX_GRAMMARS:
                _grammars.popitem(last=False)
    elif mode == "verify" and build(arena, lazy) != text:
        raise RuntimeError("parser memo: a reused grammar differs from a fresh build")
    return text
