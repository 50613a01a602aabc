"""The template source as upstream's lexer reads it: line ends, string escapes, refusals, positions.

Enters: Jinja source. Leaves: jinja2 tokens (``LlamaLexer``) that know their character offset in
``normalise_source(source)`` (positions.py). Raises ``TemplateSyntaxError`` for what upstream's
lexer refuses and for a malformed string escape.
"""

from __future__ import annotations

from collections.abc import Iterator

from jinja2.exceptions import TemplateSyntaxError
from jinja2.lexer import (
    TOKEN_FLOAT,
    TOKEN_INTEGER,
    TOKEN_OPERATOR,
    TOKEN_RAW_BEGIN,
    TOKEN_STRING,
    Lexer,
    Token,
    TokenStream,
)

from .positions import PosToken, positioned

__all__ = ["LlamaLexer", "line_ends", "normalise_source", "unescape"]


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "\\": "\\", "'": "'", '"': '"'}
_HEX = frozenset("0123456789abcdefABCDEF")


def unescape(body: str, lineno: int, name: str | None) -> str:
    """A string literal's text: upstream's escapes plus ``\\xHH`` (exactly two hex digits)."""
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1] if i + 1 < len(body) else ""
        if nxt in _ESCAPES and nxt:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt == "x" and len(body) >= i + 4 and body[i + 2] in _HEX and body[i + 3] in _HEX:
            out.append(chr(int(body[i + 2:i + 4], 16)))
            i += 4
        elif nxt == "x":
            raise TemplateSyntaxError("malformed escape \\x (expected exactly two hex digits)", lineno, name)
        else:
            raise TemplateSyntaxError(f"unknown escape character \\{nxt}", lineno, name)
    return "".join(out)


class LlamaLexer(Lexer):
    """jinja2's lexer with upstream's refusals and string escapes; its tokens know their position
    and index (positions.PosToken), and the stream keeps them all (``llama_tokens``)."""

    def tokenize(self, source: str, name: str | None = None, filename: str | None = None,
                 state: str | None = None) -> TokenStream:
        tokens: list[PosToken] = []
        raw = positioned(self.tokeniter(source, name, filename, state), source)
        stream = TokenStream(self._positioned(raw, tokens, name, filename), name, filename)
        stream.llama_tokens = tokens  # type: ignore[attr-defined]
        return stream

    def _positioned(self, raw: Iterator[tuple[int, str, str, int]], tokens: list[PosToken], name: str | None,
                    filename: str | None) -> Iterator[Token]:
        for lineno, token, value_str, pos in raw:
            for tok in self._wrap_one(lineno, token, value_str, name, filename):
                out = PosToken(*tok)
                out.pos, out.idx = pos, len(tokens)
                tokens.append(out)
                yield out

    def _wrap_one(self, lineno: int, token: str, value_str: str, name: str | None,
                  filename: str | None) -> Iterator[Token]:
        if token == TOKEN_RAW_BEGIN:
            raise TemplateSyntaxError("Unknown statement: raw", lineno, name, filename)
        if token in (TOKEN_INTEGER, TOKEN_FLOAT) and any(c in value_str for c in "eE_"):
            raise TemplateSyntaxError(f"unexpected character in number: {value_str}", lineno, name, filename)
        if token == TOKEN_OPERATOR and value_str in ("//", "**"):
            raise TemplateSyntaxError(f"Unexpected token: {value_str}", lineno, name, filename)
        if token == TOKEN_STRING:
            yield Token(lineno, TOKEN_STRING, unescape(value_str[1:-1], lineno, name))
            return
        yield from self.wrap(iter([(lineno, token, value_str)]), name, filename)


def line_ends(source: str) -> str:
    """CRLF and CR as LF, as upstream's lexer has them."""
    return source.replace("\r\n", "\n").replace("\r", "\n")


def normalise_source(source: str) -> str:
    """``line_ends``, and upstream's lstrip quirk at the very start of a template (a cut: what
    remains is a suffix of ``line_ends(source)``)."""
    src = line_ends(source)
    # Upstream trims the leading text before a first {% or {# when everything after its first
    # character is blank (its backward scan stops at index 1 and cuts from the start).
    for i in range(len(src) - 1):
        if src[i] == "{" and src[i + 1] in "{%#":
            if i >= 1 and src[i + 1] in "%#" and all(c in " \t\v\f" for c in src[1:i]):
                src = src[i:]
            break
    return src
