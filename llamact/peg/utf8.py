"""UTF-8 decoding exactly as upstream's ``common_parse_utf8_codepoint`` (common/unicode.cpp).

Upstream's decoder is lenient in its own way (overlong forms and surrogates decode; a bad byte is
reported before a short input), and the PEG executor's results depend on it, so it is mirrored
byte for byte rather than replaced by Python's codec. :func:`valid_prefix_end` says how much of
an input Python's strict codec accepts: that part upstream decodes without an error too, which
lets the executor take its fast paths there.
"""

from __future__ import annotations

SUCCESS = 0
INCOMPLETE = 1
INVALID = 2


def decode_at(data: bytes, pos: int, n: int) -> tuple[int, int, int]:
    """(status, code point, bytes consumed) of the sequence at ``pos`` (``n`` = len(data))."""
    if pos >= n:
        return INCOMPLETE, 0, 0
    b = data[pos]
    if b < 0x80:
        return SUCCESS, b, 1
    if not b & 0x40:
        return INVALID, 0, 1  # a continuation byte first
    if not b & 0x20:
        width, cp = 2, b & 0x1F
    elif not b & 0x10:
        width, cp = 3, b & 0x0F
    elif not b & 0x08:
        width, cp = 4, b & 0x07
    else:
        return INVALID, 0, 1
    if width == 2:
        # two-byte sequences check the length first, longer ones a bad byte first (as upstream)
        if pos + 1 >= n:
            return INCOMPLETE, 0, 1
        c = data[pos + 1]
        if c & 0xC0 != 0x80:
            return INVALID, 0, 1
        return SUCCESS, (cp << 6) | (c & 0x3F), 2
    for i in range(1, width):
        if pos + i >= n:
            return INCOMPLETE, 0, i
        c = data[pos + i]
        if c & 0xC0 != 0x80:
            return INVALID, 0, i
        cp = (cp << 6) | (c & 0x3F)
    return SUCCESS, cp, width


def valid_prefix_end(data: bytes) -> tuple[int, bool]:
    """(end, clean): ``data[:end]`` is valid UTF-8; ``clean`` is True when what follows is at most
    one sequence cut short by the end of the input (the usual state of a streamed output)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data" and exc.end == len(data):
            return exc.start, True
        return exc.start, False
    return len(data), True
