"""JSON text read as upstream reads it (nlohmann ``ordered_json::parse``), with its error messages.

    parse_json(text) -> Json         raises JsonParseError

What enters: JSON text (tool-call arguments, template kwargs, a response-format schema given as
text). What leaves: the value upstream holds: keys in first-seen order with the last value of a
repeated key, integers outside 64 bits as doubles. What is raised: :class:`JsonParseError` whose
``message`` is nlohmann's ``what()`` word for word ("[json.exception.parse_error.101] parse error
at line 1, column 3: syntax error while parsing object key - invalid literal; last read: '{no';
expected string literal"), because upstream shows that text to users (e.g. "Failed to parse tool
call arguments as JSON: ..."). The lexer and the parser follow nlohmann's state machines on the
UTF-8 bytes: positions, the "last read" token text (control bytes as ``<U+00XX>``) and the
expected-token names are nlohmann's.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import LlamaInferenceException
from ..json_types import Json

__all__ = ["JsonParseError", "parse_json"]

_EOF = -1
# token types (nlohmann's lexer_base::token_type), by the names its messages print
_NAMES = {
    "true": "true literal", "false": "false literal", "null": "null literal", "string": "string literal",
    "unsigned": "number literal", "integer": "number literal", "float": "number literal", "[": "'['", "{": "'{'",
    "]": "']'", "}": "'}'", ":": "':'", ",": "','", "error": "<parse error>", "eof": "end of input",
    "literal_or_value": "'[', '{', or a literal", "uninitialized": "<uninitialized>",
}
_MAX_DEPTH = 10_000  # our own bound: nlohmann recurses without one, Python must not

_CONTROL_NAMES = ("NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS", "HT", "LF", "VT", "FF", "CR", "SO",
                  "SI", "DLE", "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB", "CAN", "EM", "SUB", "ESC", "FS", "GS",
                  "RS", "US")
_SHORT_ESCAPES = {0x08: "b", 0x09: "t", 0x0A: "n", 0x0C: "f", 0x0D: "r"}
_ESCAPES = {ord('"'): '"', ord("\\"): "\\", ord("/"): "/", ord("b"): "\b", ord("f"): "\f", ord("n"): "\n",
            ord("r"): "\r", ord("t"): "\t"}
# the byte ranges after a UTF-8 lead byte (nlohmann's next_byte_in_range calls)
_UTF8_RANGES: dict[int, tuple[tuple[int, int], ...]] = {}
for _b in range(0xC2, 0xE0):
    _UTF8_RANGES[_b] = ((0x80, 0xBF),)
_UTF8_RANGES[0xE0] = ((0xA0, 0xBF), (0x80, 0xBF))
for _b in (*range(0xE1, 0xED), 0xEE, 0xEF):
    _UTF8_RANGES[_b] = ((0x80, 0xBF), (0x80, 0xBF))
_UTF8_RANGES[0xED] = ((0x80, 0x9F), (0x80, 0xBF))
_UTF8_RANGES[0xF0] = ((0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF))
for _b in (0xF1, 0xF2, 0xF3):
    _UTF8_RANGES[_b] = ((0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF))
_UTF8_RANGES[0xF4] = ((0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF))


class JsonParseError(LlamaInferenceException):
    """Text that is not JSON; ``message`` is nlohmann's explanation."""


class _Lexer:
    """nlohmann's lexer over the UTF-8 bytes of the text (positions, token text, error messages)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.current = _EOF
        self.next_unget = False
        self.chars_total = 0
        self.chars_line = 0
        self.lines = 0
        self.token = bytearray()       # token_string: every byte read for the current token
        self.buffer = bytearray()      # token_buffer: a string's decoded bytes, a number's text
        self.error = ""
        self.value: Json = None

    # -- reading -----------------------------------------------------------------------------------

    def get(self) -> int:
        self.chars_total += 1
        self.chars_line += 1
        if self.next_unget:
            self.next_unget = False
        elif self.pos < len(self.data):
            self.current = self.data[self.pos]
            self.pos += 1
        else:
            self.current = _EOF
        if self.current != _EOF:
            self.token.append(self.current)
        if self.current == 0x0A:
            self.lines += 1
            self.chars_line = 0
        return self.current

    def unget(self) -> None:
        self.next_unget = True
        self.chars_total -= 1
        if self.chars_line == 0:
            if self.lines > 0:
                self.lines -= 1
        else:
            self.chars_line -= 1
        if self.current != _EOF:
            self.token.pop()

    def reset(self) -> None:
        self.buffer.clear()
        self.token.clear()
        self.token.append(self.current & 0xFF)

    def token_text(self) -> str:
        out = []
        for byte in self.token:
            out.append(f"<U+{byte:04X}>" if byte <= 0x1F else chr(byte))
        # bytes >= 0x80 stand for themselves: re-read them as UTF-8 for the message
        return "".join(out).encode("latin-1", errors="replace").decode("utf-8", errors="replace")

    def position(self) -> str:
        return f" at line {self.lines + 1}, column {self.chars_line}"

    # -- tokens ------------------------------------------------------------------------------------

    def scan(self) -> str:
        if self.chars_total == 0:
            if self.get() == 0xEF:
                if not (self.get() == 0xBB and self.get() == 0xBF):
                    self.error = "invalid BOM; must be 0xEF 0xBB 0xBF if given"
                    return "error"
            else:
                self.unget()
        self.get()
        while self.current in (0x20, 0x09, 0x0A, 0x0D):
            self.get()
        c = self.current
        if c in (0x5B, 0x5D, 0x7B, 0x7D, 0x3A, 0x2C):
            return chr(c)
        if c == 0x74:
            return self._literal(b"true", "true")
        if c == 0x66:
            return self._literal(b"false", "false")
        if c == 0x6E:
            return self._literal(b"null", "null")
        if c == 0x22:
            return self._string()
        if c == 0x2D or 0x30 <= c <= 0x39:
            return self._number()
        if c in (0, _EOF):
            return "eof"
        self.error = "invalid literal"
        return "error"

    def _literal(self, text: bytes, kind: str) -> str:
        for expected in text[1:]:
            if self.get() != expected:
                self.error = "invalid literal"
                return "error"
        return kind

    def _codepoint(self) -> int:
        value = 0
        for shift in (12, 8, 4, 0):
            c = self.get()
            if 0x30 <= c <= 0x39:
                value += (c - 0x30) << shift
            elif 0x41 <= c <= 0x46:
                value += (c - 0x37) << shift
            elif 0x61 <= c <= 0x66:
                value += (c - 0x57) << shift
            else:
                return -1
        return value

    def _string(self) -> str:
        self.reset()
        buf = self.buffer
        while True:
            c = self.get()
            if c == _EOF:
                self.error = "invalid string: missing closing quote"
                return "error"
            if c == 0x22:
                self.value = buf.decode("utf-8")
                return "string"
            if c == 0x5C:
                e = self.get()
                if e in _ESCAPES:
                    buf += _ESCAPES[e].encode()
                    continue
                if e != 0x75:
                    self.error = "invalid string: forbidden character after backslash"
                    return "error"
                cp = self._codepoint()
                if cp == -1:
                    self.error = "invalid string: '\\u' must be followed by 4 hex digits"
                    return "error"
                if 0xD800 <= cp <= 0xDBFF:
                    if not (self.get() == 0x5C and self.get() == 0x75):
                        self.error = "invalid string: surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"
                        return "error"
                    low = self._codepoint()
                    if low == -1:
                        self.error = "invalid string: '\\u' must be followed by 4 hex digits"
                        return "error"
                    if not 0xDC00 <= low <= 0xDFFF:
                        self.error = "invalid string: surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"
                        return "error"
                    cp = (cp << 10) + low - 0x35FDC00
                elif 0xDC00 <= cp <= 0xDFFF:
                    self.error = "invalid string: surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF"
                    return "error"
                buf += chr(cp).encode("utf-8")
                continue
            if c <= 0x1F:
                short = _SHORT_ESCAPES.get(c)
                self.error = (f"invalid string: control character U+{c:04X} ({_CONTROL_NAMES[c]}) must be escaped to "
                              f"\\u{c:04X}" + (f" or \\{short}" if short else ""))
                return "error"
            if c < 0x80:
                buf.append(c)
                continue
            ranges = _UTF8_RANGES.get(c)
            if ranges is None:
                self.error = "invalid string: ill-formed UTF-8 byte"
                return "error"
            buf.append(c)
            for lo, hi in ranges:
                n = self.get()
                if not lo <= n <= hi:
                    self.error = "invalid string: ill-formed UTF-8 byte"
                    return "error"
                buf.append(n)

    def _number(self) -> str:
        self.reset()
        buf = self.buffer
        kind = "unsigned"
        c = self.current
        buf.append(c)
        state = "minus" if c == 0x2D else ("zero" if c == 0x30 else "any1")
        while True:
            if state == "minus":
                kind = "integer"
                c = self.get()
                if c == 0x30:
                    state = "zero"
                elif 0x31 <= c <= 0x39:
                    state = "any1"
                else:
                    self.error = "invalid number; expected digit after '-'"
                    return "error"
                buf.append(c)
            elif state in ("zero", "any1"):
                c = self.get()
                if state == "any1" and 0x30 <= c <= 0x39:
                    buf.append(c)
                elif c == 0x2E:
                    buf.append(c)
                    state = "decimal1"
                elif c in (0x65, 0x45):
                    buf.append(c)
                    state = "exponent"
                else:
                    break
            elif state == "decimal1":
                kind = "float"
                c = self.get()
                if not 0x30 <= c <= 0x39:
                    self.error = "invalid number; expected digit after '.'"
                    return "error"
                buf.append(c)
                state = "decimal2"
            elif state == "decimal2":
                c = self.get()
                if 0x30 <= c <= 0x39:
                    buf.append(c)
                elif c in (0x65, 0x45):
                    buf.append(c)
                    state = "exponent"
                else:
                    break
            elif state == "exponent":
                kind = "float"
                c = self.get()
                if c in (0x2B, 0x2D):
                    state = "sign"
                elif 0x30 <= c <= 0x39:
                    state = "any2"
                else:
                    self.error = "invalid number; expected '+', '-', or digit after exponent"
                    return "error"
                buf.append(c)
            elif state == "sign":
                c = self.get()
                if not 0x30 <= c <= 0x39:
                    self.error = "invalid number; expected digit after exponent sign"
                    return "error"
                buf.append(c)
                state = "any2"
            else:  # any2
                c = self.get()
                if not 0x30 <= c <= 0x39:
                    break
                buf.append(c)
        self.unget()
        text = buf.decode("ascii")
        if kind == "unsigned":
            value = int(text)
            if value < 2**64:
                self.value = value
                return "unsigned"
        elif kind == "integer":
            value = int(text)
            if value >= -(2**63):
                self.value = value
                return "integer"
        try:
            self.value = float(text)
        except OverflowError:  # pragma: no cover - float() saturates to inf instead
            self.value = math.inf
        return "float"


class _Parser:
    """nlohmann's parser (sax_parse_internal) building Python values, with its messages."""

    def __init__(self, data: bytes) -> None:
        self.lexer = _Lexer(data)
        self.last = "uninitialized"

    def next(self) -> str:
        self.last = self.lexer.scan()
        return self.last

    def fail(self, expected: str, context: str) -> JsonParseError:
        lx = self.lexer
        message = "syntax error " + (f"while parsing {context} " if context else "") + "- "
        if self.last == "error":
            message += f"{lx.error}; last read: '{lx.token_text()}'"
        else:
            message += f"unexpected {_NAMES[self.last]}"
        if expected != "uninitialized":
            message += f"; expected {_NAMES[expected]}"
        return JsonParseError(f"[json.exception.parse_error.101] parse error{lx.position()}: {message}",
                              {"line": lx.lines + 1, "column": lx.chars_line})

    def parse(self) -> Json:
        self.next()
        value = self.value()
        if self.next() != "eof":
            raise self.fail("eof", "value")
        return value

    def value(self) -> Json:
        # an explicit stack (containers, their keys) instead of recursion: deep input cannot overflow
        stack: list[tuple[Any, str | None]] = []
        while True:
            kind = self.last
            if kind == "{":
                if self.next() == "}":
                    result: Json = {}
                else:
                    if self.last != "string":
                        raise self.fail("string", "object key")
                    key = self.lexer.value
                    if self.next() != ":":
                        raise self.fail(":", "object separator")
                    stack.append(({}, key))
                    self._check_depth(stack)
                    self.next()
                    continue
            elif kind == "[":
                if self.next() == "]":
                    result = []
                else:
                    stack.append(([], None))
                    self._check_depth(stack)
                    continue
            elif kind == "float":
                if not math.isfinite(self.lexer.value):
                    raise JsonParseError("[json.exception.out_of_range.406] number overflow parsing "
                                         f"'{self.lexer.token_text()}'")
                result = self.lexer.value
            elif kind in ("unsigned", "integer", "string"):
                result = self.lexer.value
            elif kind in ("true", "false", "null"):
                result = {"true": True, "false": False, "null": None}[kind]
            elif kind == "error":
                raise self.fail("uninitialized", "value")
            elif kind == "eof" and self.lexer.chars_total == 1:
                raise JsonParseError("[json.exception.parse_error.101] parse error"
                                     f"{self.lexer.position()}: attempting to parse an empty input; check that your "
                                     "input string or stream contains the expected JSON")
            else:
                raise self.fail("literal_or_value", "value")
            # a value is complete: hand it to the enclosing containers
            while True:
                if not stack:
                    return result
                container, key = stack[-1]
                if isinstance(container, list):
                    container.append(result)
                    if self.next() == ",":
                        self.next()
                        break
                    if self.last != "]":
                        raise self.fail("]", "array")
                    stack.pop()
                    result = container
                    continue
                container[key] = result
                if self.next() == ",":
                    if self.next() != "string":
                        raise self.fail("string", "object key")
                    stack[-1] = (container, self.lexer.value)
                    if self.next() != ":":
                        raise self.fail(":", "object separator")
                    self.next()
                    break
                if self.last != "}":
                    raise self.fail("}", "object")
                stack.pop()
                result = container

    @staticmethod
    def _check_depth(stack: list[Any]) -> None:
        if len(stack) > _MAX_DEPTH:
            raise JsonParseError(f"JSON text nests deeper than {_MAX_DEPTH} levels")


def parse_json(text: str) -> Json:
    """``text`` parsed as upstream parses it; raises JsonParseError with nlohmann's message."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise JsonParseError("JSON text holds a lone surrogate, which is not UTF-8") from None
    return _Parser(data).parse()
