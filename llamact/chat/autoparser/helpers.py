"""The analysis' string helpers (upstream's chat-auto-parser-helpers.cpp, the parts on plain strings).

    trim_whitespace / trim_leading_whitespace / trim_trailing_whitespace / trim_trailing_newlines
    until_common_prefix(full, left, right) -> str
    after_common_suffix(full, left, right) -> str

Whitespace is C's ``isspace`` in the "C" locale (space, ``\\t \\n \\v \\f \\r``), never Python's
wider ``str.isspace``: a marker followed by U+00A0 keeps it, as upstream keeps it.
"""

from __future__ import annotations

__all__ = [
    "C_SPACE", "after_common_suffix", "common_prefix_len", "common_suffix_len", "trim_leading_whitespace",
    "trim_trailing_newlines", "trim_trailing_whitespace", "trim_whitespace", "until_common_prefix",
]

#: the characters C's isspace() accepts in the "C" locale
C_SPACE = " \t\n\v\f\r"


def trim_whitespace(text: str) -> str:
    return text.strip(C_SPACE)


def trim_leading_whitespace(text: str) -> str:
    return text.lstrip(C_SPACE)


def trim_trailing_whitespace(text: str) -> str:
    return text.rstrip(C_SPACE)


def trim_trailing_newlines(text: str) -> str:
    return text.rstrip("\n")


def common_prefix_len(left: str, right: str) -> int:
    n = min(len(left), len(right))
    i = 0
    while i < n and left[i] == right[i]:
        i += 1
    return i


def common_suffix_len(left: str, right: str) -> int:
    n = min(len(left), len(right))
    i = 0
    while i < n and left[-1 - i] == right[-1 - i]:
        i += 1
    return i


def until_common_prefix(full: str, left: str, right: str) -> str:
    """What ``full`` holds before the first occurrence of the common prefix of ``left`` and ``right``;
    "" when they share no prefix or ``full`` does not contain it.

    ``until_common_prefix("<function name=foo><arg name=bar>", "<arg name=bar>", "<arg name=baz>")``
    is ``"<function name=foo>"``."""
    n = common_prefix_len(left, right)
    if n == 0:
        return ""
    pos = full.find(left[:n])
    return "" if pos < 0 else full[:pos]


def after_common_suffix(full: str, left: str, right: str) -> str:
    """What ``full`` holds after the last occurrence of the common suffix of ``left`` and ``right``
    (the mirror of :func:`until_common_prefix`)."""
    n = common_suffix_len(left, right)
    if n == 0:
        return ""
    pos = full.rfind(left[len(left) - n:])
    return "" if pos < 0 else full[pos + n:]
