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
* otherwise (other text after the object) the envelope is taken out of the text before the parse
  and its text stays in content, after the parsed content.

An envelope with single braces and no extra closing brace is left alone: upstream's parse decides.

Enters: the output text, where its tool-call region starts, the layout. Leaves: the text to
parse and the text that stays content. Raises nothing.
"""

from __future__ import annotations

import json
import re

from .layouts import ToolCallLayout, envelopes
from .reasoning import WHITESPACE

__all__ = ["repair_double_braces"]

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


def repair_double_braces(text: str, start: int, layout: ToolCallLayout) -> tuple[str, str]:
    """(text to parse, text that stays content) for ``text`` whose tool-call region starts at ``start``."""
    out: list[str] = []
    stranded: list[str] = []
    pos = 0
    for env in envelopes(text, start, layout):
        if not env.closed:
            break
        inner = _inner_object(env.body)
        if inner is None:
            continue
        braces, obj_start, obj_end = inner
        rest = env.body[obj_end:]
        if braces == 1 and "}" not in rest:
            continue  # single braces: upstream's parse decides
        if rest.strip(WHITESPACE + "}"):
            out.append(text[pos:env.start])  # something else follows the call: the envelope is content
            stranded.append(text[env.start:env.end])
        else:
            # the envelope in the form the parser expects, whatever whitespace the model put
            out.append(text[pos:env.start])
            out.append(layout.open_literal + env.body[obj_start:obj_end] + "\n" + layout.close)
        pos = env.end
    if not out:
        return text, ""
    out.append(text[pos:])
    return "".join(out), "".join(stranded)
