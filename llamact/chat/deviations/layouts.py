"""Which tool-call layout a template's output uses, and where in an output its tool calls start.

The layout is read from the apply result itself (the literals of its parser, its grammar triggers),
not from the family name, so that it holds for every template that produces the layout: the
specialized Qwen3-Coder builder and the autoparser alike.

* ``xml`` -- Qwen XML: ``<tool_call>\\n<function=NAME>\\n<parameter=ARG>\\nVALUE\\n</parameter>\\n
  </function>\\n</tool_call>`` (Qwen3-Coder, Qwen3.5, Nemotron 3 Nano, StepFun 3.5), also with
  another envelope and values without newlines (Seed-OSS: ``<seed:tool_call>``,
  ``<parameter=ARG>VALUE</parameter>``);
* ``hermes`` -- ``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`` (Hermes, Qwen 2.5,
  Qwen 3, QwQ, Granite 4, ...).

Enters: a :class:`ChatTemplateResult`, then output texts. Leaves: a :class:`ToolCallLayout` (or
None), the offset where an output's tool-call region starts (:meth:`ToolCallLayout.region_start`),
and the envelopes in a region (:func:`envelopes`). Raises nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ...peg.nodes import Ac, Literal, Until
from ..result import ChatTemplateResult
from .reasoning import WHITESPACE

__all__ = ["HERMES", "XML", "Envelope", "ToolCallLayout", "detect_layout", "envelopes", "hold_markers"]

XML = "xml"
HERMES = "hermes"


@dataclass(frozen=True)
class ToolCallLayout:
    """A tool-call layout: ``kind`` (:data:`XML` or :data:`HERMES`), the envelope's ``open`` and
    ``close`` tags, the texts that start the tool-call region (``openings``: the grammar's trigger
    words), the thinking tags (to skip a thought), whether a parameter value sits between newlines
    (``value_newlines``, Qwen) and whether this is the Qwen3-Coder XML family (``qwen3_coder``).
    ``open_literal`` is the opening as the parser expects it (e.g. ``"<tool_call>\n"``)."""

    kind: str
    open: str
    close: str
    openings: tuple[str, ...]
    open_literal: str
    thinking_start: str = ""
    thinking_ends: tuple[str, ...] = ()
    forced_thought: bool = False
    value_newlines: bool = False
    qwen3_coder: bool = False

    def content_cut(self, content: str) -> int:
        """Where a content text reaches the first opening (its length if it does not): the stream
        holds content from there on until generation ends, since only the final parse can tell a
        call (or an envelope that stays content) from text that merely looks like one."""
        cut = len(content)
        for opening in self.openings:
            at = content.find(opening, 0, cut)
            if at >= 0:
                cut = at
        return cut

    def region_start(self, text: str) -> int | None:
        """Where the tool calls of ``text`` start: the first opening after the thought (if any), or
        None. A thought is open from the start when the generation prompt opened it, else when the
        text starts with the start tag; it ends at the first end tag (an end tag that is itself an
        opening, like Qwen 3.5's ``<tool_call>``, starts the region right there)."""
        begin = self.thought_end(text)
        if begin is None:
            return None
        best: int | None = None
        for opening in self.openings:
            at = text.find(opening, begin)
            if at >= 0 and (best is None or at < best):
                best = at
        return best

    def thought_end(self, text: str) -> int | None:
        """Where the text after the thought starts (0 without a thought; None if it never ends)."""
        if not self.thinking_start:
            return 0
        if self.forced_thought:
            begin = 0
        else:
            stripped = text.lstrip(WHITESPACE)
            if not stripped.startswith(self.thinking_start):
                return 0
            begin = len(text) - len(stripped) + len(self.thinking_start)
        best: tuple[int, str] | None = None
        for tag in self.thinking_ends:
            at = text.find(tag, begin)
            if at >= 0 and (best is None or at < best[0]):
                best = (at, tag)
        if best is None:
            return None
        at, tag = best
        return at if tag.strip(WHITESPACE) in self.openings else at + len(tag)


@dataclass(frozen=True)
class Envelope:
    """One ``open ... close`` envelope in a region: its span and the text between the tags
    (``body``; ``closed`` False: it runs to the end of the text)."""

    start: int
    end: int
    body: str
    closed: bool


def envelopes(text: str, start: int, layout: ToolCallLayout) -> Iterator[Envelope]:
    """The envelopes of ``text`` from ``start`` on, each opening at the next opening text."""
    pos = start
    n = len(text)
    while pos < n:
        at, opening = _next_opening(text, pos, layout.openings)
        if at < 0:
            return
        body_start = at + len(opening) if opening == layout.open else at  # a bare `<function=NAME>` opens too
        close = text.find(layout.close, body_start)
        if close < 0:
            yield Envelope(at, n, text[body_start:], False)
            return
        pos = close + len(layout.close)
        yield Envelope(at, pos, text[body_start:close], True)


def _next_opening(text: str, pos: int, openings: tuple[str, ...]) -> tuple[int, str]:
    best, which = -1, ""
    for opening in openings:
        at = text.find(opening, pos)
        if at >= 0 and (best < 0 or at < best):
            best, which = at, opening
    return best, which


def _literals(result: ChatTemplateResult) -> frozenset[str]:
    if result.parser is None:
        return frozenset()
    return frozenset(node.literal for node in result.parser.parsers if isinstance(node, Literal))


def _delimiters(result: ChatTemplateResult) -> frozenset[str]:
    if result.parser is None:
        return frozenset()
    return frozenset(d for node in result.parser.parsers if isinstance(node, (Until, Ac)) for d in node.delimiters)


def hold_markers(result: ChatTemplateResult, with_tools: bool) -> list[str]:
    """The texts a stream holds back while the output ends with them (or with their start): the
    thinking tags, the tag-like literals and delimiters of the parser (``<...``, ``[...``: an
    incomplete one can make upstream's partial parse put text on the wrong side for a token) and,
    with tools, the grammar's trigger words and the preserved tokens."""
    markers = [result.thinking_start_tag, *result.thinking_end_tags]
    markers += [m for m in _literals(result) | _delimiters(result) if len(m.strip(WHITESPACE)) >= 2
                and m.strip(WHITESPACE)[0] in "<["]
    if with_tools:
        markers += [t.value for t in result.grammar_triggers if t.type in ("word", "token")]
        markers += list(result.preserved_tokens)
    return [m for m in markers if len(m.strip(WHITESPACE)) >= 2]  # a lone ">" would stall every tag


def detect_layout(result: ChatTemplateResult) -> ToolCallLayout | None:
    """The result's tool-call layout, if it parses tool calls in one of the layouts above."""
    words = tuple(dict.fromkeys(t.value.strip(WHITESPACE) for t in result.grammar_triggers
                                if t.type in ("word", "token") and t.value.strip(WHITESPACE)))
    if not words:
        return None
    literals = _literals(result)
    envelope = next((w for w in words if w.startswith("<") and not w.startswith("</") and w.endswith("tool_call>")),
                    None)
    if envelope is None:
        return None
    close = "</" + envelope[1:]
    literal = next(t.value for t in result.grammar_triggers if t.value.strip(WHITESPACE) == envelope)
    start = result.thinking_start_tag
    ends = tuple(result.thinking_end_tags)
    forced = bool(start) and result.generation_prompt.rstrip(WHITESPACE).endswith(start)
    if "<function=" in literals and "<parameter=" in literals:
        value_newlines = "\n</parameter>\n" in literals
        return ToolCallLayout(XML, envelope, close, words, literal, start, ends, forced, value_newlines,
                              qwen3_coder=envelope == "<tool_call>" and value_newlines)
    if envelope == "<tool_call>" and '"name"' in literals and '"arguments"' in literals:
        return ToolCallLayout(HERMES, envelope, close, words, literal, start, ends, forced)
    return None
