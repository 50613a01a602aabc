"""What the autoparser's part builders share while one parser is built (upstream's
``parser_build_context``), and the content-wrapping helpers both the generator and the tool-call
parsers use.

What enters: the chat PEG builder, the request's template inputs and the template's analysis. What
leaves: PEG parsers (``optional_wrapped_content``) and a predicate (``is_always_wrapped``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...peg.builder import P
from ..peg_builder import ChatPegBuilder
from ..render import TemplateInputs
from .model import AutoparserAnalysis, ContentAnalysis, ContentMode

__all__ = ["BuildContext", "is_always_wrapped", "optional_wrapped_content"]


def is_always_wrapped(content: ContentAnalysis) -> bool:
    """Content always sits between the analysis's content markers (both known)."""
    return content.mode == ContentMode.ALWAYS_WRAPPED and bool(content.start) and bool(content.end)


@dataclass
class BuildContext:
    """Upstream's ``parser_build_context``: what the part builders share while one parser is built."""

    p: ChatPegBuilder
    inputs: TemplateInputs
    analysis: AutoparserAnalysis
    reasoning_parser: P
    extracting_reasoning: bool = False


def optional_wrapped_content(ctx: BuildContext) -> P:
    """``analyze_content::build_optional_wrapped``: wrapped content before tool calls, if any (only
    asked for when the content is always wrapped)."""
    p, content = ctx.p, ctx.analysis.content
    start, end = content.start, content.end
    return p.optional(p.seq_rtl(start, lambda: p.content(p.until(end)), end))
