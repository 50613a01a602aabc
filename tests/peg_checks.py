"""Shared by the PEG test modules: a parse of ours checked against upstream's on the spot."""

from __future__ import annotations

from llamact.parity.components import parse_result_json as result_json
from llamact.parity.oracle import OracleClient, OracleError
from llamact.peg import Arena
from llamact.peg.executor import ParseResult, parse

__all__ = ["checked_parse", "result_json"]


def checked_parse(oracle: OracleClient, arena: Arena, text: str | bytes, lenient: bool, start: int = 0) -> ParseResult:
    """Our raw parse, asserted equal (type, span, AST, invalid runs) to upstream's on the same
    arena, input, flag and start."""
    data = text.encode() if isinstance(text, str) else text
    expected = oracle.request("peg_parse", parser=arena.to_json(), text_hex=data.hex(), lenient=lenient, start=start)
    assert not isinstance(expected, OracleError), expected
    ours = parse(arena, data, lenient=lenient, start=start)
    assert result_json(ours) == expected, f"{data!r} lenient={lenient} start={start}"
    return ours
