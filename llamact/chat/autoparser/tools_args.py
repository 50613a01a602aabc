"""Phases T4, T5 and T7 for tag-based calls: argument markers, their separator, and the call id.

    extract_argument_name_markers(draft)   T4 (tagged arguments): ARG_FIRST vs ARG_SECOND
    extract_argument_value_markers(draft)  T4 (tagged arguments): value XXXX vs YYYY
    extract_argument_separator(draft)      T5: one argument vs two
    extract_call_id_markers(draft)         T7: id call00001 vs call99999

T6 (upstream's ``extract_args_markers``) is left out on purpose: upstream runs it only for
tag-based formats and its body only acts for JSON_NATIVE, so it never changes the analysis.
"""

from __future__ import annotations

import functools
from typing import Any

from ..tagged_parser import TaggedPegParser, build_tagged_peg_parser
from .fixtures import (
    ARG_FIRST,
    ARG_SECOND,
    CALL_ID_001,
    CALL_ID_999,
    FUN_FIRST,
    assistant,
    first_tool_call,
    tools,
    user,
)
from .helpers import common_prefix_len, trim_whitespace, until_common_prefix
from .model import CallIdPosition
from .tools_draft import ToolsDraft, find_first_marker, find_last_marker, last_marker_parser
from .variants import TemplateParams

__all__ = ["extract_argument_name_markers", "extract_argument_separator", "extract_argument_value_markers",
           "extract_call_id_markers"]


def _one_arg_call() -> TemplateParams:
    return TemplateParams(messages=[user(), assistant("", calls=[first_tool_call({ARG_FIRST: "XXXX"})])],
                          tools=tools())


@functools.cache
def _name_in_structure(name: str, value_start: str) -> TaggedPegParser:
    """Text before the argument name, the name, then text up to a quote or the value."""
    return build_tagged_peg_parser(lambda p: (
        p.tag("pre", p.until(name)) + p.literal(name) + p.tag("suffix", p.until_one_of(['"', value_start]))))


@functools.cache
def _up_to_marker_parser() -> TaggedPegParser:
    """Text up to and including the next marker and the space after it."""
    return build_tagged_peg_parser(lambda p: p.tag("suffix", (
        p.zero_or_more(p.negate(p.marker()) + p.any()) + p.marker() + p.space())))


def extract_argument_name_markers(draft: ToolsDraft) -> None:
    cmp = draft.probe.compare(_one_arg_call(),
                              messages=[user(), assistant("", calls=[first_tool_call({ARG_SECOND: "YYYY"})])])
    if cmp is None:
        return
    diff = cmp.diff
    if not diff.left or not diff.right:
        return
    left = _name_in_structure(ARG_FIRST, "X").parse_anywhere_and_extract(diff.left)
    right = _name_in_structure(ARG_SECOND, "Y").parse_anywhere_and_extract(diff.right)
    left_pre, left_suffix = left.tags.get("pre", ""), left.tags.get("suffix", "")
    if (left.result.success and right.result.success and left_pre and left_pre == right.tags.get("pre", "")
            and left_suffix == right.tags.get("suffix", "")):
        # the name sits inside a structure (e.g. a JSON key): the shared wrapper is the prefix
        draft.set_arguments(name_prefix=left_pre, name_suffix=left_suffix)
    elif diff.left.startswith(ARG_FIRST) and diff.right.startswith(ARG_SECOND):
        # the name starts the diff: its prefix is the last marker before it
        pre = last_marker_parser("name_prefix").parse_and_extract(diff.prefix)
        draft.set_arguments(name_prefix=pre.tags.get("name_prefix", "") if pre.result.success else diff.prefix)
        # the suffix runs from the name to the first marker, in the diff or in the common suffix
        suffix = _up_to_marker_parser().parse_anywhere_and_extract(diff.left[len(ARG_FIRST):] + diff.suffix)
        if suffix.result.success:
            draft.set_arguments(name_suffix=suffix.tags.get("suffix", ""))


def extract_argument_value_markers(draft: ToolsDraft) -> None:
    cmp = draft.probe.compare(_one_arg_call(),
                              messages=[user(), assistant("", calls=[first_tool_call({ARG_FIRST: "YYYY"})])])
    if cmp is None:
        return
    diff = cmp.diff
    if diff.left != "XXXX" or diff.right != "YYYY":
        return
    name_ending = ARG_FIRST + draft.arguments.name_suffix
    prefix = diff.prefix
    if name_ending in prefix:
        prefix = prefix[prefix.rfind(name_ending) + len(name_ending):]
    if prefix:
        pre = last_marker_parser("val_prefix").parse_and_extract(prefix)
        draft.set_arguments(value_prefix=pre.tags.get("val_prefix", "") if pre.result.success else prefix)

    value_suffix = diff.suffix
    fmt, close = draft.format, draft.function.close
    cut_at = close or fmt.per_call_end or fmt.section_end
    if cut_at and cut_at in value_suffix:
        value_suffix = value_suffix[:value_suffix.find(cut_at)]
    if trim_whitespace(value_suffix):
        draft.set_arguments(value_suffix=value_suffix)


def extract_argument_separator(draft: ToolsDraft) -> None:
    cmp = draft.probe.compare(_one_arg_call(), messages=[user(), assistant("", calls=[first_tool_call()])])
    if cmp is not None and cmp.diff.right:
        draft.set_arguments(separator=until_common_prefix(cmp.diff.right, ARG_FIRST, ARG_SECOND))


@functools.cache
def _id_prefix_parser(common_id: str) -> TaggedPegParser:
    """The marker directly before the id (no other marker in between)."""
    return build_tagged_peg_parser(lambda p: (
        p.tag("prefix", p.marker())
        + p.zero_or_more(p.negate(p.marker()) + p.negate(p.literal(common_id)) + p.any()) + p.literal(common_id)))


@functools.cache
def _marker_before_args_parser() -> TaggedPegParser:
    def build(p: Any) -> Any:
        return p.zero_or_more(p.negate(p.marker()) + p.negate(p.literal("{")) + p.any()) + p.tag("suffix", p.marker())
    return build_tagged_peg_parser(build)


def extract_call_id_markers(draft: ToolsDraft) -> None:
    params = TemplateParams(messages=[user(), assistant("", calls=[first_tool_call()])], tools=tools())
    cmp = draft.probe.compare(params, messages=[user(), assistant("", calls=[first_tool_call(call_id=CALL_ID_999)])])
    if cmp is None:
        return
    diff = cmp.diff
    if not diff.left and not diff.right:
        return
    common_id = CALL_ID_001[:common_prefix_len(CALL_ID_001, CALL_ID_999)]
    pos, prefix, suffix = CallIdPosition.NONE, "", ""
    name_in_prefix = diff.prefix.rfind(FUN_FIRST)
    name_in_suffix = diff.suffix.find(FUN_FIRST)

    if name_in_prefix >= 0 and name_in_suffix < 0:
        # the name comes before the id: the id sits between name and arguments, or after the arguments
        args_in_prefix = diff.prefix.find("{", name_in_prefix)
        args_in_suffix = diff.suffix.find("{")
        if args_in_suffix >= 0 and args_in_prefix < 0:
            pos = CallIdPosition.BETWEEN_FUNC_AND_ARGS
            after_name = diff.prefix[name_in_prefix + len(FUN_FIRST):]
            found = _id_prefix_parser(common_id).parse_anywhere_and_extract(after_name)
            prefix = found.tags.get("prefix", "") if found.result.success else find_last_marker(after_name)
            found = _marker_before_args_parser().parse_anywhere_and_extract(diff.suffix)
            if found.result.success:
                suffix = found.tags.get("suffix", "")
        elif args_in_prefix >= 0:
            pos = CallIdPosition.POST_ARGS
            after_args = diff.prefix[args_in_prefix:]
            closing = after_args.rfind("}")
            if closing >= 0:
                prefix = find_last_marker(after_args[closing + 1:])
            suffix = find_first_marker(diff.suffix)
    elif name_in_suffix >= 0 and name_in_prefix < 0:
        pos = CallIdPosition.PRE_FUNC_NAME
        prefix = find_last_marker(diff.prefix)
        suffix = find_first_marker(diff.suffix[:name_in_suffix])

    if prefix == draft.arguments.end:
        prefix = ""
    if suffix == draft.arguments.start:
        suffix = ""
    draft.set_call_id(pos=pos, prefix=prefix, suffix=suffix)
    # a per-call end that starts with the id suffix took in the id and sample arguments by mistake
    if pos != CallIdPosition.NONE and suffix and draft.format.per_call_end.startswith(suffix):
        draft.set_format(per_call_end="")
