"""GBNF for repetitions and for integer ranges, as upstream's converter writes them.

* :func:`build_repetition` -- what enters: an item rule, ``min_items``, ``max_items``
  (:data:`INT_MAX` for unbounded) and an optional separator rule. What leaves: the GBNF body
  (``x?``, ``x*``, ``x+``, ``x{m,n}``, or the separated form ``x ("," x){m-1,n-1}``).
* :func:`build_min_max_int` -- what enters: inclusive int64 bounds, ``INT64_MIN`` / ``INT64_MAX``
  meaning unbounded (at least one must be set). What leaves: the GBNF alternatives, digit by digit,
  that match exactly the decimal integers in the range (at most 16 digits where unbounded above).
  Raises ``ValueError`` when both bounds are unset (upstream's ``runtime_error``, unreachable from
  the converter).
"""

from __future__ import annotations

from .json_value import to_int64

__all__ = ["INT64_MAX", "INT64_MIN", "INT_MAX", "build_min_max_int", "build_repetition"]

INT_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def build_repetition(item_rule: str, min_items: int, max_items: int, separator_rule: str = "") -> str:
    has_max = max_items != INT_MAX
    if max_items == 0:
        return ""
    if min_items == 0 and max_items == 1:
        return item_rule + "?"
    if not separator_rule:
        if min_items == 1 and not has_max:
            return item_rule + "+"
        if min_items == 0 and not has_max:
            return item_rule + "*"
        return item_rule + "{" + str(min_items) + "," + (str(max_items) if has_max else "") + "}"
    result = item_rule + " " + build_repetition(
        "(" + separator_rule + " " + item_rule + ")",
        0 if min_items == 0 else min_items - 1,
        max_items - 1 if has_max else max_items,
    )
    if min_items == 0:
        result = "(" + result + ")?"
    return result


def build_min_max_int(min_value: int, max_value: int) -> str:
    out: list[str] = []
    _min_max_int(min_value, max_value, out, 16, True)
    return "".join(out)


def _digit_range(out: list[str], lo: str, hi: str) -> None:
    out.append("[" + lo + "]" if lo == hi else "[" + lo + "-" + hi + "]")


def _more_digits(out: list[str], min_digits: int, max_digits: int) -> None:
    out.append("[0-9]")
    if min_digits == max_digits == 1:
        return
    out.append("{" + str(min_digits))
    if max_digits != min_digits:
        out.append(",")
        if max_digits != INT_MAX:
            out.append(str(max_digits))
    out.append("}")


def _chr_add(c: str, delta: int) -> str:
    return chr(ord(c) + delta)


def _uniform_range(out: list[str], lo: str, hi: str) -> None:
    i = 0
    while i < len(lo) and i < len(hi) and lo[i] == hi[i]:
        i += 1
    if i > 0:
        out.append('"' + lo[:i] + '"')
    if i < len(lo) and i < len(hi):
        if i > 0:
            out.append(" ")
        sub_len = len(lo) - i - 1
        if sub_len > 0:
            lo_sub, hi_sub = lo[i + 1:], hi[i + 1:]
            zeros, nines = "0" * sub_len, "9" * sub_len
            to_reached = False
            out.append("(")
            if lo_sub == zeros:
                _digit_range(out, lo[i], _chr_add(hi[i], -1))
                out.append(" ")
                _more_digits(out, sub_len, sub_len)
            else:
                out.append("[" + lo[i] + "] (")
                _uniform_range(out, lo_sub, nines)
                out.append(")")
                if ord(lo[i]) < ord(hi[i]) - 1:
                    out.append(" | ")
                    if hi_sub == nines:
                        _digit_range(out, _chr_add(lo[i], 1), hi[i])
                        to_reached = True
                    else:
                        _digit_range(out, _chr_add(lo[i], 1), _chr_add(hi[i], -1))
                    out.append(" ")
                    _more_digits(out, sub_len, sub_len)
            if not to_reached:
                out.append(" | ")
                _digit_range(out, hi[i], hi[i])
                out.append(" ")
                _uniform_range(out, zeros, hi_sub)
            out.append(")")
        else:
            out.append("[" + lo[i] + "-" + hi[i] + "]")


def _min_max_int(min_value: int, max_value: int, out: list[str], decimals_left: int, top_level: bool) -> None:
    has_min = min_value != INT64_MIN
    has_max = max_value != INT64_MAX

    if has_min and has_max:
        if min_value < 0 and max_value < 0:
            out.append('"-" (')
            _min_max_int(to_int64(-max_value), to_int64(-min_value), out, decimals_left, True)
            out.append(")")
            return
        if min_value < 0:
            out.append('"-" (')
            _min_max_int(0, to_int64(-min_value), out, decimals_left, True)
            out.append(") | ")
            min_value = 0
        min_s, max_s = str(min_value), str(max_value)
        for digits in range(len(min_s), len(max_s)):
            _uniform_range(out, min_s, "9" * digits)
            min_s = "1" + "0" * digits
            out.append(" | ")
        _uniform_range(out, min_s, max_s)
        return

    less_decimals = max(decimals_left - 1, 1)

    if has_min:
        if min_value < 0:
            out.append('"-" (')
            _min_max_int(INT64_MIN, to_int64(-min_value), out, decimals_left, False)
            out.append(") | [0] | [1-9] ")
            _more_digits(out, 0, decimals_left - 1)
        elif min_value == 0:
            if top_level:
                out.append("[0] | [1-9] ")
                _more_digits(out, 0, less_decimals)
            else:
                _more_digits(out, 1, decimals_left)
        elif min_value <= 9:
            c = str(min_value)
            range_start = "1" if top_level else "0"
            if c > range_start:
                _digit_range(out, range_start, _chr_add(c, -1))
                out.append(" ")
                _more_digits(out, 1, less_decimals)
                out.append(" | ")
            _digit_range(out, c, "9")
            out.append(" ")
            _more_digits(out, 0, less_decimals)
        else:
            min_s = str(min_value)
            length = len(min_s)
            c = min_s[0]
            if c > "1":
                _digit_range(out, "1" if top_level else "0", _chr_add(c, -1))
                out.append(" ")
                _more_digits(out, length, less_decimals)
                out.append(" | ")
            _digit_range(out, c, c)
            out.append(" (")
            _min_max_int(int(min_s[1:]), INT64_MAX, out, less_decimals, False)
            out.append(")")
            if c < "9":
                out.append(" | ")
                _digit_range(out, _chr_add(c, 1), "9")
                out.append(" ")
                _more_digits(out, length - 1, less_decimals)
        return

    if has_max:
        if max_value >= 0:
            if top_level:
                out.append('"-" [1-9] ')
                _more_digits(out, 0, less_decimals)
                out.append(" | ")
            _min_max_int(0, max_value, out, decimals_left, True)
        else:
            out.append('"-" (')
            _min_max_int(to_int64(-max_value), INT64_MAX, out, decimals_left, False)
            out.append(")")
        return

    raise ValueError("At least one of min_value or max_value must be set")
