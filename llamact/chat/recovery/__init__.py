"""The final parse's fallback: never an error for what a model wrote (docs/design.md, deviation 17).

    recovery = Recovery(tools, tool_choice="auto")      # one per reply, in the default stream
    recovery.view(content)          # streaming: content less the calls found, held where one may start
    recovery.repair(text, spans, form)  # before the final parse: malformed envelopes rewritten
    recovery.read_envelopes(...)    # after a final parse that failed: envelope by envelope
    recovery.take_calls(message)    # after it: calls written outside the envelope taken out of content
    recovery.report()               # RecoveryReport(parse_error, recovered) or None

A tool-calling model often writes its calls otherwise than its template's parser reads them: as a
fenced JSON block, bare JSON, Python syntax, JSON with single quotes or trailing commas, the
arguments as a string, other key names, an envelope never closed. Upstream leaves such a call in
the content or ends the request with a parse error. Here each such call is read leniently and kept
only when it validates against its tool's JSON schema (``reader``); everything else stays content,
in order; a final parse that fails still gives a reply (what could be read, the rest as content)
with the parse error reported beside it. The rules are named (``rules``); a reply lists those its
calls needed. ``upstream_compat=True`` switches all of it off, as deviations 2-5.

Enters: the request's tools and tool choice, then the reply's content and text. Leaves: content,
``ToolCall`` values, a ``RecoveryReport``. Raises nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import ChatMessage, ToolCall
from ..oai import ChatTool
from . import rules
from .envelopes import Span, read_envelopes, repair_envelopes
from .reader import CallReader
from .scan import ContentScan

__all__ = ["CallReader", "ContentScan", "Recovery", "RecoveryReport", "rules"]


@dataclass(frozen=True)
class RecoveryReport:
    """What a reply's ``llamact`` extension field says: the final parse's error (None: it parsed)
    and the rules that recovered its calls, in the order first used."""

    parse_error: str | None = None
    recovered: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"parse_error": self.parse_error, "recovered": list(self.recovered)}


class Recovery:
    """One reply's recovery. ``tools`` validate the calls; ``tool_choice`` "none" reads no calls,
    "required" (or ``named_tool``, which also keeps only that tool) reads call objects inside text
    too; ``start``: the content before it is the client's (a continued message) and is left alone."""

    def __init__(self, tools: Sequence[ChatTool], tool_choice: str = "auto", named_tool: str | None = None,
                 start: int = 0) -> None:
        if named_tool is not None:
            tools = [t for t in tools if t.name == named_tool]
        self.reader: CallReader | None = CallReader(tools) if tools and tool_choice != "none" else None
        self._scan = ContentScan(self.reader, inline=tool_choice == "required" or named_tool is not None,
                                 start=start) if self.reader is not None else None
        self.parse_error: str | None = None
        self._rules: list[str] = []

    def note(self, used: Iterable[str]) -> None:
        for rule in used:
            if rule not in self._rules:
                self._rules.append(rule)

    def report(self) -> RecoveryReport | None:
        if self.parse_error is None and not self._rules:
            return None
        return RecoveryReport(self.parse_error, tuple(self._rules))

    def view(self, content: str) -> str:
        return content if self._scan is None else self._scan.view(content)

    def repair(self, text: str, spans: Iterable[Span], form: tuple[str, str]) -> str:
        """``text`` with its malformed envelopes rewritten in the parser's ``form`` (see ``envelopes``)."""
        if self.reader is None:
            return text
        fixed, used = repair_envelopes(text, spans, form, self.reader)
        self.note(used)
        return fixed

    def read_envelopes(self, text: str, start: int, spans: Iterable[Span]) -> tuple[list[ToolCall], str]:
        """(calls, content) of the region ``text[start:]``: every envelope read on its own."""
        if self.reader is None:
            return [], text[start:]
        calls, content, used = read_envelopes(text, start, spans, self.reader)
        self.note(used)
        return calls, content

    def take_calls(self, message: ChatMessage) -> ChatMessage:
        """``message`` with the calls its content holds outside the envelope moved to its calls
        (before those it has: content comes first in every layout)."""
        if self._scan is None or not message.content:
            return message
        content, calls, used = self._scan.finish(message.content)
        if calls:
            message.content = content
            message.tool_calls = [*calls, *message.tool_calls]
            self.note(used)
        return message
