"""Differences between llamact and upstream that are known, reported, and not yet fixed.

The scoreboard counts them as different, as it must. This module only names them, so that the
fuzzer can count them apart from new findings (and save one example of each, not thousands), and
the scoreboard's tests can insist that every difference is one of these. Each entry says where
the fix belongs. Remove an entry when its fix lands: the tests then hold the fix.

None is open now. The last ones -- Jinja runtime errors without upstream's location preamble
(``jinja-error-location``), undefined values named without upstream's hint (``jinja-error-hint``)
and jinja2's syntax error texts (``jinja-syntax-error-text``) -- were fixed in llamact/jinja
(locations.py, values.type_name, syntax.py); tests/jinja/test_error_texts.py holds them.

What enters :func:`known_difference`: the component, upstream's expected answer and llamact's
answer as the scoreboard records it (``{"raised": {"exception", "message"}}`` for an error). What
leaves: the label of the known difference, or None for anything else.
"""

from __future__ import annotations

from ..json_types import Json

__all__ = ["KNOWN_DIFFERENCES", "known_difference"]

#: label -> where the fix belongs and what it is
KNOWN_DIFFERENCES: dict[str, str] = {}


def known_difference(component: str, expected: Json, got: Json) -> str | None:
    """The label of the known difference ``got`` is (None: it is none of them)."""
    return None
