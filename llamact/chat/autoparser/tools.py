"""Phase T: how the template writes tool calls (upstream's ``analyze_tools``).

    analyze_tools(probe, caps, reasoning) -> ToolsAnalysis

T1 decides the format (tools_format). JSON calls are then fully described; tag-based ones go on:
T2 per-call vs section markers (templates with parallel calls), T3 the function name markers and
closer, T4 argument name and value markers (tagged arguments only), T5 the argument separator, T7
the call id's position and markers (tools_calls, tools_args).
"""

from __future__ import annotations

from ...jinja.caps import TemplateCaps
from .model import ReasoningAnalysis, ToolFormat, ToolsAnalysis
from .tools_args import (
    extract_argument_name_markers,
    extract_argument_separator,
    extract_argument_value_markers,
    extract_call_id_markers,
)
from .tools_calls import check_per_call_markers, extract_function_markers
from .tools_draft import ToolsDraft
from .tools_format import analyze_tool_format
from .variants import TemplateProbe

__all__ = ["analyze_tools"]


def analyze_tools(probe: TemplateProbe, caps: TemplateCaps, reasoning: ReasoningAnalysis) -> ToolsAnalysis:
    draft = ToolsDraft(probe)
    analyze_tool_format(draft, reasoning, caps.supports_parallel_tool_calls)
    if draft.format.mode in (ToolFormat.NONE, ToolFormat.JSON_NATIVE):
        return draft.result()
    if caps.supports_parallel_tool_calls:
        check_per_call_markers(draft)
    extract_function_markers(draft)
    if draft.format.mode == ToolFormat.TAG_WITH_TAGGED:
        extract_argument_name_markers(draft)
        extract_argument_value_markers(draft)
    extract_argument_separator(draft)
    extract_call_id_markers(draft)
    return draft.result()
