"""Deviation 3: Hermes / Qwen 2.5 tool calls written with doubled braces.

Without a tool-call grammar, Qwen 2.5 can copy the double braces its template prints in the tool
prompt: ``<tool_call>{{"name": "f", "arguments": {...}}}</tool_call>``, sometimes with fewer or
more closing braces. Upstream's parse fails on it (a parse error, no tool call). Here such an
envelope is rewritten to the single-brace form before the parse, so the call comes out exactly
as upstream parses a well-formed one:

* the body is whitespace, one or more ``{`` (whitespace between them too), a JSON object holding
  ``"name"`` that starts at the last of those braces, then only ``}`` and whitespace: the envelope
  becomes the parser's own form (``<tool_call>\n{...}\n</tool_call>``) and leaves no content (as
  the single-brace form);
* otherwise (other text after the object) the envelope's text stays in content, in its place: the
  parse sees a placeholder there (a private-use character the output does not hold), which
  :meth:`Repair.content` puts the envelope back for. Upstream's parse has no content after a call,
  so an envelope that comes after one is taken out of the text instead, and its text follows the
  parsed content (content still keeps its order: calls are not content).

An envelope with single braces and no extra closing brace is left alone: upstream's parse decides.

Enters: the output text, where its tool-call region starts, the layout. Leaves: a :class:`Repair`,
the text to parse and how the parsed content gets the envelopes that stay content. Raises nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .layouts import ToolCallLayout, envelopes
from .reasoning import WHITESPACE

__all__ = ["Repair", "repair_double_braces"]

_LEADING_BRACES = re.compile(r"[ \t\n\v\f\r]*((?:\{[ \t\n\v\f\r]*)*\{)")
_DECODER = json.JSONDecoder()


def _inner_object(body: str) -> tuple[int, int, int] | None:
    """(number of leading braces, start, end) of the call object in ``body``, or None."""
    m = _LEADING_BRACES.match(body)
    if m is None:
        return None
    start = m.end() - 1  # the last brace opens the call object
    try:
        obj, end = _DECODER.raw_decode(body, start)
    except ValueError:
        return None
    if not isinstance(obj, dict) or "name" not in obj:
        return None
    return m.group(1).count("{"), start, end


@dataclass(frozen=True)
class Repair:
    """The text to parse (``text``), and the envelopes that stay content: ``in_place`` where the text
    holds ``placeholder`` (one each, in order), ``after`` to follow the parsed content."""

    text: str
    placeholder: str = ""
    in_place: tuple[str, ...] = ()
    after: str = ""

    def content(self, parsed: str) -> str:
        """The final content from the parse's: each placeholder replaced by its envelope, then the
        envelopes taken out. A parse that did not keep every placeholder once gets them all after."""
        if self.in_place:
            pieces = parsed.split(self.placeholder)
            if len(pieces) == len(self.in_place) + 1:
                out = [pieces[0]]
                for envelope, piece in zip(self.in_place, pieces[1:], strict=True):
                    out += [envelope, piece]
                return "".join(out) + self.after
            return "".join(pieces) + "".join(self.in_place) + self.after
        return parsed + self.after


def _placeholder(text: str) -> str:
    """A private-use character ``text`` does not hold (a model's output practically never does)."""
    return next((c for c in map(chr, range(0xE000, 0xF900)) if c not in text), "\U000F0000")


def repair_double_braces(text: str, start: int, layout: ToolCallLayout) -> Repair:
    """The repair of ``text`` whose tool-call region starts at ``start`` (see the module docstring)."""
    out: list[str] = []
    in_place: list[str] = []
    after: list[str] = []
    placeholder = ""
    pos = 0
    calls = False   # an envelope left to the parse, or rewritten, came before: no content after it
    for env in envelopes(text, start, layout):
        if not env.closed:
            break
        inner = _inner_object(env.body)
        if inner is None:
            calls = True
            continue
        braces, obj_start, obj_end = inner
        rest = env.body[obj_end:]
        if braces == 1 and "}" not in rest:
            calls = True
            continue  # single braces: upstream's parse decides
        out.append(text[pos:env.start])
        if rest.strip(WHITESPACE + "}"):
            # something else follows the call: the envelope is content, in its place while no call came
            if calls:
                after.append(text[env.start:env.end])
            else:
                placeholder = placeholder or _placeholder(text)
                out.append(placeholder)
                in_place.append(text[env.start:env.end])
        else:
            # the envelope in the form the parser expects, whatever whitespace the model put
            out.append(layout.open_literal + env.body[obj_start:obj_end] + "\n" + layout.close)
            calls = True
        pos = env.end
    if not out:
        return Repair(text)
    out.append(text[pos:])
    return Repair("".join(out), placeholder, tuple(in_place), "".join(after))
