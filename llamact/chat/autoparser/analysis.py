"""The whole differential analysis of a template (upstream's ``autoparser::analyze_template``).

    analyze_template(tmpl) -> AutoparserAnalysis        cached per template

Phases in upstream's order: reasoning (R1-R3), content, tools (T1-T7, when the template renders
tool calls), the assistant and user start markers, the preserved tokens (every marker found,
trimmed, once each), then the per-template workarounds. The result depends only on the template
source and its BOS/EOS tokens, so it is computed once per (source, bos, eos); upstream re-runs it on
every request.

Raises ``AutoparserAnalysisError`` where upstream's analysis throws (e.g. a JSON tool call the
template renders that does not parse).
"""

from __future__ import annotations

import collections
import threading
from dataclasses import replace

from ..templates import ChatTemplate
from .content import analyze_content
from .helpers import trim_whitespace
from .model import AutoparserAnalysis, ContentAnalysis, ReasoningAnalysis, ToolsAnalysis
from .reasoning import analyze_reasoning
from .roles import assistant_start_marker, user_start_marker
from .tools import analyze_tools
from .tools_draft import AutoparserAnalysisError
from .variants import TemplateProbe
from .workarounds import apply_workarounds

__all__ = ["AutoparserAnalysisError", "analyze_template", "preserved_tokens"]


_CACHE_SIZE = 128
_cache: collections.OrderedDict[tuple[str, str, str], AutoparserAnalysis] = collections.OrderedDict()
_cache_lock = threading.Lock()


def analyze_template(tmpl: ChatTemplate) -> AutoparserAnalysis:
    """The analysis of ``tmpl``, cached by its source and special tokens (bounded, least recently
    used first out). Two threads asking for a new template at once may both compute it."""
    key = (tmpl.source, tmpl.bos_token, tmpl.eos_token)
    with _cache_lock:
        cached = _cache.get(key)
        if cached is not None:
            _cache.move_to_end(key)
            return cached
    result = run_analysis(tmpl)
    with _cache_lock:
        _cache[key] = result
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return result


def run_analysis(tmpl: ChatTemplate, now: float | None = None) -> AutoparserAnalysis:
    """One uncached analysis (``now`` fixes the clock of every render; default: now)."""
    probe = TemplateProbe(tmpl, now)
    caps = tmpl.caps
    reasoning = analyze_reasoning(probe, caps.supports_tool_calls)
    content = analyze_content(probe, reasoning)
    tools = analyze_tools(probe, caps, reasoning) if caps.supports_tool_calls else ToolsAnalysis()
    assistant_start = assistant_start_marker(probe, reasoning)
    user_start = user_start_marker(probe)
    analysis = AutoparserAnalysis(
        jinja_caps=caps.to_map(), user_start=user_start, assistant_start=assistant_start, reasoning=reasoning,
        content=content, tools=tools, analysis_complete=False,
        preserved_tokens=preserved_tokens(reasoning, content, tools))
    analysis = apply_workarounds(tmpl.source, analysis)
    return replace(analysis, analysis_complete=True)


def preserved_tokens(reasoning: ReasoningAnalysis, content: ContentAnalysis, tools: ToolsAnalysis) -> tuple[str, ...]:
    """Every marker the analysis found, trimmed, first occurrence kept, in upstream's order."""
    fmt, fn, args, call_id = tools.format, tools.function, tools.arguments, tools.call_id
    markers = (
        reasoning.start, reasoning.end, content.start, content.end,
        fmt.section_start, fmt.section_end, fmt.per_call_start, fmt.per_call_end,
        fn.name_prefix, fn.name_suffix, fn.args_separator, fn.close,
        args.start, args.end, args.name_prefix, args.name_suffix, args.separator, args.value_prefix,
        args.value_suffix, call_id.prefix, call_id.suffix,
    )
    out: list[str] = []
    for marker in markers:
        token = trim_whitespace(marker)
        if token and token not in out:
            out.append(token)
    return tuple(out)
