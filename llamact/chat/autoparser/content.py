"""Phase C: whether the template wraps assistant content in markers (upstream's ``analyze_content``).

    analyze_content(probe, reasoning) -> ContentAnalysis

A content-only assistant turn is compared with a tool-call turn and with a reasoning-only turn
(both with empty content). When what differs is just the content text (perhaps after the
reasoning end marker, perhaps followed by one end-of-turn marker), content is PLAIN; otherwise the
markers around the content text are its ``start`` / ``end`` (ALWAYS_WRAPPED).
"""

from __future__ import annotations

import functools

from ..tagged_parser import TaggedPegParser, build_tagged_peg_parser
from .fixtures import ASSISTANT_MSG, THINKING_CONTENT, assistant, tool_call, tools, user
from .helpers import trim_whitespace
from .model import ContentAnalysis, ContentMode, ReasoningAnalysis, ReasoningMode
from .variants import TemplateParams, TemplateProbe

__all__ = ["analyze_content"]


@functools.cache
def _wrapped_parser() -> TaggedPegParser:
    return build_tagged_peg_parser(lambda p: (
        p.tag("pre", p.marker() + p.space()) + p.literal(ASSISTANT_MSG) + p.space()
        + p.tag("post", p.marker() + p.space()) + p.rest()))


def _is_bare(text: str) -> bool:
    """Upstream's check that the reasoning diff holds only itself plus, at most, one trailing marker:
    a parser made of ``space, literal(text), space, marker?, space, end`` run over ``text`` (so in
    effect: ``text`` does not start with whitespace)."""
    parser = build_tagged_peg_parser(lambda p: (
        p.space() + p.literal(text) + p.space() + p.optional(p.marker()) + p.space() + p.end()))
    return parser.parse_and_extract(text).result.success


def analyze_content(probe: TemplateProbe, reasoning: ReasoningAnalysis) -> ContentAnalysis:
    params = TemplateParams(messages=[user(), assistant()], tools=tools())
    with_tools = probe.compare(params, messages=[
        user(), assistant("", calls=[tool_call("test_func", {"arg1": "value1"})])])
    with_reasoning = probe.compare(params, messages=[user(), assistant("", reasoning=THINKING_CONTENT)])
    if with_tools is None or with_reasoning is None:
        return ContentAnalysis()
    diff_tools, diff_reasoning = with_tools.diff, with_reasoning.diff

    if trim_whitespace(diff_tools.left) == ASSISTANT_MSG:
        if _is_bare(diff_reasoning.left):
            return ContentAnalysis(ContentMode.PLAIN)
        if reasoning.mode != ReasoningMode.NONE and reasoning.end:
            after_reasoning = build_tagged_peg_parser(lambda p: (
                p.literal(reasoning.end) + p.space() + p.literal(ASSISTANT_MSG)))
            if after_reasoning.parse_anywhere_and_extract(diff_reasoning.left).result.success:
                return ContentAnalysis(ContentMode.PLAIN)

    rdiff = diff_reasoning.left
    if reasoning.end and reasoning.end in rdiff:
        rdiff = rdiff[rdiff.find(reasoning.end) + len(reasoning.end):]
    # the longer of the two diffs is the more promising place to find the wrapper
    pure_content = rdiff if len(rdiff) > len(diff_tools.left) else diff_tools.left
    found = _wrapped_parser().parse_anywhere_and_extract(pure_content)
    start, end = found.tags.get("pre", ""), found.tags.get("post", "")
    mode = ContentMode.ALWAYS_WRAPPED if start or end else ContentMode.PLAIN
    return ContentAnalysis(mode, start, end)
