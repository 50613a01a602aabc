"""A reader for the subset of C++ that upstream's unit tests write their data in.

What enters: C++ source text. What leaves: tokens (:func:`tokenize_cpp`: string literals with
every escape form, raw strings, adjacent-literal concatenation, backslash-newline splices,
comments and preprocessor lines dropped, numbers), a :class:`Cursor` that evaluates the data
arguments of a call (strings, numbers, ``common_json`` construction), and the call sites of a
function (:func:`call_sites`). upstream_vectors.py uses it to read the test vectors; anything it
does not understand raises :class:`UpstreamVectorError` naming the file and line.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any


class UpstreamVectorError(ValueError):
    """A test source that the extractor cannot read faithfully; the message names file and line."""



def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json_text(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


# -------------------------------------------------------------------------------------------------
# lexer
# -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Token:
    """``kind``: ``ident``, ``number``, ``string``, ``char`` or ``punct``. ``text`` is the spelling
    (for a literal: without its prefix); ``value`` is the decoded bytes of a string or char literal
    (UTF-8 execution character set), else None. ``prefix`` is a literal's encoding prefix.
    ``conditional``: the token sits inside a preprocessor conditional, which the extractors refuse
    for a call site (this lexer does not evaluate conditions)."""

    kind: str
    text: str
    line: int
    value: bytes | None = None
    prefix: str = ""
    conditional: bool = False  # inside a #if / #ifdef / #ifndef block


_PUNCT3 = ("<<=", ">>=", "...", "->*", "<=>")
_PUNCT2 = ("::", "->", "&&", "||", "==", "!=", "<=", ">=", "<<", ">>", "++", "--", "+=", "-=", "*=", "/=",
           "%=", "&=", "|=", "^=", ".*", "##")
_STRING_PREFIXES = ("u8R", "uR", "UR", "LR", "R", "u8", "u", "U", "L")
_SIMPLE_ESCAPES = {
    "'": 0x27, '"': 0x22, "?": 0x3F, "\\": 0x5C, "a": 0x07, "b": 0x08, "f": 0x0C, "n": 0x0A, "r": 0x0D,
    "t": 0x09, "v": 0x0B,
}
_HEX = "0123456789abcdefABCDEF"
_OCT = "01234567"
_RAW_DELIM_FORBIDDEN = set(" ()\\\t\v\f\n")


class _Lexer:
    """C++ translation phases 1-3 for the subset the tests use.

    Phase 2 (deleting backslash-newline) is done lazily by :meth:`_skip_splices` wherever the
    lexer reads, except inside a raw string's delimiter and body, where the standard reverts it.
    """

    def __init__(self, text: str, path: str) -> None:
        self.text = text
        self.path = path
        self.pos = 0
        self.cond_depth = 0  # open #if / #ifdef / #ifndef blocks
        # line starts, for offset -> line
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def error(self, offset: int, message: str) -> UpstreamVectorError:
        return UpstreamVectorError(f"{self.path}:{self.line_of(offset)}: {message}")

    def line_of(self, offset: int) -> int:
        lo, hi = 0, len(self._line_starts)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid
        return lo + 1

    def _skip_splices(self, i: int) -> int:
        text = self.text
        while text.startswith("\\", i):
            if text.startswith("\\\n", i):
                i += 2
            elif text.startswith("\\\r\n", i):
                i += 3
            else:
                break
        return i

    def peek(self, ahead: int = 0) -> tuple[str, int]:
        """The ``ahead``-th logical character from ``pos`` and the offset just past it ('' at end)."""
        i = self.pos
        for _ in range(ahead + 1):
            i = self._skip_splices(i)
            if i >= len(self.text):
                return "", i
            ch = self.text[i]
            i += 1
        return ch, i

    def take(self) -> str:
        ch, self.pos = self.peek()
        return ch

    def tokens(self) -> list[Token]:
        out: list[Token] = []
        at_line_start = True
        while True:
            self.pos = self._skip_splices(self.pos)
            if self.pos >= len(self.text):
                if self.cond_depth:
                    raise self.error(len(self.text), "#if without #endif")
                return out
            start = self.pos
            ch = self.text[start]
            if ch == "\n":
                self.pos += 1
                at_line_start = True
                continue
            if ch in " \t\r\v\f":
                self.pos += 1
                continue
            nxt, _ = self.peek(1)
            if ch == "/" and nxt == "/":
                self._line_comment()
                continue
            if ch == "/" and nxt == "*":
                self._block_comment()
                continue
            if ch == "#" and at_line_start:
                self._directive()
                continue
            at_line_start = False
            if ch.isalpha() or ch == "_" or ord(ch) > 0x7F:
                tok = self._ident_or_literal()
            elif ch.isdigit() or (ch == "." and nxt.isdigit()):
                tok = self._number()
            elif ch == '"':
                tok = self._string("", start)
            elif ch == "'":
                tok = self._char("", start)
            else:
                tok = self._punct()
            out.append(replace(tok, conditional=True) if self.cond_depth else tok)

    def _line_comment(self) -> None:
        # a splice continues the comment onto the next line (phase 2 comes before phase 3)
        while True:
            ch, nxt = self.peek()
            if ch == "" or ch == "\n":
                return  # the newline itself is left for the main loop
            self.pos = nxt

    def _block_comment(self) -> None:
        start = self.pos
        self.take()
        self.take()
        while True:
            ch = self.take()
            if ch == "":
                raise self.error(start, "unterminated /* comment")
            if ch == "*" and self.peek()[0] == "/":
                self.take()
                return

    def _directive(self) -> None:
        # a preprocessor line (#include, #ifdef ... ): skipped to the end of its logical line, with
        # the nesting of conditionals counted (their tokens are marked, not evaluated)
        start = self.pos
        self.take()  # '#'
        name = ""
        while True:
            ch, nxt = self.peek()
            if ch in (" ", "\t") and not name:
                self.pos = nxt
            elif ch and (ch.isalnum() or ch == "_"):
                name += ch
                self.pos = nxt
            else:
                break
        if name in ("if", "ifdef", "ifndef"):
            self.cond_depth += 1
        elif name == "endif":
            if self.cond_depth == 0:
                raise self.error(start, "#endif without #if")
            self.cond_depth -= 1
        while True:
            ch, nxt = self.peek()
            if ch == "" or ch == "\n":
                return
            if ch == "/" and self.peek(1)[0] == "*":
                self._block_comment()
                continue
            if ch == "/" and self.peek(1)[0] == "/":
                self._line_comment()
                return
            self.pos = nxt

    def _ident_or_literal(self) -> Token:
        start = self.pos
        chars: list[str] = []
        while True:
            ch, nxt = self.peek()
            if ch and (ch.isalnum() or ch == "_" or ord(ch) > 0x7F):
                chars.append(ch)
                self.pos = nxt
            else:
                break
        ident = "".join(chars)
        ch, _ = self.peek()
        if ch == '"' and ident in _STRING_PREFIXES:
            if "R" in ident:
                return self._raw_string(ident[:-1], start)
            return self._string(ident, start)
        if ch == "'" and ident in ("u8", "u", "U", "L"):
            return self._char(ident, start)
        return Token("ident", ident, self.line_of(start))

    def _number(self) -> Token:
        # a pp-number: digit or .digit, then [0-9A-Za-z_.], digit separators, and e/E/p/P signs
        start = self.pos
        chars: list[str] = []
        while True:
            ch, nxt = self.peek()
            if ch and (ch.isalnum() or ch in "._"):
                chars.append(ch)
                self.pos = nxt
                if ch in "eEpP":
                    sign, after = self.peek()
                    if sign in "+-" and sign:
                        chars.append(sign)
                        self.pos = after
            elif ch == "'" and chars and self.peek(1)[0].isalnum():
                self.pos = nxt  # digit separator
            else:
                break
        return Token("number", "".join(chars), self.line_of(start))

    def _punct(self) -> Token:
        start = self.pos
        for group in (_PUNCT3, _PUNCT2):
            size = len(group[0])
            spelled = "".join(self.peek(k)[0] for k in range(size))
            if spelled in group:
                for _ in range(size):
                    self.take()
                return Token("punct", spelled, self.line_of(start))
        return Token("punct", self.take(), self.line_of(start))

    def _escape(self, quote_start: int) -> bytes:
        """After a backslash: the bytes of one escape sequence (narrow, UTF-8 execution charset)."""
        at = self.pos
        ch = self.take()
        if ch in _SIMPLE_ESCAPES:
            return bytes([_SIMPLE_ESCAPES[ch]])
        if ch in _OCT:
            digits = ch
            while len(digits) < 3 and self.peek()[0] in _OCT and self.peek()[0]:
                digits += self.take()
            value = int(digits, 8)
            if value > 0xFF:
                raise self.error(at, f"octal escape \\{digits} does not fit a char")
            return bytes([value])
        if ch == "x":
            digits = ""
            if self.peek()[0] == "{":
                raise self.error(at, "delimited escape \\x{...} (C++23) is not supported")
            while self.peek()[0] and self.peek()[0] in _HEX:
                digits += self.take()
            if not digits:
                raise self.error(at, "\\x without hex digits")
            value = int(digits, 16)
            if value > 0xFF:
                raise self.error(at, f"hex escape \\x{digits} does not fit a char")
            return bytes([value])
        if ch in "uU":
            count = 4 if ch == "u" else 8
            digits = ""
            for _ in range(count):
                d = self.take()
                if not d or d not in _HEX:
                    raise self.error(at, f"\\{ch} needs {count} hex digits")
                digits += d
            code = int(digits, 16)
            if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
                raise self.error(at, f"\\{ch}{digits} is not a Unicode scalar value")
            return chr(code).encode("utf-8")
        if ch == "":
            raise self.error(quote_start, "unterminated literal")
        raise self.error(at, f"unknown escape sequence \\{ch}")

    def _quoted(self, quote: str, start: int) -> bytes:
        assert self.take() == quote
        out = bytearray()
        while True:
            ch = self.take()
            if ch == "" or ch == "\n":
                raise self.error(start, "unterminated literal")
            if ch == quote:
                return bytes(out)
            if ch == "\\":
                out += self._escape(start)
            else:
                out += ch.encode("utf-8")

    def _string(self, prefix: str, start: int) -> Token:
        value = self._quoted('"', start)
        return Token("string", self.text[start:self.pos], self.line_of(start), value, prefix)

    def _char(self, prefix: str, start: int) -> Token:
        value = self._quoted("'", start)
        return Token("char", self.text[start:self.pos], self.line_of(start), value, prefix)

    def _raw_string(self, prefix: str, start: int) -> Token:
        # R"delim( ... )delim": delimiter and body are read from the source as is (no splices)
        i = self._skip_splices(self.pos)
        if not self.text.startswith('"', i):
            raise self.error(start, "raw string prefix without its quote")
        i += 1
        close_paren = self.text.find("(", i)
        if close_paren < 0 or close_paren - i > 16:
            raise self.error(start, "raw string without a valid delimiter")
        delim = self.text[i:close_paren]
        if any(c in _RAW_DELIM_FORBIDDEN for c in delim):
            raise self.error(start, f"invalid raw string delimiter {delim!r}")
        end_marker = ")" + delim + '"'
        end = self.text.find(end_marker, close_paren + 1)
        if end < 0:
            raise self.error(start, "unterminated raw string")
        body = self.text[close_paren + 1:end]
        self.pos = end + len(end_marker)
        return Token("string", self.text[start:self.pos], self.line_of(start), body.encode("utf-8"), prefix + "R")


def tokenize_cpp(text: str, path: str = "<c++>") -> list[Token]:
    """Tokens of a C++ source (comments and preprocessor lines dropped)."""
    return _Lexer(text, path).tokens()


# -------------------------------------------------------------------------------------------------
# evaluating the data arguments
# -------------------------------------------------------------------------------------------------

_JSON_NAMES = ("json", "common_json")


class Cursor:
    """Reads the argument tokens of one call; errors name the file and the line."""

    def __init__(self, tokens: list[Token], index: int, path: str, what: str) -> None:
        self.tokens = tokens
        self.i = index
        self.path = path
        self.what = what

    def error(self, message: str, token: Token | None = None) -> UpstreamVectorError:
        tok = token or self.peek()
        near = f" near {tok.text!r}" if tok is not None else " at end of file"
        line = tok.line if tok is not None else (self.tokens[-1].line if self.tokens else 0)
        return UpstreamVectorError(f"{self.path}:{line}: cannot read {self.what}: {message}{near}")

    def peek(self, ahead: int = 0) -> Token | None:
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else None

    def at(self, *texts: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok is not None and tok.kind in ("punct", "ident") and tok.text in texts

    def next(self) -> Token:
        tok = self.peek()
        if tok is None:
            raise self.error("unexpected end of file")
        self.i += 1
        return tok

    def expect(self, text: str) -> Token:
        tok = self.peek()
        if tok is None or tok.kind not in ("punct", "ident") or tok.text != text:
            raise self.error(f"expected {text!r}")
        return self.next()

    # -- strings ----------------------------------------------------------------------------------

    def is_string_start(self) -> bool:
        tok = self.peek()
        if tok is None:
            return False
        if tok.kind == "string":
            return True
        return (tok.text == "std" and self.at("::", ahead=1) and self.at("string", ahead=2)
                and self.at("(", ahead=3))

    def string(self) -> str:
        """Adjacent string literals (concatenated), or ``std::string(<that>)``; as text."""
        first = self.peek()
        if first is not None and first.kind == "ident" and first.text == "std":
            self.expect("std")
            self.expect("::")
            self.expect("string")
            self.expect("(")
            value = self.string()
            self.expect(")")
            return value
        parts: list[bytes] = []
        prefixes: set[str] = set()
        while (tok := self.peek()) is not None and tok.kind == "string":
            self.next()
            parts.append(tok.value or b"")
            prefixes.add(tok.prefix.replace("R", ""))
        if not parts:
            raise self.error("expected a string literal")
        if prefixes - {"", "u8"}:
            raise self.error(f"wide or UTF-16/32 string literal ({', '.join(sorted(prefixes))}) is not supported",
                             first)
        data = b"".join(parts)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"string literal is not valid UTF-8 ({exc})", first) from None

    # -- common_json ------------------------------------------------------------------------------

    def json_value(self, context: str) -> Any:
        """A value initialising a ``common_json`` (context ``json``), an array element (``element``)
        or the value of a ``{key, value}`` pair (``pair``)."""
        tok = self.peek()
        if tok is None:
            raise self.error("unexpected end of file")
        if tok.kind == "punct" and tok.text == "{":
            return self.braced(context)
        if self.is_string_start():
            return self.string()
        if tok.kind == "char":
            self.next()
            if tok.prefix or len(tok.value or b"") != 1:
                raise self.error("only plain one-byte char literals are supported", tok)
            byte = (tok.value or b"\0")[0]
            return byte - 256 if byte > 0x7F else byte  # char is signed on the supported targets
        after = self.peek(1)
        if tok.kind == "number" or (tok.kind == "punct" and tok.text in ("+", "-") and after is not None
                                    and after.kind == "number"):
            return self.number()
        if tok.kind == "ident":
            if tok.text in ("true", "false"):
                self.next()
                return tok.text == "true"
            if tok.text in ("nullptr", "NULL"):
                self.next()
                return None
            if tok.text in _JSON_NAMES:
                return self.json_expression()
        raise self.error("unsupported expression in a JSON value")

    def json_expression(self) -> Any:
        name = self.next()
        if self.at("::"):
            self.next()
            method = self.next()
            if method.kind != "ident":
                raise self.error("expected a member name", method)
            self.expect("(")
            if method.text == "object":
                if self.at(")"):
                    value: Any = {}
                else:
                    if not self.at("{"):
                        raise self.error("json::object() takes a braced list of pairs")
                    value = self.pairs()
            elif method.text == "array":
                if self.at(")"):
                    value = []
                else:
                    value = self.elements()
            elif method.text == "parse":
                text = self.string()
                try:
                    value = parse_json_text(text)
                except ValueError as exc:
                    raise self.error(f"json::parse text is not valid JSON ({exc})", method) from None
            else:
                raise self.error(f"unsupported json::{method.text}", method)
            self.expect(")")
            return value
        if self.at("{"):
            # json{...}: direct-list-initialisation, the initializer_list<common_json_item> ctor
            if self.at("}", ahead=1):
                raise self.error("json{} (empty) is not supported", name)
            return self.pairs()
        if self.at("("):
            self.next()
            if self.at(")"):
                self.next()
                return None  # json(): the default constructor gives null
            if self.at("{") and self.at("}", ahead=1):
                raise self.error("json({}) is ambiguous and not supported", name)
            value = self.json_value("json")
            self.expect(")")
            return value
        raise self.error("unsupported use of json", name)

    def braced(self, context: str) -> Any:
        if self.at("}", ahead=1):
            self.next()
            self.next()
            # {} value-initialises common_json / common_json_value (null); as the value of a pair the
            # initializer_list<common_json_item> overload takes it (an empty object)
            return {} if context == "pair" else None
        return self.pairs()

    def pairs(self) -> dict[str, Any]:
        """``{ {key, value}, ... }``: an object, key order kept (a repeated key keeps its first
        position and takes the last value, like ordered_json's operator[])."""
        self.expect("{")
        out: dict[str, Any] = {}
        while not self.at("}"):
            open_tok = self.peek()
            if not self.at("{"):
                raise self.error("a braced common_json list holds {key, value} pairs only")
            self.next()
            if not self.is_string_start():
                raise self.error("the key of a {key, value} pair must be a string", open_tok)
            key = self.string()
            if not self.at(","):
                raise self.error("a {key, value} pair has exactly two elements", open_tok)
            self.next()
            out[key] = self.json_value("pair")
            if self.at(","):
                raise self.error("a {key, value} pair has exactly two elements", open_tok)
            self.expect("}")
            if not self.at("}"):
                self.expect(",")
        self.expect("}")
        return out

    def elements(self) -> list[Any]:
        """``json::array({v, ...})``: initializer_list<common_json_value>."""
        self.expect("{")
        out: list[Any] = []
        while not self.at("}"):
            out.append(self.json_value("element"))
            if not self.at("}"):
                self.expect(",")
        self.expect("}")
        return out

    def number(self) -> int | float:
        negative = False
        while self.at("+", "-"):
            negative ^= self.next().text == "-"
        tok = self.next()
        if tok.kind != "number":
            raise self.error("expected a number", tok)
        value = _cpp_number(tok.text)
        if value is None:
            raise self.error(f"unsupported numeric literal {tok.text!r}", tok)
        number, unsigned = value
        if negative:
            if unsigned and number:
                raise self.error("negated unsigned literal", tok)
            number = -number
        return number


_INT_RE = re.compile(
    r"(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)"  # hex, binary, octal (and 0), decimal
    r"([uU]?(?:ll|LL|l|L|z|Z)?|(?:ll|LL|l|L|z|Z)[uU]?)"  # suffix
)
_FLOAT_RE = re.compile(r"((?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)([fFlL]?)")


def _cpp_number(text: str) -> tuple[int | float, bool] | None:
    """A decimal/hex/octal/binary integer or a decimal floating literal: (value, is unsigned)."""
    m = _INT_RE.fullmatch(text)
    if m:
        digits, suffix = m.groups()
        if digits[:2] in ("0x", "0X"):
            value = int(digits[2:], 16)
        elif digits[:2] in ("0b", "0B"):
            value = int(digits[2:], 2)
        elif digits.startswith("0") and len(digits) > 1:
            value = int(digits[1:], 8)
        else:
            value = int(digits)
        return value, "u" in suffix.lower()
    m = _FLOAT_RE.fullmatch(text)
    if m:
        digits, suffix = m.groups()
        value_f = float(digits)
        if suffix in ("f", "F"):
            value_f = struct.unpack("<f", struct.pack("<f", value_f))[0]
        return value_f, False
    return None


# -------------------------------------------------------------------------------------------------
# finding the calls
# -------------------------------------------------------------------------------------------------


@dataclass
class CallSite:
    index: int  # token index of the callee name
    group: str  # enclosing top-level function ("" if none)
    subtest: str  # most recent t.test("...") name in that function ("" if none)


def call_sites(tokens: list[Token], callee: str, path: str) -> list[CallSite]:
    """Calls ``callee(`` inside function bodies (not declarations or definitions at namespace
    scope, not member calls ``x.callee(``), with the enclosing top-level function's name."""
    sites: list[CallSite] = []
    depth = 0
    group = ""
    subtest = ""
    pending_name = ""  # at depth 0: the identifier before the last "(" since the last ";" / "}"
    for i, tok in enumerate(tokens):
        if tok.kind == "punct":
            if tok.text == "{":
                if depth == 0:
                    group = pending_name if i > 0 and tokens[i - 1].text in (")", "const") else ""
                    subtest = ""
                depth += 1
            elif tok.text == "}":
                depth -= 1
                if depth < 0:
                    raise UpstreamVectorError(f"{path}:{tok.line}: unbalanced braces")
                if depth == 0:
                    pending_name = ""
            elif tok.text == ";" and depth == 0:
                pending_name = ""
            elif tok.text == "(" and depth == 0 and i > 0 and tokens[i - 1].kind == "ident" and not pending_name:
                pending_name = tokens[i - 1].text
            continue
        if tok.kind != "ident" or depth == 0:
            continue
        before = tokens[i - 1] if i > 0 else None
        after = tokens[i + 1] if i + 1 < len(tokens) else None
        if after is None or after.text != "(" or after.kind != "punct":
            continue
        member = before is not None and before.kind == "punct" and before.text in (".", "->", "::")
        if tok.text == "test" and member and before is not None and before.text in (".", "->"):
            nxt = tokens[i + 2] if i + 2 < len(tokens) else None
            if nxt is not None and nxt.kind == "string" and nxt.prefix == "":
                subtest = (nxt.value or b"").decode("utf-8", "replace")
        if tok.text == callee and not member:
            if tok.conditional:
                raise UpstreamVectorError(f"{path}:{tok.line}: a {callee} call inside a preprocessor conditional")
            sites.append(CallSite(i, group, subtest))
    if depth != 0:
        raise UpstreamVectorError(f"{path}: unbalanced braces at end of file")
    return sites


def read_source(llama_cpp_dir: Path, rel: str) -> tuple[list[Token], str]:
    path = Path(llama_cpp_dir) / rel
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UpstreamVectorError(f"cannot read {path}: {exc}") from exc
    return tokenize_cpp(text, rel), rel


def end_statement(cur: Cursor) -> None:
    cur.expect(")")
    cur.expect(";")
