"""Where a render failed, said as upstream says it.

Upstream's runtime (runtime.cpp ``statement::execute``) prefixes the message of the innermost
statement that failed with where that statement is::

    \\n------------\\nWhile executing <Type> at line L, column C in source:\\n
    ...<excerpt>...\\n<caret>\\nError: <message>

``L`` and ``C`` count bytes of the context's source (``ctx.src``: the template as given to a raw
render; as upstream's lexer keeps it, ``\\n`` line ends and no final one, in the chat pipeline), up
to the node's position in the lexer's text; the excerpt is 40 bytes either side, its line breaks
shown as ``↵``, and the caret sits under the position. ``NotImplemented`` errors pass through bare.

How the failing node is found costs nothing until something fails: the generated code's table
(codegen.LOCATIONS) says where each located node's code is, and Python says which instruction of
the innermost template frame was running (``co_positions``); the innermost recorded code around that
instruction is the node. Where no node is found (an instruction the table does not cover; Python
3.10, which has no ``co_positions``), the message is upstream's message alone.
"""

from __future__ import annotations

from types import CodeType, TracebackType

from .codegen import LOCATIONS
from .lexer import line_ends, normalise_source

__all__ = ["LOCATED", "failure_location", "located_message"]

#: Whether this Python says where in a line an instruction is (``co_positions``, 3.11+). Without it
#: (3.10) runtime errors carry upstream's message without the location (parity/error_kinds.py).
LOCATED = hasattr(CodeType, "co_positions")

_TEMPLATE_FILE = "<template>"
_PEEK = 40  # bytes shown either side (utils.h peak_source)


def _innermost(tb: TracebackType | None) -> TracebackType | None:
    found = None
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_filename == _TEMPLATE_FILE and LOCATIONS in frame.f_globals:
            found = tb
        tb = tb.tb_next
    return found


def _instruction(code: CodeType, offset: int) -> tuple[int, int, int, int] | None:
    positions = getattr(code, "co_positions", None)
    if positions is None:
        return None
    for i, where in enumerate(positions()):
        if i == offset // 2:
            line, end_line, col, end_col = where
            if None in (line, end_line, col, end_col):
                return None
            return line, end_line, col, end_col
    return None


def failure_location(exc: BaseException) -> tuple[str, int] | None:
    """(upstream's node type, position in the lexer's text) of the node that raised ``exc``."""
    tb = _innermost(exc.__traceback__)
    if tb is None:
        return None
    at = _instruction(tb.tb_frame.f_code, tb.tb_lasti)
    if at is None:
        return None
    line, end_line, col, end_col = at
    best = None
    for record in tb.tb_frame.f_globals[LOCATIONS]:
        start, end = (record[0], record[1]), (record[2], record[3])
        if start <= (line, col) and (end_line, end_col) <= end:
            if best is None or start > (best[0], best[1]) or (start == (best[0], best[1])
                                                              and end < (best[2], best[3])):
                best = record
    if best is None:
        return None
    kind, where = best[4], best[5]
    if isinstance(where, tuple):  # one node here for a chain of operators upstream: which one failed
        where = where[min(getattr(exc, "operand_index", 0), len(where) - 1)]
    return kind, where


def located_message(message: str, kind: str, pos: int, source: str, shown: str) -> tuple[str, int]:
    """(upstream's located message, its line) for a failure of ``kind`` at ``pos`` (a character
    offset in ``normalise_source(source)``), placed in ``shown`` (the context's source)."""
    lines = line_ends(source)
    cut = len(lines) - len(normalise_source(source))  # upstream keeps what llamact's lexer cuts
    byte_pos = len(lines[:cut + pos].encode("utf-8", "surrogatepass"))
    data = shown.encode("utf-8", "surrogatepass")
    upto = min(byte_pos, len(data))
    line = data.count(b"\n", 0, upto) + 1
    column = upto - (data.rfind(b"\n", 0, upto) + 1) + 1
    start = max(0, byte_pos - _PEEK)
    end = min(byte_pos + _PEEK, len(data))
    excerpt = data[start:end].replace(b"\n", "\u21b5".encode()).decode("utf-8", "replace")
    caret = " " * (byte_pos - start + 3) + "^"
    return (f"\n------------\nWhile executing {kind} at line {line}, column {column} in source:\n"
            f"...{excerpt}...\n{caret}\nError: {message}"), line
