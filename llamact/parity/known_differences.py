"""Differences between llamact and upstream that are known, reported, and not yet fixed.

The scoreboard counts them as different, as it must. This module only names them, so that the
fuzzer can count them apart from new findings (and save one example of each, not thousands), and
the scoreboard's tests can insist that every difference is one of these. Each entry says where
the fix belongs. Remove an entry when its fix lands: the tests then hold the fix.

What enters :func:`known_difference`: the component, upstream's expected answer and llamact's
answer as the scoreboard records it (``{"raised": {"exception", "message"}}`` for an error). What
leaves: the label of the known difference, or None for anything else.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["KNOWN_DIFFERENCES", "known_difference"]

Json = Any

#: label -> where the fix belongs and what it is
KNOWN_DIFFERENCES = {
    "jinja-error-location": (
        "llamact/jinja: upstream's template runtime errors carry a location preamble "
        "('\\n------------\\nWhile executing <Node> at line L, column C in source:\\n<excerpt>\\n<caret>\\n"
        "Error: <message>'); llamact's message is <message> alone"),
    "jinja-error-hint": (
        "llamact/jinja: upstream's name for an undefined value's type carries the name that was looked up "
        "(\"Undefined (hint: '<name>')\", e.g. in 'Callee is not a function: got Undefined (hint: ...)'); "
        "llamact's says 'Undefined'"),
    "jinja-syntax-error-text": (
        "llamact/jinja: a template that does not compile fails on both sides, but llamact's message is "
        "jinja2's ('tag name expected', 'unexpected character in number: 1e3') where upstream's lexer and "
        "parser say their own ('Unknown statement', 'parser: Parser Error: Expected }} (Got e3)...')"),
}

_HINT = re.compile(r"(?<=Undefined) \(hint: '[^']*'\)")
_PREAMBLE = re.compile(r"\n------------\nWhile executing .*?\nError: ", re.S)
_TEMPLATE_COMPONENTS = ("jinja", "template_jinja", "caps", "template_render", "chat_apply")


def known_difference(component: str, expected: Json, got: Json) -> str | None:
    if component not in _TEMPLATE_COMPONENTS:
        return None
    if not (isinstance(expected, dict) and isinstance(expected.get("error"), dict)):
        return None
    if not (isinstance(got, dict) and isinstance(got.get("raised"), dict)):
        return None
    message, text = str(expected["error"].get("message", "")), str(got["raised"].get("message", ""))
    if got["raised"].get("exception") == "JinjaSyntaxError" and expected["error"].get("kind") == "runtime_error" \
            and "\nWhile executing " not in message:
        return "jinja-syntax-error-text"
    # the preamble may also sit inside a message that wraps the template's error ("Unable to
    # generate parser for this template. Automatic parser generation failed: <preamble>Error: ...")
    inner = _PREAMBLE.sub("", message)
    if text == inner and inner != message:
        return "jinja-error-location"
    if text == _HINT.sub("", inner) and text != inner:
        return "jinja-error-hint"
    return None
