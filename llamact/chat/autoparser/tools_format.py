"""Phase T1: what a tool call looks like (upstream's ``analyze_tool_calls`` and the format analyses).

    analyze_tool_format(draft, reasoning, supports_parallel_tool_calls) -> None   (fills draft.format)

An assistant turn with content is compared with one holding a call of FUN_FIRST; the new text is
the tool-call haystack. If the function name appears JSON-quoted after ``{`` or ``:`` the calls
are JSON (JSON_NATIVE): the call object is parsed to find which fields hold the name, the
arguments, the call id and a generated id, whether the function name is itself the key, whether
the calls are wrapped in an array, and the markers around them (and, with parallel calls, whether
those markers wrap every call). If only an argument name is JSON-quoted, the call is tagged with
JSON arguments (TAG_WITH_JSON), else tagged with tagged arguments (TAG_WITH_TAGGED): the markers
around the function name decide the section and per-call markers.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from ...json_types import Json
from ..json_text import JsonParseError, parse_json
from ..tagged_parser import TaggedPegParser, build_tagged_peg_parser
from .fixtures import ARG_FIRST, FUN_FIRST, assistant, first_tool_call, second_tool_call, tools, user
from .helpers import trim_leading_whitespace, trim_whitespace
from .model import ReasoningAnalysis, ToolFormat
from .tools_draft import AutoparserAnalysisError, ToolsDraft, substr_error
from .variants import TemplateParams

__all__ = ["analyze_tool_format"]

_NPOS = 2**64 - 1  # std::string::npos: an unfound field sorts last


@functools.cache
def _json_quoted(needle: str) -> TaggedPegParser:
    """``{`` or ``:``, optional space, then ``"needle"``."""
    return build_tagged_peg_parser(lambda p: (
        p.choice([p.literal("{"), p.literal(":")])
        << p.choice([p.tag("dq", p.literal('"') + p.literal(needle) + p.literal('"'))])))


@functools.cache
def _function_marker(needle: str) -> TaggedPegParser:
    """A ``<...needle...>`` or ``[...needle...]`` marker holding the function name."""
    def build(p: Any) -> Any:
        angle = (p.tag("fun_pre", p.literal("<") + p.until_one_of([">", needle])) + p.literal(needle)
                 + p.tag("fun_post", p.negate(p.space() + p.literal("<")) + p.until(">") + p.literal(">"))
                 + p.space())
        square = (p.tag("fun_pre", p.literal("[") + p.until_one_of(["]", needle])) + p.literal(needle)
                  + p.tag("fun_post", p.negate(p.space() + p.literal("[") + p.until("]") + p.literal("]"))
                          + p.space()))
        return p.tag("fun_marker", p.choice([angle, square]))
    return build_tagged_peg_parser(build)


@functools.cache
def _closers(double: bool) -> TaggedPegParser:
    """One or two markers (call end, section end) ending the text."""
    def build(p: Any) -> Any:
        sec_end = p.tag("sec_end", p.marker() + p.space()) + p.end()
        return p.tag("call_end", p.marker() + p.space()) + sec_end if double else sec_end
    return build_tagged_peg_parser(build)


def _dump(value: Json) -> str:
    """nlohmann's compact dump (only searched for a name, so number formatting does not matter)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def analyze_tool_format(draft: ToolsDraft, reasoning: ReasoningAnalysis, supports_parallel: bool) -> None:
    params = TemplateParams(messages=[user(), assistant()], tools=tools())
    cmp = draft.probe.compare(params, messages=[user(), assistant("", calls=[first_tool_call()])])
    if cmp is None or not cmp.diff.right:
        return
    haystack = cmp.diff.right

    if _json_quoted(FUN_FIRST).parse_anywhere_and_extract(haystack).result.success:
        mode = ToolFormat.JSON_NATIVE
    elif _json_quoted(ARG_FIRST).parse_anywhere_and_extract(haystack).result.success:
        mode = ToolFormat.TAG_WITH_JSON
    else:
        mode = ToolFormat.TAG_WITH_TAGGED
    draft.set_format(mode=mode)

    # the reasoning markers (first occurrence of each) are not part of the call
    clean = haystack
    if reasoning.start and reasoning.start in haystack:
        pos = haystack.find(reasoning.start)
        clean = haystack[:pos] + haystack[pos + len(reasoning.start):]
    if reasoning.end and reasoning.end in clean:
        pos = clean.find(reasoning.end)
        clean = clean[:pos] + clean[pos + len(reasoning.end):]

    if mode == ToolFormat.JSON_NATIVE:
        _json_native(draft, clean)
        if supports_parallel:
            _json_native_parallel(draft)
    else:
        _tagged(draft, clean)
    # end markers never influence content: whitespace around them is not required
    draft.set_format(section_end=trim_whitespace(draft.format.section_end),
                     per_call_end=trim_whitespace(draft.format.per_call_end))


def _json_native(draft: ToolsDraft, clean: str) -> None:
    json_start = clean.find("{")
    json_end = clean.rfind("}")
    if json_start < 0:
        raise substr_error(_NPOS, clean)
    count = json_end - json_start + 1  # a negative count is huge as size_t: the rest of the text
    cut = clean[json_start:json_start + count] if count >= 0 else clean[json_start:]
    try:
        call = parse_json(cut)
    except JsonParseError as exc:
        # upstream throws nlohmann's parse_error here; the wording of that message is not reproduced
        raise AutoparserAnalysisError(f"the tool call the template renders is not JSON ({exc.message}): {cut!r}",
                                      {"text": cut}) from None

    fields: dict[str, Any] = {}

    def register(prefix: str, key: str, value: Json) -> None:
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, str) and "call0000" in value:
            fields["id_field"] = path
        elif isinstance(value, str) and value == FUN_FIRST:
            fields["name_field"] = path
        elif ARG_FIRST in _dump(value):  # arguments as a string or as an object
            fields["args_field"] = path
        elif "id" in key:  # a generated id, by its name
            fields["gen_id_field"] = path

    for key, value in _items(call):
        if key == FUN_FIRST:
            # the function name is the key: no name field, the arguments are its value
            fields.update(fun_name_is_key=True, name_field="", args_field="")
            continue
        if isinstance(value, dict) and ARG_FIRST not in _dump(value):
            fields["function_field"] = key
            for sub_key, sub_value in value.items():
                register(key, sub_key, sub_value)
        register("", key, value)
    draft.set_format(**fields)
    fmt = draft.format

    array = build_tagged_peg_parser(lambda p: (
        p.tag("pre", p.literal("[") + p.space()) + p.literal(cut) + p.tag("post", p.space() + p.literal("]"))))
    wrapped = array.parse_anywhere_and_extract(clean)
    if wrapped.result.success:
        json_start -= len(wrapped.tags.get("pre", ""))
        json_end += len(wrapped.tags.get("post", ""))
    json_end += 1  # past the closing character

    located = sorted((_find(clean, name), name) for name in (fmt.name_field, fmt.args_field, fmt.id_field,
                                                             fmt.gen_id_field) if name)
    section_end = trim_whitespace(clean[json_end:])
    if wrapped.result.success and section_end == "]":
        section_end = ""  # the array's own bracket, not a marker
    draft.set_format(tools_array_wrapped=fmt.tools_array_wrapped or wrapped.result.success,
                     parameter_order=fmt.parameter_order + tuple(name for _, name in located),
                     section_start=trim_leading_whitespace(clean[:json_start]), section_end=section_end)


def _items(value: Json) -> list[tuple[str, Json]]:
    """nlohmann's ``items()``: an object's members, an array's elements keyed by index, else one
    unnamed item."""
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, list):
        return [(str(i), v) for i, v in enumerate(value)]
    return [("", value)]


def _find(text: str, needle: str) -> int:
    pos = text.find(needle)
    return _NPOS if pos < 0 else pos


def _json_native_parallel(draft: ToolsDraft) -> None:
    """One call vs two: if the second call repeats the section start, it is a per-call marker."""
    params = TemplateParams(messages=[user(), assistant("", calls=[first_tool_call()])], tools=tools())
    cmp = draft.probe.compare(params, messages=[user(), assistant("", calls=[first_tool_call(), second_tool_call()])])
    if cmp is None:
        return
    fmt = draft.format
    if fmt.section_start and fmt.section_start in cmp.diff.right:
        draft.set_format(per_call_start=fmt.section_start, per_call_end=fmt.section_end, section_start="",
                         section_end="")


def _tagged(draft: ToolsDraft, clean: str) -> None:
    """Tag-based calls: the function marker, then up to two markers before it (section start,
    call start) and up to two closing markers at the end."""
    fun_res = _function_marker(FUN_FIRST).parse_anywhere_and_extract(clean)
    fun_marker = fun_res.tags.get("fun_marker", "") if fun_res.result.success else FUN_FIRST

    per_call = build_tagged_peg_parser(lambda p: (
        p.tag("sec_start", p.marker() + p.space()) + p.tag("call_start", p.marker() + p.space())
        + p.tag("fun_pre", p.until(fun_marker)) + fun_marker + p.tag("rest", p.rest())))
    result = per_call.parse_anywhere_and_extract(clean)
    if result.result.success:
        result_end = _closers(True).parse_anywhere_and_extract(result.tags.get("rest", ""))
        draft.set_function(name_prefix=fun_res.tags.get("fun_pre", "") + draft.function.name_prefix)
    else:
        section = build_tagged_peg_parser(lambda p: (
            p.tag("sec_start", p.marker() + p.space()) + fun_marker + p.tag("rest", p.rest())))
        result = section.parse_anywhere_and_extract(clean)
        result_end = _closers(False).parse_anywhere_and_extract(result.tags.get("rest", ""))
    draft.set_format(per_call_start=result.tags.get("call_start", ""), per_call_end=result_end.tags.get("call_end", ""),
                     section_start=result.tags.get("sec_start", ""), section_end=result_end.tags.get("sec_end", ""))
