"""Calls inside the template's own envelopes (``<tool_call>...</tool_call>``) written malformed.

    repair_envelopes(text, spans, form, reader) -> (text, rules)
        before the final parse: each envelope whose body is not the JSON the parser reads but
        holds valid calls (single quotes, trailing commas, arguments as a string, other key names,
        a variant of a tool's name, Python syntax, several calls, no closing tag) is rewritten in
        the parser's own form, so the parse reads those calls as it reads well-formed ones (as
        deviation 3 does for double braces)
    read_envelopes(text, start, spans, reader) -> (calls, content, rules)
        after a final parse that failed anyway: every envelope that holds valid calls gives them;
        every other envelope, and any text between or after them, stays content in order

Enters: the output text, its envelopes (``spans``: the ``deviations.layouts.envelopes`` of its
tool-call region, Hermes layout: a JSON body), the envelope's form as the parser reads it (``form``:
its opening and closing text), the request's ``CallReader``. Leaves: text, calls, rule names.
Raises nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Protocol

from ..messages import ToolCall
from .reader import CallReader
from .rules import MISSING_CLOSE, STRAY_TEXT

__all__ = ["read_envelopes", "repair_envelopes"]

_SPACE = " \t\n\r\f\v"


class Span(Protocol):
    """One envelope of the output (``deviations.layouts.Envelope``)."""

    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def body(self) -> str: ...
    @property
    def closed(self) -> bool: ...


def _well_formed(body: str, names: tuple[str, ...]) -> bool:
    """The body is what the parser reads itself: a JSON object of a tool's name and an arguments object."""
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and set(obj) == {"name", "arguments"} and obj["name"] in names \
        and isinstance(obj["arguments"], dict)


def _envelope(form: tuple[str, str], call: ToolCall) -> str:
    obj = {"name": call.name, "arguments": json.loads(call.arguments)}
    return form[0] + json.dumps(obj, ensure_ascii=False) + "\n" + form[1]


def repair_envelopes(text: str, spans: Iterable[Span], form: tuple[str, str],
                     reader: CallReader) -> tuple[str, list[str]]:
    """(text to parse, rules used); the text unchanged when no envelope needed a repair. ``form``:
    the envelope's opening and closing as the parser reads them (``"<tool_call>\\n"``, ``"</tool_call>"``)."""
    out: list[str] = []
    rules: list[str] = []
    pos = 0
    for env in spans:
        if _well_formed(env.body, reader.names):
            continue
        read = reader.read(env.body)
        if read is None:
            continue
        out.append(text[pos:env.start])
        out.extend(_envelope(form, call) for call in read.calls)
        pos = env.end
        for rule in (*sorted(read.rules), *(() if env.closed else (MISSING_CLOSE,))):
            if rule not in rules:
                rules.append(rule)
    if not out:
        return text, []
    out.append(text[pos:])
    return "".join(out), rules


def read_envelopes(text: str, start: int, spans: Iterable[Span],
                   reader: CallReader) -> tuple[list[ToolCall], str, list[str]]:
    """(valid calls, what stays content, rules used) of ``text[start:]`` (whose envelopes are
    ``spans``), envelope by envelope."""
    calls: list[ToolCall] = []
    content: list[str] = []
    rules: list[str] = []
    stray = False
    pos = start
    after_call = False   # whitespace around a valid call belongs to it
    for env in spans:
        gap = text[pos:env.start]
        if after_call:
            gap = gap.lstrip(_SPACE)
        read = reader.read(env.body)
        if read is None:
            content.append(gap + text[env.start:env.end])
        else:
            if gap.strip(_SPACE):
                content.append(gap)
                stray = True
            calls.extend(read.calls)
            for rule in (*sorted(read.rules), *(() if env.closed else (MISSING_CLOSE,))):
                if rule not in rules:
                    rules.append(rule)
        after_call = read is not None
        pos = env.end
    tail = text[pos:].lstrip(_SPACE) if after_call else text[pos:]
    if tail.strip(_SPACE):
        content.append(tail)
        stray = True
    if stray and calls:
        rules.append(STRAY_TEXT)
    return calls, "".join(content), rules
