"""The PEG executor: upstream's ``common_peg_arena::parse`` semantics, resumable as text is appended.

Every node kind parses as upstream's ``parser_executor`` does (common/peg-parser.cpp): the same
result type (fail / success / need more input), the same end position in every case (a failed
sequence ends where its failing child did, a failed literal where it started, ...), the same
lenient behaviour at the end of partial input, the same UTF-8 handling (invalid runs consumed by
``until`` and recorded on the AST), and rule / tag nodes wrapping their children in the AST.

Speed. Upstream re-parses the whole output on every streamed token. Here each intermediate result
also says whether it *touched the end of the input* (read up to it, or tested for it): a result
that did not is final — appending text cannot change it. Rule and tag results are memoised by
(node, position): those that touched the end only for the current parse, the others for as long
as the input keeps growing by appending (:class:`IncrementalParser`). A repetition also keeps a
checkpoint after its last final iteration and resumes there. So a re-parse after a token walks
only the path of still-open nodes; the scans that remain (``until``'s search, a string's
content) run in C through ``bytes.find`` and ``re``. Results are identical to a fresh full parse,
which the tests check prefix by prefix.

Where the input is valid UTF-8 (up to a sequence cut short at its end) the scanning nodes take
fast paths; elsewhere they walk code points exactly as upstream does (``utf8.decode_at``).
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from ..errors import LlamaInferenceException
from .arena import Arena
from .ast import AstNode, InvalidRun, Source
from .nodes import (
    INVALID_PARSER_ID,
    Ac,
    And,
    Any_,
    Atomic,
    Chars,
    Choice,
    End,
    Epsilon,
    Gbnf,
    Literal,
    Not,
    Ref,
    Repetition,
    Rule,
    Schema,
    Sequence,
    Space,
    Start,
    String,
    Tag,
    Until,
)
from .utf8 import INCOMPLETE, SUCCESS, decode_at, valid_prefix_end

FAIL, OK, MORE = 0, 1, 2
_TYPE_NAMES = ("fail", "success", "need_more_input")

# An intermediate result: (type, end, nodes, invalid runs, touched the end of the input).
_Result = tuple[int, int, tuple[AstNode, ...], tuple[InvalidRun, ...], bool]
_Fn = Callable[["_State", int], _Result]

_SPACE = re.compile(rb"[ \t\n\v\f\r]*")  # C isspace in the "C" locale
_NONE: tuple[Any, ...] = ()


class PegParseError(LlamaInferenceException):
    """A parser arena cannot run: no root, a reference to a missing rule, or runaway recursion."""


class ParseResult(NamedTuple):
    """What a parse returns: ``type`` ("fail", "success" or "need_more_input"), the byte span,
    the AST nodes (rule and tag matches, in order) and the invalid UTF-8 runs consumed.
    (A named tuple: one is made per streamed token.)"""

    type: str
    start: int
    end: int
    nodes: tuple[AstNode, ...]
    invalid_utf8: tuple[InvalidRun, ...]

    @property
    def fail(self) -> bool:
        return self.type == "fail"

    @property
    def success(self) -> bool:
        return self.type == "success"

    @property
    def need_more_input(self) -> bool:
        return self.type == "need_more_input"


class _State:
    """One parse's input and memo tables (the ``final`` ones survive appends)."""

    __slots__ = ("data", "n", "lenient", "fast", "valid_end", "final", "volatile", "checkpoints", "source")

    def __init__(self, lenient: bool) -> None:
        self.lenient = lenient
        self.source = Source()
        self.final: dict[int, _Result] = {}
        # a repetition's state after its last final iteration, or where a string's scan stopped
        self.checkpoints: dict[int, Any] = {}
        self.volatile: dict[int, _Result] = {}
        self.valid_end = 0
        self.fast = True
        self.set_input(b"")

    def set_input(self, data: bytes, extends: bool = False) -> None:
        """A new input; ``extends``: it starts with the current one (only the new part is checked
        for UTF-8 validity then)."""
        if extends and self.fast:
            end, clean = valid_prefix_end(data[self.valid_end:])
            self.valid_end, self.fast = self.valid_end + end, clean
        elif not extends:
            self.valid_end, self.fast = valid_prefix_end(data)
        # (extending an input that is already invalid leaves its first invalid byte where it was)
        self.data = data
        self.n = len(data)
        self.source.data = data
        self.volatile = {}


class CompiledParser:
    """An arena turned into one Python function per node (built once per arena, reusable)."""

    def __init__(self, arena: Arena) -> None:
        self.arena = arena
        self._count = max(len(arena.parsers), 1)
        self._fns: list[_Fn] = []
        self._fns.extend([self._compile(node_id, node) for node_id, node in enumerate(arena.parsers)])
        self._alias_pass_throughs()

    @property
    def root(self) -> _Fn:
        if self.arena.root == INVALID_PARSER_ID:
            raise PegParseError("No root parser set")
        return self.function(self.arena.root)

    def function(self, node_id: int) -> _Fn:
        if not 0 <= node_id < len(self._fns):
            raise PegParseError(f"parser id {node_id} is out of range (the arena has {len(self._fns)} parsers)",
                                {"id": node_id})
        return self._fns[node_id]

    # -- node kinds ---------------------------------------------------------------------------

    def _compile(self, node_id: int, node: Any) -> _Fn:  # noqa: C901 - one branch per node kind
        # Children are looked up in ``fns`` when called (they may come later in the arena), with
        # no wrapper frame in between: Python's recursion limit bounds the nesting we can parse.
        fns = self._fns
        count = self._count
        bad = [c for c in _children(node) if not 0 <= c < len(self.arena.parsers)]
        if bad:
            return _raiser(PegParseError(f"parser id {bad[0]} is out of range (the arena has "
                                         f"{len(self.arena.parsers)} parsers)", {"id": bad[0]}))
        if isinstance(node, Epsilon):
            return lambda st, pos: (OK, pos, _NONE, _NONE, False)
        if isinstance(node, Start):
            return lambda st, pos: (OK if pos == 0 else FAIL, pos, _NONE, _NONE, False)
        if isinstance(node, End):
            return lambda st, pos: (OK, pos, _NONE, _NONE, True) if pos >= st.n else (FAIL, pos, _NONE, _NONE, False)
        if isinstance(node, Literal):
            return _literal(node.literal.encode("utf-8"))
        if isinstance(node, Sequence):
            return _sequence(node.children, fns)
        if isinstance(node, Choice):
            return _choice(node.children, fns)
        if isinstance(node, Repetition):
            return _repetition(node_id, count, node.min_count, node.max_count, fns, node.child)
        if isinstance(node, And):
            return _and(fns, node.child)
        if isinstance(node, Not):
            return _not(fns, node.child)
        if isinstance(node, Any_):
            return _any
        if isinstance(node, Space):
            return _space
        if isinstance(node, Chars):
            return _chars(node)
        if isinstance(node, String):
            return _string(node_id, count, node.delimiter)
        if isinstance(node, Until):
            return _until(node.delimiters)
        if isinstance(node, (Schema, Gbnf, Ac)):
            return _pass_through(fns, node.child)
        if isinstance(node, Rule):
            return _wrap(node_id, count, node.name, "", fns, node.child)
        if isinstance(node, Tag):
            return _wrap(node_id, count, "", node.tag, fns, node.child)
        if isinstance(node, Atomic):
            return _atomic(fns, node.child)
        if isinstance(node, Ref):
            rule_id = _delegate(self.arena, node_id)
            if rule_id is None:
                return _raiser(PegParseError(f"Rule not found: {node.name}", {"rule": node.name}))
            return _pass_through(fns, rule_id)
        raise PegParseError(f"not a PEG parser node: {node!r}")

    def _alias_pass_throughs(self) -> None:
        """Nodes that only delegate (schema, gbnf, ac, ref) take their target's function, so they
        cost no call at parse time."""
        for node_id in range(len(self._fns)):
            target, seen = node_id, {node_id}
            while True:
                nxt = _delegate(self.arena, target)
                if nxt is None or nxt in seen:
                    break
                seen.add(nxt)
                target = nxt
            if target != node_id and _delegate(self.arena, target) is None:
                self._fns[node_id] = self._fns[target]


def _children(node: Any) -> tuple[int, ...]:
    if isinstance(node, (Sequence, Choice)):
        return node.children
    child = getattr(node, "child", None)
    return () if child is None else (child,)


def _delegate(arena: Arena, node_id: int) -> int | None:
    """The node a pass-through node hands its parse to (None for every other node)."""
    node = arena.parsers[node_id]
    if isinstance(node, (Schema, Gbnf, Ac)) and 0 <= node.child < len(arena.parsers):
        return node.child
    if isinstance(node, Ref):
        rule_id = arena.rules.get(node.name)
        return rule_id if rule_id is not None and 0 <= rule_id < len(arena.parsers) else None
    return None


def _raiser(error: PegParseError) -> _Fn:
    def parse(st: _State, pos: int) -> _Result:
        raise error
    return parse


def _pass_through(fns: list[_Fn], child: int) -> _Fn:
    return lambda st, pos: fns[child](st, pos)


def _literal(lit: bytes) -> _Fn:
    size = len(lit)

    def parse(st: _State, pos: int) -> _Result:
        data = st.data
        if data.startswith(lit, pos):
            return OK, pos + size, _NONE, _NONE, False
        avail = st.n - pos
        if avail < size and lit.startswith(data[pos:]):
            # the input ends inside the literal
            if st.lenient:
                return MORE, st.n, _NONE, _NONE, True
            return FAIL, pos, _NONE, _NONE, True
        return FAIL, pos, _NONE, _NONE, False
    return parse


def _sequence(children: tuple[int, ...], fns: list[_Fn]) -> _Fn:
    def parse(st: _State, pos: int) -> _Result:
        p = pos
        nodes: tuple[AstNode, ...] = _NONE
        invalid: tuple[InvalidRun, ...] = _NONE
        touched = False
        for child in children:
            t, end, cn, ci, ct = fns[child](st, p)
            if ct:
                touched = True
            if t == FAIL:
                return FAIL, end, _NONE, _NONE, touched
            if cn:
                nodes = nodes + cn if nodes else cn
            if ci:
                invalid = invalid + ci if invalid else ci
            if t == MORE:
                return MORE, end, nodes, invalid, True
            p = end
        return OK, p, nodes, invalid, touched
    return parse


def _choice(children: tuple[int, ...], fns: list[_Fn]) -> _Fn:
    def parse(st: _State, pos: int) -> _Result:
        touched = False
        for child in children:
            r = fns[child](st, pos)
            if r[4]:
                touched = True
            if r[0] != FAIL:
                return r if r[4] == touched else (r[0], r[1], r[2], r[3], touched)
        return FAIL, pos, _NONE, _NONE, touched
    return parse


def _repetition(node_id: int, count: int, min_count: int, max_count: int, fns: list[_Fn], child_id: int) -> _Fn:
    def parse(st: _State, pos: int) -> _Result:
        key = pos * count + node_id
        mark = st.checkpoints.get(key)
        if mark is None:
            p, matched, nodes, invalid = pos, 0, [], []
        else:
            # resume after the iterations that were final when the checkpoint was made
            p, matched, all_nodes, n_nodes, all_invalid, n_invalid = mark
            nodes, invalid = all_nodes[:n_nodes], all_invalid[:n_invalid]
        touched = False
        n = st.n
        while max_count == -1 or matched < max_count:
            if p >= n:
                touched = True
                break
            t, end, cn, ci, ct = fns[child_id](st, p)
            if ct:
                touched = True
            if t == OK:
                if end == p:
                    break  # an empty match would loop forever
                nodes.extend(cn)
                invalid.extend(ci)
                p = end
                matched += 1
                if not touched:
                    st.checkpoints[key] = (p, matched, nodes, len(nodes), invalid, len(invalid))
                continue
            if t == MORE:
                nodes.extend(cn)
                invalid.extend(ci)
                return MORE, end, tuple(nodes), tuple(invalid), True
            break
        if matched < min_count:
            if p >= n and st.lenient:
                return MORE, p, tuple(nodes), tuple(invalid), True
            return FAIL, p, _NONE, _NONE, touched
        return OK, p, tuple(nodes), tuple(invalid), touched
    return parse


def _and(fns: list[_Fn], child: int) -> _Fn:
    def parse(st: _State, pos: int) -> _Result:
        r = fns[child](st, pos)
        return r[0], pos, _NONE, _NONE, r[4]
    return parse


def _not(fns: list[_Fn], child: int) -> _Fn:
    def parse(st: _State, pos: int) -> _Result:
        t, _, _, _, touched = fns[child](st, pos)
        if t == OK:
            return FAIL, pos, _NONE, _NONE, touched
        if t == MORE:
            return MORE, pos, _NONE, _NONE, True
        return OK, pos, _NONE, _NONE, touched
    return parse


def _any(st: _State, pos: int) -> _Result:
    status, _, width = decode_at(st.data, pos, st.n)
    if status == SUCCESS:
        return OK, pos + width, _NONE, _NONE, False
    if status == INCOMPLETE:
        return (MORE if st.lenient else FAIL), pos, _NONE, _NONE, True
    return FAIL, pos, _NONE, _NONE, False


def _space(st: _State, pos: int) -> _Result:
    end = _SPACE.match(st.data, pos).end()  # type: ignore[union-attr]  # '*' always matches
    return OK, end, _NONE, _NONE, end >= st.n


def _chars(node: Chars) -> _Fn:
    ranges = tuple((r.start, r.end) for r in node.ranges)
    negated, min_count, max_count = node.negated, node.min_count, node.max_count
    ascii_table = bytes(int(any(lo <= c <= hi for lo, hi in ranges) != negated) for c in range(128))
    skip = _chars_skipper(ranges, negated) if max_count == -1 and min_count <= 1 else None

    def matches(cp: int) -> bool:
        if cp < 128:
            return bool(ascii_table[cp])
        hit = False
        for lo, hi in ranges:
            if lo <= cp <= hi:
                hit = True
                break
        return hit != negated

    def parse(st: _State, pos: int) -> _Result:
        data, n = st.data, st.n
        p, matched = pos, 0
        if skip is not None and st.fast:
            end = skip.match(data, pos, st.valid_end).end()  # type: ignore[union-attr]
            if end > pos:
                p, matched = end, 1  # only "at least min (<= 1)" matters from here on
        while max_count == -1 or matched < max_count:
            status, cp, width = decode_at(data, p, n)
            if status == INCOMPLETE:
                if matched >= min_count:
                    return OK, p, _NONE, _NONE, True
                if not st.lenient:
                    return FAIL, pos, _NONE, _NONE, True
                return MORE, p, _NONE, _NONE, True
            if status != SUCCESS:
                if matched >= min_count:
                    return OK, p, _NONE, _NONE, False
                return FAIL, pos, _NONE, _NONE, False
            if not matches(cp):
                break
            p += width
            matched += 1
        if matched < min_count:
            if p >= n and st.lenient:
                return MORE, p, _NONE, _NONE, True
            return FAIL, p, _NONE, _NONE, p >= n
        return OK, p, _NONE, _NONE, False
    return parse


def _chars_skipper(ranges: tuple[tuple[int, int], ...], negated: bool) -> re.Pattern[bytes] | None:
    """A bytes regex over valid UTF-8 matching a run of the class's characters, when the class
    is ASCII-only (so every character either is one ASCII byte or is a whole multi-byte one)."""
    if any(hi > 0x7F for _, hi in ranges):
        return None
    members = b"".join(re.escape(bytes([lo])) if lo == hi else re.escape(bytes([lo])) + b"-" + re.escape(bytes([hi]))
                       for lo, hi in ranges if lo <= hi)  # a reversed range matches nothing
    if not negated:
        return re.compile(b"[" + members + b"]*") if members else re.compile(b"")
    other_ascii = b"[^" + members + b"\x80-\xff]" if members else b"[\x00-\x7f]"
    return re.compile(b"(?:" + other_ascii + b"|[\xc0-\xff][\x80-\xbf]*)*")


_ESCAPES = frozenset(b"\\/bfnrt")
_HEX = frozenset(b"0123456789abcdefABCDEF")


def _string(node_id: int, count: int, delimiter: str) -> _Fn:
    delim = ord(delimiter) if len(delimiter) == 1 and ord(delimiter) < 256 else -1
    d = re.escape(bytes([delim])) if delim >= 0 else b""
    plain = b"[^" + d + rb"\\]*"  # one class in a loop: re scans it in C without backtracking state
    skip = re.compile(plain + rb"(?:\\(?:[" + d + rb"\\/bfnrt]|u[0-9a-fA-F]{4})" + plain + b")*")

    def parse(st: _State, pos: int) -> _Result:
        data, n, lenient = st.data, st.n, st.lenient
        # Where the fast scan stopped last time: everything before it was plain characters and
        # whole escapes, which appended input cannot change, so a long string is not re-scanned.
        key = pos * count + node_id
        p = st.checkpoints.get(key, pos)
        if st.fast:
            p = skip.match(data, p, st.valid_end).end()  # type: ignore[union-attr]  # '*': always matches
            st.checkpoints[key] = p
        while p < n:
            c = data[p]
            if c == delim:
                return OK, p, _NONE, _NONE, False
            if c == 0x5C:  # backslash: an escape sequence
                if p + 1 >= n:
                    return (MORE, p, _NONE, _NONE, True) if lenient else (FAIL, pos, _NONE, _NONE, True)
                e = data[p + 1]
                if e == delim or e in _ESCAPES:
                    p += 2
                    continue
                if e != 0x75:  # not 'u'
                    return FAIL, pos, _NONE, _NONE, False
                q = p + 2
                for _ in range(4):
                    if q >= n:
                        # an unfinished \u escape is held back (end stays before the backslash)
                        return (MORE, p, _NONE, _NONE, True) if lenient else (FAIL, pos, _NONE, _NONE, True)
                    if data[q] not in _HEX:
                        return FAIL, pos, _NONE, _NONE, False
                    q += 1
                p = q
                continue
            status, _, width = decode_at(data, p, n)
            if status == INCOMPLETE:
                return (MORE, p, _NONE, _NONE, True) if lenient else (FAIL, pos, _NONE, _NONE, True)
            if status != SUCCESS:
                return FAIL, pos, _NONE, _NONE, False
            p += width
        if not lenient:
            return FAIL, p, _NONE, _NONE, True
        return MORE, p, _NONE, _NONE, True
    return parse


class _Trie:
    """Upstream's ``common_trie`` over code points, with ``check_at``."""

    NO, PARTIAL, COMPLETE = 0, 1, 2

    def __init__(self, words: tuple[str, ...]) -> None:
        self.root: dict[int, Any] = {}
        for word in words:
            node = self.root
            for ch in word:
                node = node.setdefault(ord(ch), {})
            node[-1] = True  # a word ends here

    def check_at(self, data: bytes, pos: int, n: int) -> int:
        node = self.root
        while pos < n:
            status, cp, width = decode_at(data, pos, n)
            if status != SUCCESS:
                break
            nxt = node.get(cp)
            if nxt is None:
                return self.NO
            node = nxt
            pos += width
            if -1 in node:
                return self.COMPLETE
        return self.PARTIAL if node is not self.root else self.NO


def _until(delimiters: tuple[str, ...]) -> _Fn:
    trie = _Trie(delimiters)
    needles = tuple(d.encode("utf-8") for d in delimiters if d)
    longest = max((len(x) for x in needles), default=0)

    def fast(st: _State, pos: int) -> _Result:
        data, n, vend = st.data, st.n, st.valid_end
        stop = -1
        for needle in needles:
            i = data.find(needle, pos, vend)
            if i != -1 and (stop == -1 or i < stop):
                stop = i
        # a delimiter begun at the end of what decodes (the end of the input, or a cut sequence)
        for q in range(max(pos, vend - longest + 1), vend if stop == -1 else min(stop, vend)):
            if data[q] & 0xC0 == 0x80:
                continue
            tail = data[q:vend]
            if any(needle.startswith(tail) for needle in needles):
                return OK, q, _NONE, _NONE, True
        if stop != -1:
            return OK, stop, _NONE, _NONE, False
        if vend < n:
            # a sequence cut short at the end
            if st.lenient:
                return MORE, vend, _NONE, _NONE, True
            return OK, n, _NONE, ((vend, n - vend),), True
        return (MORE if st.lenient else OK), n, _NONE, _NONE, True

    def exact(st: _State, pos: int) -> _Result:
        data, n, lenient = st.data, st.n, st.lenient
        p = last_valid = pos
        invalid: list[InvalidRun] = []
        while p < n:
            status, _, width = decode_at(data, p, n)
            if status == INCOMPLETE and lenient:
                return MORE, last_valid, _NONE, tuple(invalid), True
            if status != SUCCESS:
                invalid.append((p, width))
                p += width
                last_valid = p
                continue
            match = trie.check_at(data, p, n)
            if match != _Trie.NO:
                return OK, p, _NONE, tuple(invalid), match == _Trie.PARTIAL
            p += width
            last_valid = p
        if last_valid == n and lenient:
            return MORE, last_valid, _NONE, tuple(invalid), True
        return OK, last_valid, _NONE, tuple(invalid), True

    def parse(st: _State, pos: int) -> _Result:
        return fast(st, pos) if st.fast else exact(st, pos)
    return parse


def _wrap(node_id: int, count: int, rule: str, tag: str, fns: list[_Fn], child: int) -> _Fn:
    """A rule or tag node: the child's result with its nodes wrapped in one AST node, memoised."""
    def parse(st: _State, pos: int) -> _Result:
        key = pos * count + node_id
        r = st.final.get(key)
        if r is not None:
            return r
        r = st.volatile.get(key)
        if r is not None:
            return r
        t, end, nodes, invalid, touched = fns[child](st, pos)
        if t != FAIL:
            node = AstNode(rule, tag, pos, end, st.source, nodes, t == MORE, invalid)
            r = (t, end, (node,), invalid, touched)
        else:
            r = (t, end, nodes, invalid, touched)
        (st.volatile if touched else st.final)[key] = r
        return r
    return parse


def _atomic(fns: list[_Fn], child: int) -> _Fn:
    def parse(st: _State, pos: int) -> _Result:
        r = fns[child](st, pos)
        if r[0] == MORE and r[2]:
            return MORE, r[1], _NONE, r[3], True  # partial matches leave no nodes
        return r
    return parse


# From Python 3.11 on, a Python-to-Python call takes no C stack, and a parse runs nothing but such
# calls (plus leaf C calls), so the recursion limit may be raised for its duration: nesting depth
# (JSON arguments within arguments ...) is then bounded by this, about six frames a level.
_PARSE_RECURSION_LIMIT = 12000 if sys.version_info >= (3, 11) else 0


class _RecursionBudget:
    """The raised recursion limit for recursive walks over a parse (the parse itself, or a mapper
    over its AST); running out raises PegParseError instead of RecursionError. The process-wide
    limit is restored when the last concurrent walk ends. (A class, not a generator-based
    context manager: it runs twice per streamed token.)"""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._saved = 0

    def __enter__(self) -> None:
        with self._lock:
            if self._users == 0:
                self._saved = sys.getrecursionlimit()
                if self._saved < _PARSE_RECURSION_LIMIT:
                    sys.setrecursionlimit(_PARSE_RECURSION_LIMIT)
            self._users += 1

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._saved < _PARSE_RECURSION_LIMIT:
                sys.setrecursionlimit(self._saved)
        if exc_type is RecursionError:
            raise PegParseError("the input nests deeper than the parser or its message mapper can follow (or "
                                "the arena recurses without consuming input)",
                                {"recursion_limit": _PARSE_RECURSION_LIMIT}) from None


recursion_budget = _RecursionBudget()


def _run(compiled: CompiledParser, st: _State, start: int, node_id: int | None) -> ParseResult:
    fn = compiled.root if node_id is None else compiled.function(node_id)
    with recursion_budget:
        t, end, nodes, invalid, _ = fn(st, start)
    return ParseResult(_TYPE_NAMES[t], start, end, nodes, invalid)


def parse(arena: Arena | CompiledParser, text: str | bytes, *, lenient: bool = True, start: int = 0,
          parser_id: int | None = None) -> ParseResult:
    """Parse ``text`` from byte ``start`` with the arena's root (or ``parser_id``), as upstream's
    ``common_peg_arena::parse``; ``lenient`` is upstream's LENIENT flag (partial input)."""
    compiled = arena if isinstance(arena, CompiledParser) else CompiledParser(arena)
    st = _State(lenient)
    st.set_input(text.encode("utf-8") if isinstance(text, str) else bytes(text))
    return _run(compiled, st, start, parser_id)


class IncrementalParser:
    """Parses a growing text: each :meth:`parse` gives what a fresh parse of the whole text would,
    reusing all work that the appended text cannot change. A text that does not extend the
    previous one starts over."""

    def __init__(self, arena: Arena | CompiledParser, *, lenient: bool = True) -> None:
        self.compiled = arena if isinstance(arena, CompiledParser) else CompiledParser(arena)
        self.lenient = lenient
        self._state = _State(lenient)

    def reset(self) -> None:
        self._state = _State(self.lenient)

    def parse(self, text: str | bytes, start: int = 0) -> ParseResult:
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        extends = data.startswith(self._state.data)
        if not extends:
            self.reset()
        self._state.set_input(data, extends)
        return _run(self.compiled, self._state, start, None)
