"""Phases T2 and T3 for tag-based calls: per-call vs section markers, and the function's own markers.

    check_per_call_markers(draft)    T2 (templates with parallel calls): one call vs two
    extract_function_markers(draft)  T3: a call of FUN_FIRST vs one of FUN_SECOND

T2: if the second call repeats the section start, the "section" markers wrap each call; if the
per-call end marker occurs as often with one call as with two, it ends the section instead.
T3: the text around the function name (``<function=`` ... ``>``), what separates the name from
the arguments, and what closes the call after its last argument.
"""

from __future__ import annotations

import functools
from typing import Any

from ..tagged_parser import TaggedPegParser, build_tagged_peg_parser
from .diff_split import calculate_diff_split
from .fixtures import (
    ARG_FIRST,
    ARG_SECOND,
    FUN_FIRST,
    FUN_SECOND,
    assistant,
    first_tool_call,
    second_tool_call,
    tools,
    user,
)
from .helpers import trim_leading_whitespace, trim_whitespace
from .model import ToolFormat
from .tools_draft import ToolsDraft, substr_error
from .variants import TemplateParams

__all__ = ["check_per_call_markers", "extract_function_markers"]


def _one_call() -> TemplateParams:
    return TemplateParams(messages=[user(), assistant("", calls=[first_tool_call()])], tools=tools())


def check_per_call_markers(draft: ToolsDraft) -> None:
    cmp = draft.probe.compare(_one_call(),
                              messages=[user(), assistant("", calls=[first_tool_call(), second_tool_call()])])
    if cmp is None:
        return
    second_call = trim_leading_whitespace(calculate_diff_split(cmp.diff.suffix, cmp.diff.right).right)
    fmt = draft.format
    if fmt.section_start and second_call.startswith(fmt.section_start):
        draft.set_format(per_call_start=fmt.section_start, per_call_end=fmt.section_end, section_start="",
                         section_end="")
    end = draft.format.per_call_end
    if end:
        calls_one, calls_two = cmp.output_a.count(end), cmp.output_b.count(end)
        if calls_one > 0 and calls_one == calls_two:
            draft.set_format(section_end=end, per_call_end="")


@functools.cache
def _name_parser() -> TaggedPegParser:
    """Text before FUN_FIRST, FUN_FIRST, then text up to the next marker."""
    return build_tagged_peg_parser(lambda p: (
        p.tag("pre", p.until(FUN_FIRST)) + p.literal(FUN_FIRST)
        + p.tag("post", p.zero_or_more(p.negate(p.marker()) + p.any()))))


@functools.cache
def _json_name_suffix_parser() -> TaggedPegParser:
    """Markers and text up to the first ``{`` / ``[`` outside a marker, provided a marker follows
    the JSON somewhere."""
    def build(p: Any) -> Any:
        non_json = p.marker() | (p.negate(p.literal("{")) + p.negate(p.literal("[")) + p.any())
        after_json = p.zero_or_more(p.negate(p.marker()) + p.any()) + p.marker()
        return p.tag("ext", p.zero_or_more(non_json)) + after_json
    return build_tagged_peg_parser(build)


@functools.cache
def _text_to_marker_parser() -> TaggedPegParser:
    return build_tagged_peg_parser(lambda p: p.tag("ext", p.zero_or_more(p.negate(p.marker()) + p.any())))


@functools.cache
def _args_separator_parser() -> TaggedPegParser:
    """Whatever precedes the first argument's marker (``<marker> ARG``)."""
    def build(p: Any) -> Any:
        def arg_start() -> Any:
            return p.marker() + p.space() + p.choice([p.literal(ARG_FIRST), p.literal(ARG_SECOND)])
        return p.tag("sep", p.zero_or_more(p.negate(arg_start()) + p.any())) + arg_start()
    return build_tagged_peg_parser(build)


@functools.cache
def _tagged_closer_parser() -> TaggedPegParser:
    """After the last value: its closing marker, then the function's closer."""
    return build_tagged_peg_parser(lambda p: (
        p.until("YYYY") + p.literal("YYYY") + p.space() + p.marker() + p.space() + p.tag("close", p.rest())))


@functools.cache
def _json_closer_parser() -> TaggedPegParser:
    return build_tagged_peg_parser(lambda p: p.until("YYYY") + p.literal("YYYY") + p.tag("post_val", p.rest()))


def extract_function_markers(draft: ToolsDraft) -> None:
    params = _one_call()
    cmp = draft.probe.compare(params, messages=[user(), assistant("", calls=[second_tool_call()])])
    if cmp is None:
        return
    diff = cmp.diff
    if FUN_FIRST not in diff.left or FUN_SECOND not in diff.right:
        return
    fmt = draft.format
    name_prefix, name_suffix = draft.function.name_prefix, draft.function.name_suffix
    args_separator, close = draft.function.args_separator, draft.function.close

    prefix_marker = fmt.per_call_start or fmt.section_start
    if prefix_marker and prefix_marker in diff.prefix:
        name_prefix = diff.prefix[diff.prefix.rfind(prefix_marker) + len(prefix_marker):]

    name = _name_parser().parse_and_extract(diff.left)
    if name.result.success:
        name_prefix += name.tags.get("pre", "")
        name_suffix = name.tags.get("post", "")

    # the name suffix runs on into the common suffix, up to where the arguments begin
    if fmt.mode == ToolFormat.TAG_WITH_JSON:
        ext = _json_name_suffix_parser().parse_and_extract(diff.suffix)
        if ext.result.success:
            name_suffix += ext.tags.get("ext", "")
    else:
        ext = _text_to_marker_parser().parse_and_extract(diff.suffix)
        if ext.result.success:
            ext_text = ext.tags.get("ext", "")
            name_suffix += ext_text
            sep = _args_separator_parser().parse_and_extract(diff.suffix[len(ext_text):])
            if sep.result.success:
                args_separator = trim_whitespace(sep.tags.get("sep", ""))

    closer_suffix = _closer_region(draft, params, diff.suffix)
    if closer_suffix:
        if fmt.mode == ToolFormat.TAG_WITH_TAGGED:
            found = _tagged_closer_parser().parse_and_extract(closer_suffix)
            if found.result.success:
                close = found.tags.get("close", "")
        elif fmt.mode == ToolFormat.TAG_WITH_JSON:
            found = _json_closer_parser().parse_and_extract(closer_suffix)
            if found.result.success:
                post = found.tags.get("post_val", "")
                pos = max(post.rfind("}"), post.rfind("]"))
                if 0 <= pos < len(post) - 1:
                    close = trim_leading_whitespace(post[pos + 1:])
    draft.set_function(name_prefix=name_prefix, name_suffix=name_suffix, args_separator=args_separator,
                       close=trim_leading_whitespace(close))


def _closer_region(draft: ToolsDraft, params: TemplateParams, suffix: str) -> str:
    """The text after the call's last argument value up to the call (or section) end marker; with
    no end marker, what a call turn has after ``YYYY`` compared with a content turn."""
    fmt = draft.format
    end_marker = fmt.per_call_end or fmt.section_end
    if end_marker:
        pos = suffix.find(end_marker)
        return suffix if pos < 0 else suffix[:pos]
    cmp = draft.probe.compare(params, messages=[user(), assistant()])
    if cmp is None:
        return ""
    left = cmp.diff.left
    pos = left.find("YYYY")
    if pos >= 0:
        return left[pos + 4:]
    # upstream adds 4 to npos: an unsigned wrap to byte offset 3
    data = left.encode()
    if len(data) < 3:
        raise substr_error(3, left)
    return data[3:].decode("utf-8", "replace")
