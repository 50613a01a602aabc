"""Upstream's lexer and parser, as a gate: a template upstream cannot compile fails with its message.

llamact parses templates with jinja2, whose grammar and messages are not upstream's. Before jinja2
sees a template, ``check(source)`` runs upstream's own lexer (lexer.cpp) and a recognizer of its
parser's grammar (parser.cpp: the same descent, no tree), on the source's UTF-8 bytes as upstream
reads them, and raises ``UpstreamSyntaxError`` with upstream's text where upstream throws:

* the lexer's and parser's located errors (``lexer: <msg>\\n<excerpt>`` / ``parser: Parser Error:
  Expected }} (Got e3)\\n<excerpt>``; the excerpt as utils.h ``peak_source`` makes it, from the
  source as given for the lexer and from the lexer's text for the parser);
* the parser's bare ``std::runtime_error`` texts ("Unknown statement: raw", "Unexpected token: / of
  type 22", "Expected 'in'", ...);
* ``std::stoll`` / ``std::stod`` refusing a number literal (``kind`` "exception": a
  ``std::out_of_range``, not a ``std::runtime_error``).

The one place llamact differs on purpose: a ``\\xHH`` string escape (docs/design.md deviation 1) is
accepted, and a malformed ``\\x`` escape is llamact's own error (lexer.unescape), not upstream's
"unknown escape character".
"""

from __future__ import annotations

import math
import sys

from jinja2.exceptions import TemplateSyntaxError

from .upstream_lexer import (
    ADDITIVE,
    CLOSE_EXPR,
    CLOSE_STMT,
    COLON,
    COMMA,
    COMMENT,
    COMPARISON,
    DOT,
    EOF,
    EQUALS,
    IDENT,
    LBRACE,
    LBRACKET,
    LPAREN,
    MULTIPLICATIVE,
    NUMBER,
    OPEN_EXPR,
    OPEN_STMT,
    PIPE,
    RBRACE,
    RBRACKET,
    RPAREN,
    STRING,
    TEXT,
    UNARY,
    MalformedHex,
    Token,
    UpstreamSyntaxError,
    bare,
    located,
    tokenize,
)

__all__ = ["Refused", "UpstreamSyntaxError", "check", "refusal"]


# -- the parser's grammar (parser.cpp) ----------------------------------------------------------------

_END = Token(EOF, b"", 0)
_ID = "identifier"  # the one node kind the grammar asks about


class _Parser:
    def __init__(self, tokens: list[Token], source: bytes) -> None:
        self.tokens, self.source, self.current = tokens, source, 0

    def peek(self, offset: int = 0) -> Token:
        i = self.current + offset
        return self.tokens[i] if i < len(self.tokens) else _END

    def next(self) -> Token:
        if self.current >= len(self.tokens):
            pos = self.tokens[-1].pos if self.tokens else 0
            raise located(b"parser", b"Parser Error: Unexpected EOF", self.source, pos)
        self.current += 1
        return self.tokens[self.current - 1]

    def expect(self, t: int, error: str) -> None:
        token = self.peek()
        if token.t != t:
            raise located(b"parser", b"Parser Error: " + error.encode() + b" (Got " + token.value + b")", self.source,
                           token.pos)
        self.current += 1

    def expect_identifier(self, name: bytes) -> None:
        token = self.peek()
        if token.t != IDENT or token.value != name:
            raise located(b"parser", b"Expected identifier: " + name, self.source, token.pos)
        self.current += 1

    def is_(self, t: int) -> bool:
        return self.peek().t == t

    def is_identifier(self, name: bytes) -> bool:
        return self.peek().t == IDENT and self.peek().value == name

    def is_statement(self, *names: bytes) -> bool:
        return self.peek(0).t == OPEN_STMT and self.peek(1).t == IDENT and self.peek(1).value in names

    def parse(self) -> None:
        while self.current < len(self.tokens):
            self.parse_any()

    def parse_any(self) -> None:
        t = self.peek().t
        if t in (COMMENT, TEXT):
            self.next()
        elif t == OPEN_STMT:
            self.parse_statement()
        elif t == OPEN_EXPR:
            self.expect(OPEN_EXPR, "Expected {{")
            self.parse_expression()
            self.expect(CLOSE_EXPR, "Expected }}")
        else:
            raise UpstreamSyntaxError("Unexpected token type")

    def until(self, *names: bytes) -> None:
        while not self.is_statement(*names):
            self.parse_any()

    def end(self, name: bytes) -> None:
        self.expect(OPEN_STMT, "Expected {%")
        self.expect_identifier(name)
        self.expect(CLOSE_STMT, "Expected %}")

    def parse_statement(self) -> None:
        self.expect(OPEN_STMT, "Expected {%")
        if self.peek().t != IDENT:
            raise UpstreamSyntaxError("Unknown statement")
        name = self.next().value
        if name == b"set":
            self.parse_set()
        elif name == b"if":
            self.parse_if()
            self.end(b"endif")
        elif name == b"macro":
            self.parse_primary()
            self.parse_args()
            self.expect(CLOSE_STMT, "Expected %}")
            self.until(b"endmacro")
            self.end(b"endmacro")
        elif name == b"for":
            self.parse_for()
            self.end(b"endfor")
        elif name in (b"break", b"continue"):
            self.expect(CLOSE_STMT, "Expected %}")
        elif name == b"call":
            if self.is_(LPAREN):
                self.parse_args()
            if self.parse_primary() != _ID:
                raise UpstreamSyntaxError("Expected identifier")
            self.parse_args()
            self.expect(CLOSE_STMT, "Expected %}")
            self.until(b"endcall")
            self.end(b"endcall")
        elif name == b"filter":
            if self.parse_primary() == _ID and self.is_(LPAREN):
                self.parse_call()
            self.expect(CLOSE_STMT, "Expected %}")
            self.until(b"endfilter")
            self.end(b"endfilter")
        elif name in (b"generation", b"endgeneration"):
            self.current += 1  # upstream skips one token, whatever it is
        else:
            raise bare(b"Unknown statement: " + name)

    def parse_set(self) -> None:
        self.parse_sequence()
        if self.is_(EQUALS):
            self.current += 1
            self.parse_sequence()
        else:
            self.expect(CLOSE_STMT, "Expected %}")
            self.until(b"endset")
            self.expect(OPEN_STMT, "Expected {%")
            self.expect_identifier(b"endset")
        self.expect(CLOSE_STMT, "Expected %}")

    def parse_if(self) -> None:
        self.parse_expression()
        self.expect(CLOSE_STMT, "Expected %}")
        self.until(b"elif", b"else", b"endif")
        if self.is_statement(b"elif"):
            self.current += 2
            self.parse_if()
        elif self.is_statement(b"else"):
            self.current += 2
            self.expect(CLOSE_STMT, "Expected %}")
            self.until(b"endif")

    def parse_for(self) -> None:
        self.parse_sequence(primary=True)
        if not self.is_identifier(b"in"):
            raise UpstreamSyntaxError("Expected 'in'")
        self.current += 1
        self.parse_expression()
        self.expect(CLOSE_STMT, "Expected %}")
        self.until(b"endfor", b"else")
        if self.is_statement(b"else"):
            self.current += 2
            self.expect(CLOSE_STMT, "Expected %}")
            self.until(b"endfor")

    def parse_sequence(self, primary: bool = False) -> str:
        kind = self.parse_primary() if primary else self.parse_expression()
        if not self.is_(COMMA):
            return kind
        while self.is_(COMMA):
            self.current += 1
            self.parse_primary() if primary else self.parse_expression()
        return "tuple"

    def parse_expression(self) -> str:
        kind = self.binary(self.parse_and, b"or")
        if self.is_identifier(b"if"):
            self.current += 1
            self.binary(self.parse_and, b"or")
            if self.is_identifier(b"else"):
                self.current += 1
                self.parse_expression()
            return "conditional"
        return kind

    def binary(self, operand: object, word: bytes) -> str:
        kind: str = operand()  # type: ignore[operator]
        while self.is_identifier(word):
            self.next()
            operand()  # type: ignore[operator]
            kind = "binary"
        return kind

    def parse_and(self) -> str:
        return self.binary(self.parse_not, b"and")

    def parse_not(self) -> str:
        if self.is_identifier(b"not"):
            self.next()
            self.parse_not()
            return "unary"
        return self.parse_comparison()

    def parse_comparison(self) -> str:
        kind = self.parse_additive()
        while True:
            if self.is_identifier(b"not") and self.peek(1).t == IDENT and self.peek(1).value == b"in":
                self.current += 2
            elif self.is_identifier(b"in") or self.is_(COMPARISON):
                self.next()
            else:
                return kind
            self.parse_additive()
            kind = "binary"

    def parse_additive(self) -> str:
        kind = self.parse_multiplicative()
        while self.is_(ADDITIVE):
            self.next()
            self.parse_multiplicative()
            kind = "binary"
        return kind

    def parse_multiplicative(self) -> str:
        kind = self.parse_test()
        while self.is_(MULTIPLICATIVE):
            self.next()
            self.parse_test()
            kind = "binary"
        return kind

    def parse_test(self) -> str:
        kind = self.parse_filter()
        while self.is_identifier(b"is"):
            self.current += 1
            if self.is_identifier(b"not"):
                self.current += 1
            self.parse_primary()
            if self.is_(LPAREN):
                self.parse_call()
            kind = "test"
        return kind

    def parse_filter(self) -> str:
        kind = self.parse_unary()
        while self.is_(PIPE):
            self.current += 1
            self.parse_primary()
            if self.is_(LPAREN):
                self.parse_call()
            kind = "filter"
        return kind

    def parse_unary(self) -> str:
        if self.is_(UNARY):
            self.next()
            self.parse_unary()
            return "unary"
        kind = self.parse_member(self.parse_primary())
        return self.parse_call() if self.is_(LPAREN) else kind

    def parse_call(self) -> str:
        self.parse_args()
        kind = self.parse_member("call")
        return self.parse_call() if self.is_(LPAREN) else kind

    def parse_args(self) -> None:
        self.expect(LPAREN, "Expected (")
        while not self.is_(RPAREN):
            if self.peek().t == MULTIPLICATIVE and self.peek().value == b"*":
                self.current += 1
                self.parse_expression()
            else:
                self.parse_expression()
                if self.is_(EQUALS):
                    self.current += 1
                    self.parse_expression()
            if self.is_(COMMA):
                self.current += 1
        self.expect(RPAREN, "Expected )")

    def parse_member(self, kind: str) -> str:
        while self.is_(DOT) or self.is_(LBRACKET):
            if self.next().t == LBRACKET:
                while not self.is_(RBRACKET):
                    if self.is_(COLON):
                        self.current += 1
                    else:
                        self.parse_expression()
                        if self.is_(COLON):
                            self.current += 1
                self.expect(RBRACKET, "Expected ]")
            else:
                self.parse_primary()
            kind = "member"
        return kind

    def parse_primary(self) -> str:
        token = self.next()
        if token.t == NUMBER:
            _number(token.value)
            return "number"
        if token.t == STRING:
            while self.is_(STRING):
                self.next()
            return "string"
        if token.t == IDENT:
            return _ID
        if token.t == LPAREN:
            kind = self.parse_sequence()
            self.expect(RPAREN, "Expected )")
            return kind
        if token.t == LBRACKET:
            while not self.is_(RBRACKET):
                self.parse_expression()
                if self.is_(COMMA):
                    self.current += 1
            self.current += 1
            return "array"
        if token.t == LBRACE:
            while not self.is_(RBRACE):
                self.parse_expression()
                self.expect(COLON, "Expected :")
                self.parse_expression()
                if self.is_(COMMA):
                    self.current += 1
            self.current += 1
            return "object"
        raise bare(b"Unexpected token: " + token.value + f" of type {token.t}".encode())


def _number(text: bytes) -> None:
    """``std::stoll`` / ``std::stod`` on a number literal: out of range is a std::out_of_range."""
    if b"." not in text:
        if not -(1 << 63) <= int(text) < (1 << 63):
            raise UpstreamSyntaxError("stoll", "exception")
        return
    value = float(text)
    tiny = value != 0 and abs(value) < sys.float_info.min
    vanished = value == 0 and any(c in b"123456789" for c in text)
    if math.isinf(value) or tiny or vanished:
        raise UpstreamSyntaxError("stod", "exception")


def check(source: str) -> None:
    """Raise ``UpstreamSyntaxError`` when upstream cannot lex or parse ``source`` (see the module
    docstring); a malformed ``\\x`` escape is left to llamact's own lexer."""
    data = source.encode("utf-8", "surrogatepass")
    try:
        tokens, text = tokenize(data)
        _Parser(tokens, text).parse()
    except MalformedHex:
        return
    except RecursionError:
        raise UpstreamSyntaxError("template nests too deeply") from None


class Refused(TemplateSyntaxError):
    """jinja2's syntax error carrying upstream's refusal (its text; ``kind`` as the oracle names it)."""

    def __init__(self, exc: UpstreamSyntaxError, source: str, name: str | None) -> None:
        offset = exc.offset or 0
        super().__init__(exc.message, source.encode("utf-8", "surrogatepass")[:offset].count(b"\n") + 1, name)
        self.kind = exc.kind


def refusal(source: str, name: str | None) -> Refused | None:
    """``check(source)``'s refusal as a jinja2 syntax error, or None when upstream compiles it."""
    try:
        check(source)
    except UpstreamSyntaxError as exc:
        return Refused(exc, source, name)
    return None
