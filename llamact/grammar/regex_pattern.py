"""A JSON-schema ``pattern`` (a regex anchored with ``^...$``) turned into GBNF rules.

Mirrors the converter's ``_pattern_to_rule`` upstream, which walks the pattern byte by byte (a
multi-byte UTF-8 character is several "characters" to it, so a quantifier after one applies to
its last byte only). To keep that, the walk here runs over the pattern's UTF-8 bytes (held as a
latin-1 ``str``) and every rule handed out is turned back into text with ``surrogateescape``, so
that a stray byte survives as a lone surrogate (see ``converter.format_grammar``).

What enters: the pattern, the rule name, an ``add_rule(name, body) -> name`` callback (the
converter's deduplicating ``_add_rule``) and the ``dotall`` option. What leaves: the name of the
rule matching a JSON string whose content matches the pattern. What is raised:
:class:`UnsupportedPattern` for a valid regex with no grammar equivalent (lookarounds, inner
anchors, unknown escapes, ...; the caller degrades to any string with a warning) and
:class:`InvalidPattern` for a pattern that is not a valid regex (the caller reports an error).
"""

from __future__ import annotations

from collections.abc import Callable

from .int_ranges import INT_MAX, build_repetition

__all__ = ["InvalidPattern", "UnsupportedPattern", "gbnf_escape_length", "pattern_to_rule"]

MAX_PATTERN_DEPTH = 100
NON_LITERAL_SET = frozenset("|.()[]{}*+?^$")
ESCAPED_IN_REGEXPS_BUT_NOT_IN_LITERALS = frozenset("^$.[]()|{}*+?")
_HEX = frozenset("0123456789abcdefABCDEF")


class UnsupportedPattern(Exception):
    """A valid regex with no grammar equivalent."""


class InvalidPattern(Exception):
    """Not a valid regex."""


def gbnf_escape_length(pattern: str, pos: int) -> int:
    """The length of the GBNF escape at ``pos`` (``\\t``, ``\\x41``, ``\\u00e9``, ...), 0 if none."""
    if pos + 1 >= len(pattern) or pattern[pos] != "\\":
        return 0
    kind = pattern[pos + 1]
    if kind in 'trn\\"[]-':
        return 2
    n_hex = {"x": 2, "u": 4, "U": 8}.get(kind, 0)
    if n_hex == 0 or pos + 2 + n_hex > len(pattern):
        return 0
    if not all(h in _HEX for h in pattern[pos + 2:pos + 2 + n_hex]):
        return 0
    return 2 + n_hex


def _stoi(text: str) -> int:
    """``std::stoi`` (base 10): blanks, a sign, digits, anything after ignored; ValueError where it throws."""
    s = text.lstrip(" \t\n\v\f\r")
    sign = 1
    if s[:1] in ("+", "-") and s:
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    n = 0
    while n < len(s) and "0" <= s[n] <= "9":
        n += 1
    if n == 0:
        raise ValueError(text)
    value = sign * int(s[:n])
    if not -(2**31) <= value <= INT_MAX:
        raise ValueError(text)
    return value


def _text(raw: str) -> str:
    """A latin-1 held byte string back to text, stray bytes as lone surrogates."""
    return raw.encode("latin-1").decode("utf-8", "surrogateescape")


Piece = tuple[str, bool]  # (text, is_literal)


def _to_rule(piece: Piece) -> str:
    return '"' + piece[0] + '"' if piece[1] else piece[0]


class _Walker:
    def __init__(self, pattern: str, name: str, add_rule: Callable[[str, str], str], dotall: bool) -> None:
        self.sub = pattern
        self.name = name
        self.add_rule = add_rule
        self.dotall = dotall
        self.i = 0
        self.depth = 0
        self.sub_rule_ids: dict[str, str] = {}

    def dot(self) -> str:
        return self.add_rule("dot", "[\\U00000000-\\U0010FFFF]" if self.dotall else "[^\\x0A\\x0D]")

    @staticmethod
    def join(seq: list[Piece]) -> Piece:
        """Joins the sequence, merging consecutive literals together."""
        out: list[str] = []
        literal = ""
        for text, is_literal in seq:
            if is_literal:
                literal += text
            else:
                if literal:
                    out.append('"' + literal + '"')
                    literal = ""
                out.append(text)
        if literal:
            out.append('"' + literal + '"')
        return " ".join(out), False

    def transform(self) -> Piece:
        seq: list[Piece] = []
        sub, length = self.sub, len(self.sub)
        while self.i < length:
            c = sub[self.i]
            if c == ".":
                seq.append((self.dot(), False))
                self.i += 1
            elif c == "(":
                self.i += 1
                if self.i < length and sub[self.i] == "?":
                    if self.i + 1 < length and sub[self.i + 1] == ":":
                        self.i += 2  # a non-capturing group is a plain group
                    else:
                        raise UnsupportedPattern("unsupported group syntax")
                self.depth += 1
                if self.depth > MAX_PATTERN_DEPTH:
                    raise UnsupportedPattern("pattern nesting too deep")
                seq.append(("(" + _to_rule(self.transform()) + ")", False))
            elif c == ")":
                self.i += 1
                if self.depth == 0:
                    raise InvalidPattern("unbalanced parentheses")
                self.depth -= 1
                return self.join(seq)
            elif c in "^$":
                raise UnsupportedPattern("anchor inside the pattern")
            elif c == "[":
                seq.append((self.char_class(), False))
            elif c == "|":
                seq.append(("|", False))
                self.i += 1
            elif c in "*+?":
                if not seq:
                    raise InvalidPattern("nothing to repeat")
                seq[-1] = (_to_rule(seq[-1]) + c, False)
                self.i += 1
            elif c == "{":
                self.curly(seq)
            else:
                seq.append((self.literal(c), True))
        return self.join(seq)

    def char_class(self) -> str:
        sub, length = self.sub, len(self.sub)
        out = "["
        self.i += 1
        while self.i < length and sub[self.i] != "]":
            if sub[self.i] == "\\":
                n = gbnf_escape_length(sub, self.i)
                if n == 0:
                    raise UnsupportedPattern("unsupported escape in character class: " + _text(sub[self.i:self.i + 2]))
                out += sub[self.i:self.i + n]
                self.i += n
            else:
                out += sub[self.i]
                self.i += 1
        if self.i >= length:
            raise InvalidPattern("unterminated character class")
        self.i += 1
        return out + "]"

    def curly(self, seq: list[Piece]) -> None:
        sub, length = self.sub, len(self.sub)
        start = self.i + 1
        self.i += 1
        while self.i < length and sub[self.i] != "}":
            self.i += 1
        if self.i >= length:
            raise UnsupportedPattern("unterminated curly brackets")
        nums = sub[start:self.i].split(",")
        self.i += 1
        min_times, max_times = 0, INT_MAX
        if len(nums) not in (1, 2):
            raise UnsupportedPattern("wrong number of values in curly brackets")
        try:
            if len(nums) == 1:
                min_times = max_times = _stoi(nums[0])
            else:
                if nums[0]:
                    min_times = _stoi(nums[0])
                if nums[1]:
                    max_times = _stoi(nums[1])
        except ValueError:
            raise UnsupportedPattern("invalid number in curly brackets") from None
        if not seq:
            raise InvalidPattern("nothing to repeat")
        text, is_literal = seq[-1]
        if not is_literal:
            if text not in self.sub_rule_ids:
                self.sub_rule_ids[text] = ""
                self.sub_rule_ids[text] = self.add_rule(f"{self.name}-{len(self.sub_rule_ids)}", _text(text))
            text = self.sub_rule_ids[text]
        seq[-1] = (build_repetition('"' + text + '"' if is_literal else text, min_times, max_times, ""), False)

    def literal(self, c: str) -> str:
        sub, length = self.sub, len(self.sub)
        literal = ""
        while self.i < length:
            ch = sub[self.i]
            if ch == "\\":
                if self.i == length - 1:
                    raise InvalidPattern("trailing backslash")
                nxt = sub[self.i + 1]
                if nxt in ESCAPED_IN_REGEXPS_BUT_NOT_IN_LITERALS:
                    literal += nxt
                    self.i += 2
                else:
                    n = gbnf_escape_length(sub, self.i)
                    if n == 0:
                        raise UnsupportedPattern("unsupported escape: " + _text(sub[self.i:self.i + 2]))
                    literal += sub[self.i:self.i + n]
                    self.i += n
            elif ch == '"':
                literal += '\\"'
                self.i += 1
            elif ch not in NON_LITERAL_SET and (
                    self.i == length - 1 or not literal or sub[self.i + 1] == "."
                    or sub[self.i + 1] not in NON_LITERAL_SET):
                literal += ch
                self.i += 1
            else:
                break
        if not literal:  # nothing was consumed, e.g. a stray ']' or '}'
            raise UnsupportedPattern("unsupported character: " + _text(c))
        return literal


def pattern_to_rule(pattern: str, name: str, add_rule: Callable[[str, str], str], dotall: bool = False) -> str:
    """The rule for a JSON string matching ``pattern`` (see the module docstring)."""
    raw = pattern.encode("utf-8", "surrogatepass").decode("latin-1")
    if len(raw) < 2 or raw[0] != "^" or raw[-1] != "$":
        raise UnsupportedPattern("not anchored with '^' and '$'")
    walker = _Walker(raw[1:-1], name, add_rule, dotall)
    rule = _to_rule(walker.transform())
    if walker.depth != 0:
        raise InvalidPattern("unbalanced parentheses")
    return add_rule(name, '"\\"" (' + _text(rule) + ') "\\""')
