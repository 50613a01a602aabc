"""Upstream's lexer (lexer.cpp), on the source's UTF-8 bytes as upstream reads them: its tokens, or
its error, with its text (syntax.py runs it, then upstream's parser's grammar, as a gate).

Enters: the template's bytes. Leaves: upstream's tokens (type numbered as its enum, value bytes,
byte position) and its normalised text (CRLF/CR as LF, one final LF dropped), or raises
``UpstreamSyntaxError`` with upstream's message (``lexer: <msg>\\n<excerpt>``). A ``\\xHH`` string
escape is accepted (docs/design.md deviation 1); a malformed one raises ``MalformedHex`` (llamact's own
lexer reports it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MalformedHex", "Token", "UpstreamSyntaxError", "bare", "located", "tokenize"]


class UpstreamSyntaxError(Exception):
    """Upstream refuses to compile the template: ``message`` is its text, ``kind`` the oracle's
    name for the C++ exception (``runtime_error``, or ``exception`` for ``std::out_of_range``),
    ``offset`` the byte offset it names (None when its message names none)."""

    def __init__(self, message: str, kind: str = "runtime_error", offset: int | None = None) -> None:
        super().__init__(message)
        self.message, self.kind, self.offset = message, kind, offset


class MalformedHex(Exception):
    """A ``\\x`` escape without two hex digits: llamact's own error (lexer.unescape) reports it."""


# token types, numbered as upstream's enum (its "of type N" messages print the number)
EOF, TEXT, NUMBER, STRING, IDENT, EQUALS, LPAREN, RPAREN, OPEN_STMT, CLOSE_STMT, OPEN_EXPR, CLOSE_EXPR, \
    LBRACKET, RBRACKET, LBRACE, RBRACE, COMMA, DOT, COLON, PIPE, CALL_OP, ADDITIVE, MULTIPLICATIVE, COMPARISON, \
    UNARY, COMMENT = range(26)

_TABLE = [(b"{%-", OPEN_STMT), (b"-%}", CLOSE_STMT), (b"{{-", OPEN_EXPR), (b"-}}", CLOSE_EXPR), (b"{%", OPEN_STMT),
          (b"%}", CLOSE_STMT), (b"{{", OPEN_EXPR), (b"}}", CLOSE_EXPR), (b"(", LPAREN), (b")", RPAREN),
          (b"{", LBRACE), (b"}", RBRACE), (b"[", LBRACKET), (b"]", RBRACKET), (b",", COMMA), (b".", DOT),
          (b":", COLON), (b"|", PIPE), (b"<=", COMPARISON), (b">=", COMPARISON), (b"==", COMPARISON),
          (b"!=", COMPARISON), (b"<", COMPARISON), (b">", COMPARISON), (b"+", ADDITIVE), (b"-", ADDITIVE),
          (b"~", ADDITIVE), (b"*", MULTIPLICATIVE), (b"/", MULTIPLICATIVE), (b"%", MULTIPLICATIVE), (b"=", EQUALS)]
_BY_FIRST: dict[int, list[tuple[bytes, int]]] = {}  # the table's entries by first byte, in its order
for _seq, _typ in _TABLE:
    _BY_FIRST.setdefault(_seq[0], []).append((_seq, _typ))
_ESCAPES = frozenset(b"ntrbfv\\'\"")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_SPACE = frozenset(b" \t\n\v\f\r")  # C isspace
_STRIP = b" \t\r\n"
_SIZE_T = 1 << 64
_DIGITS = re.compile(rb"[0-9]*")
_WORD = re.compile(rb"[A-Za-z0-9_]*")
_SPACES = re.compile(rb"[ \t\n\v\f\r]*")


def _word(c: int) -> bool:
    return 48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c == 95  # C isalnum, or _


def _digit(c: int) -> bool:
    return 48 <= c <= 57


def peek_source(source: bytes, pos: int) -> bytes:
    """utils.h ``peak_source``: 40 bytes either side of ``pos``, line breaks as ``↵``, a caret."""
    if not source:
        return b"(no source available)"
    start = max(0, pos - 40)
    end = min(pos + 40, len(source))
    excerpt = source[start:end] if end >= start else source[start:]
    return b"..." + excerpt.replace(b"\n", "\u21b5".encode()) + b"...\n" + b" " * (pos - start + 3) + b"^"


def located(tag: bytes, message: bytes, source: bytes, pos: int) -> UpstreamSyntaxError:
    """``fmt_error_with_source``: upstream's bytes, read as the oracle passes them on (invalid
    UTF-8 -- a cut character, a stray byte -- replaced)."""
    text = tag + b": " + message + b"\n" + peek_source(source, pos)
    return UpstreamSyntaxError(text.decode("utf-8", "replace"), offset=pos)


def bare(message: bytes) -> UpstreamSyntaxError:
    return UpstreamSyntaxError(message.decode("utf-8", "replace"))


@dataclass
class Token:
    t: int
    value: bytes
    pos: int


# -- the lexer (lexer.cpp) ------------------------------------------------------------------------------


def tokenize(source: bytes) -> tuple[list[Token], bytes]:
    """Upstream's tokens and its normalised text (CRLF/CR as LF, one final LF dropped)."""
    tokens: list[Token] = []
    if not source:
        return tokens, source
    src = source.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if source.endswith(b"\n"):
        src = src[:-1]
    size = len(src)
    pos = 0
    depth = 0  # size_t in upstream: a stray '}' wraps it around

    def at(i: int) -> int:
        return src[i] if i < size else 0  # std::string reads '\0' at size()

    def next_is(chars: bytes, n: int = 1) -> bool:
        return pos + n < size and src[pos + n] in chars

    def consume_while(predicate: object) -> bytes:
        nonlocal pos
        out = bytearray()
        while predicate(at(pos)):  # type: ignore[operator]
            if at(pos) == 0x5C:  # backslash
                pos += 1
                if pos >= size:
                    raise located(b"lexer", b"unexpected end of input after escape character", source, pos)
                escaped = src[pos]
                pos += 1
                if escaped == 0x78:  # \x: llamact's deviation 1 (lexer.unescape reports a malformed one)
                    if pos + 1 < size and src[pos] in _HEX and src[pos + 1] in _HEX:
                        out += src[pos - 2:pos + 2]
                        pos += 2
                        continue
                    raise MalformedHex
                if escaped not in _ESCAPES:
                    raise located(b"lexer", b"unknown escape character \\" + bytes([escaped]), source, pos)
                out.append(escaped)
                continue
            out.append(at(pos))
            pos += 1
            if pos > size:
                raise located(b"lexer", b"unexpected end of input during consume_while", source, pos)
        return bytes(out)

    def consume_run(pattern: re.Pattern[bytes]) -> bytes:
        """``consume_while`` for a class without ``\\`` (digits, word characters, spaces)."""
        nonlocal pos
        m = pattern.match(src, pos)
        assert m is not None
        pos = m.end()
        return m.group()

    def consume_numeric() -> bytes:
        nonlocal pos
        num = consume_run(_DIGITS)
        if pos < size and src[pos] == 0x2E and pos + 1 < size and _digit(src[pos + 1]):
            pos += 1
            num += b"." + consume_run(_DIGITS)
        return num

    while pos < size:
        start_pos = pos
        last = tokens[-1].t if tokens else CLOSE_STMT
        if last in (CLOSE_STMT, CLOSE_EXPR, COMMENT):
            rstrip_last = can_rm_newline = False
            if pos > 3:
                c0, c1, c2 = src[pos - 3], src[pos - 2], src[pos - 1]
                rstrip_last = c0 == 0x2D and c1 in b"%}#" and c2 == 0x7D
                can_rm_newline = c1 in b"#%-" and c2 == 0x7D
            start = pos
            while True:  # to the next {% {{ {#
                pos = src.find(b"{", pos)
                if pos < 0 or (pos + 1 < size and src[pos + 1] in b"%{#"):
                    break
                pos += 1
            pos = end = size if pos < 0 else pos
            if at(pos) == 0x7B and next_is(b"%#-"):  # lstrip_blocks
                current = end
                while current > start:
                    c = src[current - 1]
                    if current == 1:
                        end = 0
                        break
                    if c == 0x0A:
                        end = current
                        break
                    if c not in _SPACE:
                        break
                    current -= 1
            text = src[start:end]
            if can_rm_newline and text.startswith(b"\n"):  # trim_blocks
                text = text[1:]
            if rstrip_last:
                text = text.lstrip(_STRIP)
            if at(pos) == 0x7B and next_is(b"{%#") and next_is(b"-", 2):
                text = text.rstrip(_STRIP)
            if text:
                tokens.append(Token(TEXT, text, start_pos))
                continue
        if at(pos) == 0x7B and next_is(b"#"):
            start_pos = pos
            pos += 2
            body = bytearray()
            while not (at(pos) == 0x23 and next_is(b"}")):
                if pos + 2 >= size:
                    raise located(b"lexer", b"missing end of comment tag", source, pos)
                body.append(src[pos])
                pos += 1
            tokens.append(Token(COMMENT, bytes(body), start_pos))
            pos += 2
            continue
        if at(pos) == 0x2D and last in (OPEN_EXPR, OPEN_STMT):
            pos += 1
            if pos >= size:
                break
        consume_run(_SPACES)
        if pos >= size:
            break
        ch = src[pos]
        closing = ch == 0x2D and next_is(b"%}")
        if not closing and ch in b"-+":
            start_pos = pos
            before = tokens[-1].t if tokens else EOF
            if before in (TEXT, EOF):
                raise located(b"lexer", b"unexpected character: " + bytes([ch]), source, pos)
            if before not in (IDENT, NUMBER, STRING, RPAREN, RBRACKET):
                pos += 1
                num = consume_numeric()
                tokens.append(Token(UNARY if not num else NUMBER, bytes([ch]) + num, start_pos))
                continue
        matched = False
        for seq, typ in _BY_FIRST.get(ch, ()):
            start_pos = pos
            if seq == b"}}" and depth > 0:
                continue
            if src.startswith(seq, pos):
                tokens.append(Token(typ, seq, start_pos))
                if typ == OPEN_EXPR:
                    depth = 0
                elif typ == LBRACE:
                    depth = (depth + 1) % _SIZE_T
                elif typ == RBRACE:
                    depth = (depth - 1) % _SIZE_T
                pos += len(seq)
                matched = True
                break
        if matched:
            continue
        if ch in b"'\"":
            start_pos = pos
            pos += 1
            close = src.find(bytes([ch]), pos)
            if close >= 0 and src.find(b"\\", pos, close) < 0:  # no escape: the bytes as they are
                value, pos = src[pos:close], close
            else:
                value = consume_while(lambda c, q=ch: c != q)
            tokens.append(Token(STRING, value, start_pos))
            pos += 1
            continue
        if _digit(ch):
            start_pos = pos
            tokens.append(Token(NUMBER, consume_numeric(), start_pos))
            continue
        if _word(ch):
            start_pos = pos
            tokens.append(Token(IDENT, consume_run(_WORD), start_pos))
            continue
        raise located(b"lexer", b"unexpected character: " + bytes([ch]), source, pos)
    return tokens, src
