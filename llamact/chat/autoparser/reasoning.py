"""Phase R: how the template shows reasoning (upstream's ``analyze_reasoning``).

    analyze_reasoning(probe, supports_tool_calls) -> ReasoningAnalysis

R1  an assistant turn with vs without ``reasoning_content``: the markers around the reasoning text
    (``<think>`` / ``</think>``), or only a closing marker (delimiter style).
R2  the generation prompt with thinking off vs on: a start marker the prompt opens, an end marker
    it closes (with the marker before it as start), or, when the whole prompt changes, two markers
    found after a common 64-character tail.
R3  (templates with tool calls) reasoning shown only in a turn with tool calls: TOOLS_ONLY.
"""

from __future__ import annotations

import functools

from ..tagged_parser import TaggedPegParser, build_tagged_peg_parser
from .diff_split import MARKER, prune_whitespace_segments, segmentize_markers
from .fixtures import (
    ARG_FIRST,
    ARG_SECOND,
    ASSISTANT_MSG,
    FUN_FIRST,
    THINKING_CONTENT,
    assistant,
    tool_call,
    tools,
    user,
)
from .helpers import trim_whitespace
from .model import ReasoningAnalysis, ReasoningMode
from .variants import TemplateParams, TemplateProbe

__all__ = ["analyze_reasoning"]

_ANCHOR_LEN = 64


@functools.cache
def _wrapped_parser() -> TaggedPegParser:
    """marker, the reasoning, marker (each with trailing space), then anything."""
    return build_tagged_peg_parser(lambda p: (
        p.tag("pre", p.marker() + p.space()) + p.literal(THINKING_CONTENT)
        + p.tag("post", p.space() + p.marker() + p.space()) + p.rest()))


@functools.cache
def _delimiter_parser() -> TaggedPegParser:
    """the reasoning, then optionally a closing marker."""
    return build_tagged_peg_parser(lambda p: (
        p.literal(THINKING_CONTENT) + p.space() + p.optional(p.tag("post", p.marker() + p.space()) + p.rest())))


@functools.cache
def _tools_wrapped_parser() -> TaggedPegParser:
    return build_tagged_peg_parser(lambda p: (
        p.tag("pre", p.marker() + p.space()) + p.literal(THINKING_CONTENT) + p.space()
        + p.tag("post", p.marker() + p.space())))


@functools.cache
def _tools_delimiter_parser() -> TaggedPegParser:
    return build_tagged_peg_parser(lambda p: (
        p.literal(THINKING_CONTENT) + p.space() + p.optional(p.tag("post", p.marker() + p.space()))))


class _Reasoning:
    """The phase's working state (upstream mutates one ``analyze_reasoning`` through R1..R3)."""

    def __init__(self, probe: TemplateProbe) -> None:
        self.probe = probe
        self.mode = ReasoningMode.NONE
        self.start = ""
        self.end = ""

    def presence(self) -> None:
        """R1: assistant turn without vs with reasoning_content."""
        params = TemplateParams(messages=[user(), assistant()])
        cmp = self.probe.compare(params, messages=[user(), assistant(reasoning=THINKING_CONTENT)])
        if cmp is None or THINKING_CONTENT not in cmp.diff.right:
            return
        # the stricter shape first (markers on both sides), else the delimiter one
        found = _wrapped_parser().parse_anywhere_and_extract(cmp.output_b)
        if not found.result.success:
            found = _delimiter_parser().parse_anywhere_and_extract(cmp.output_b)
        if not found.result.success:
            return
        pre, post = found.tags.get("pre", ""), found.tags.get("post", "")
        if pre and post:
            self.mode, self.start, self.end = ReasoningMode.TAG_BASED, pre, post
        elif post:
            self.mode, self.end = ReasoningMode.TAG_BASED, post

    def thinking_enabled(self) -> None:
        """R2: the generation prompt with enable_thinking false (A) vs true (B)."""
        params = TemplateParams(messages=[user()], add_generation_prompt=True, enable_thinking=False)
        cmp = self.probe.compare(params, enable_thinking=True)
        if cmp is None:
            return
        diff = cmp.diff
        left, right = trim_whitespace(diff.left), trim_whitespace(diff.right)
        if not left and diff.right:
            # thinking on adds text at the end: the prompt opens the reasoning
            if right and cmp.output_b.endswith(right) and not self.start:
                self.start = diff.right
                self.mode = ReasoningMode.TAG_BASED
        elif not right and diff.left:
            # thinking off adds text at the end: the prompt closes an (empty) reasoning block
            if left and cmp.output_a.endswith(left) and not self.end:
                seg = prune_whitespace_segments(segmentize_markers(cmp.output_a))
                if len(seg) >= 2 and seg[-1].value == left and seg[-2].type == MARKER:
                    self.start = seg[-2].value
                self.end = diff.left
                self.mode = ReasoningMode.TAG_BASED
        elif left and right:
            self._tail_anchored(cmp.output_a, cmp.output_b)
        if self.mode == ReasoningMode.NONE and not self.start and self.end:
            self.mode = ReasoningMode.TAG_BASED

    def _tail_anchored(self, output_a: str, output_b: str) -> None:
        """Both prompts differ (e.g. SmolLM3 rewrites its system message): look for one prompt's
        last 64 characters in the other, followed by exactly two markers."""
        for base, extended in ((output_b, output_a), (output_a, output_b)):
            anchor = base[len(base) - min(len(base), _ANCHOR_LEN):]
            pos = extended.rfind(anchor)
            if pos < 0 or pos + len(anchor) >= len(extended):
                continue
            extra = trim_whitespace(extended[pos + len(anchor):])
            if not extra:
                continue
            seg = prune_whitespace_segments(segmentize_markers(extra))
            if len(seg) == 2 and seg[0].type == MARKER and seg[1].type == MARKER:
                if not self.start:
                    self.start = seg[0].value
                if not self.end:
                    self.end = seg[1].value
                self.mode = ReasoningMode.TAG_BASED
                return

    def scope(self) -> None:
        """R3: reasoning with content (A) vs reasoning with a tool call (B)."""
        call = tool_call(FUN_FIRST, {ARG_FIRST: "VVVV", ARG_SECOND: "XXXX"})
        params = TemplateParams(messages=[user(), assistant(ASSISTANT_MSG, reasoning=THINKING_CONTENT)],
                                tools=tools())
        cmp = self.probe.compare(params, messages=[user(), assistant(None, reasoning=THINKING_CONTENT,
                                                                     calls=[call])])
        if cmp is None or THINKING_CONTENT in cmp.output_a or THINKING_CONTENT not in cmp.output_b:
            return
        self.mode = ReasoningMode.TOOLS_ONLY
        found = _tools_wrapped_parser().parse_anywhere_and_extract(cmp.output_b)
        if found.result.success:
            self.start, self.end = found.tags.get("pre", ""), found.tags.get("post", "")
            return
        found = _tools_delimiter_parser().parse_anywhere_and_extract(cmp.output_b)
        if found.result.success:
            self.end = found.tags.get("post", "")
        else:
            self.mode = ReasoningMode.NONE


def analyze_reasoning(probe: TemplateProbe, supports_tool_calls: bool) -> ReasoningAnalysis:
    state = _Reasoning(probe)
    state.presence()
    state.thinking_enabled()
    if supports_tool_calls:
        state.scope()
    return ReasoningAnalysis(state.mode, state.start, state.end)
