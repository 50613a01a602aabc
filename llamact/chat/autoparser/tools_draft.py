"""The tool phases' working state: upstream mutates one ``analyze_tools`` through T1..T7.

:class:`ToolsDraft` holds the four parts as the frozen model values and replaces them as the phases
learn more (``draft.set_format(section_start=...)``; an unknown field name raises TypeError), and
the parsers the phases share.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Any

from ...errors import LlamaUnsupportedException
from ..tagged_parser import TaggedPegParser, build_tagged_peg_parser
from .model import ToolArgumentsAnalysis, ToolFormatAnalysis, ToolFunctionAnalysis, ToolIdAnalysis, ToolsAnalysis
from .variants import TemplateProbe

__all__ = ["AutoparserAnalysisError", "ToolsDraft", "find_first_marker", "find_last_marker", "last_marker_parser",
           "substr_error"]


class AutoparserAnalysisError(LlamaUnsupportedException):
    """Upstream's analysis throws on this template (e.g. the tool call it renders is not JSON); the
    message is upstream's where the error is a C++ library one."""


def substr_error(pos: int, text: str) -> AutoparserAnalysisError:
    """libstdc++'s out_of_range for ``text.substr(pos)`` past the end (sizes in bytes)."""
    return AutoparserAnalysisError(
        f"basic_string::substr: __pos (which is {pos}) > this->size() (which is {len(text.encode())})")


@dataclass
class ToolsDraft:
    probe: TemplateProbe
    format: ToolFormatAnalysis = field(default_factory=ToolFormatAnalysis)
    function: ToolFunctionAnalysis = field(default_factory=ToolFunctionAnalysis)
    arguments: ToolArgumentsAnalysis = field(default_factory=ToolArgumentsAnalysis)
    call_id: ToolIdAnalysis = field(default_factory=ToolIdAnalysis)

    def set_format(self, **changes: Any) -> None:
        self.format = replace(self.format, **changes)

    def set_function(self, **changes: Any) -> None:
        self.function = replace(self.function, **changes)

    def set_arguments(self, **changes: Any) -> None:
        self.arguments = replace(self.arguments, **changes)

    def set_call_id(self, **changes: Any) -> None:
        self.call_id = replace(self.call_id, **changes)

    def result(self) -> ToolsAnalysis:
        return ToolsAnalysis(self.format, self.function, self.arguments, self.call_id)


@functools.cache
def last_marker_parser(tag: str) -> TaggedPegParser:
    """Skips to the last marker of the text and tags it plus the text after it."""
    def build(p: Any) -> Any:
        last = p.marker() + p.zero_or_more(p.negate(p.marker()) + p.any()) + p.end()
        return p.zero_or_more(p.negate(last) + p.any()) + p.tag(tag, last)
    return build_tagged_peg_parser(build)


@functools.cache
def _last_marker_only() -> TaggedPegParser:
    def build(p: Any) -> Any:
        last = p.marker() + p.zero_or_more(p.negate(p.marker()) + p.any()) + p.end()
        return p.zero_or_more(p.negate(last) + p.any()) + p.tag("m", p.marker())
    return build_tagged_peg_parser(build)


@functools.cache
def _first_marker() -> TaggedPegParser:
    return build_tagged_peg_parser(lambda p: p.tag("m", p.marker()))


def find_last_marker(text: str) -> str:
    """The last ``<...>`` / ``[...]`` marker of ``text`` (without what follows it); "" when none."""
    found = _last_marker_only().parse_anywhere_and_extract(text)
    return found.tags.get("m", "") if found.result.success else ""


def find_first_marker(text: str) -> str:
    found = _first_marker().parse_anywhere_and_extract(text)
    return found.tags.get("m", "") if found.result.success else ""
