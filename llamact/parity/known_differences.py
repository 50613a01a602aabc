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

from typing import Any

__all__ = ["KNOWN_DIFFERENCES", "known_difference"]

Json = Any

#: label -> where the fix belongs and what it is
KNOWN_DIFFERENCES = {
    "jinja-syntax-error-text": (
        "llamact/jinja: a template that does not compile fails on both sides, but llamact's message is "
        "jinja2's ('tag name expected', 'unexpected character in number: 1e3') where upstream's lexer and "
        "parser say their own ('Unknown statement', 'parser: Parser Error: Expected }} (Got e3)...')"),
}

_TEMPLATE_COMPONENTS = ("jinja", "template_jinja", "caps", "template_render", "chat_apply")


def known_difference(component: str, expected: Json, got: Json) -> str | None:
    if component not in _TEMPLATE_COMPONENTS:
        return None
    if not (isinstance(expected, dict) and isinstance(expected.get("error"), dict)):
        return None
    if not (isinstance(got, dict) and isinstance(got.get("raised"), dict)):
        return None
    message = str(expected["error"].get("message", ""))
    if got["raised"].get("exception") == "JinjaSyntaxError" and expected["error"].get("kind") == "runtime_error" \
            and "\nWhile executing " not in message:
        return "jinja-syntax-error-text"
    return None
