"""The marker-aware diff of two renders (upstream's ``calculate_diff_split`` and its segmenter).

    segmentize_markers(text) -> list[Segment]          "<a>x[b]" -> MARKER "<a>", TEXT "x", MARKER "[b]"
    prune_whitespace_segments(segments) -> list[Segment]
    calculate_diff_split(left, right) -> DiffSplit     prefix + left + suffix == left input, same for right

A *marker* is a ``<...>`` or ``[...]`` span; everything between markers is text. The split first
matches whole segments from both ends (so a common prefix or suffix never ends inside a marker),
then refines character by character inside the remaining text, as upstream does, quirks included
(e.g. ``"left"`` vs ``"right"`` share the suffix ``"t"``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .helpers import common_prefix_len, common_suffix_len, trim_whitespace

__all__ = ["MARKER", "TEXT", "DiffSplit", "Segment", "calculate_diff_split", "prune_whitespace_segments",
           "segmentize_markers"]

TEXT = "TEXT"
MARKER = "MARKER"
# a marker runs from an opener to the first closer of its own kind; a lone opener has no closer
_MARKER_OR_OPENER = re.compile(r"<[^>]*>|\[[^\]]*\]|[<\[]")


@dataclass(frozen=True)
class Segment:
    type: str   # TEXT or MARKER (upstream's segment_type names)
    value: str


@dataclass(frozen=True)
class DiffSplit:
    """Longest common prefix and suffix of two texts and the differing middles (upstream's diff_split)."""

    prefix: str = ""
    suffix: str = ""
    left: str = ""
    right: str = ""


def segmentize_markers(text: str) -> list[Segment]:
    """Split ``text`` into markers (``<...>`` / ``[...]``, not nested) and the text between them. An
    unclosed opener starts a text segment that runs to the end."""
    out: list[Segment] = []
    last = 0
    for match in _MARKER_OR_OPENER.finditer(text):
        if match.start() > last:
            out.append(Segment(TEXT, text[last:match.start()]))
        if len(match.group()) == 1 and match.group() in "<[":
            last = match.start()  # an opener never closed: the rest is text
            break
        out.append(Segment(MARKER, match.group()))
        last = match.end()
    if last < len(text):
        out.append(Segment(TEXT, text[last:]))
    return out


def prune_whitespace_segments(segments: list[Segment]) -> list[Segment]:
    return [seg for seg in segments if trim_whitespace(seg.value)]


def calculate_diff_split(left: str, right: str) -> DiffSplit:
    """Upstream's ``calculate_diff_split``: ``prefix`` and ``suffix`` common to both, ``left`` /
    ``right`` what differs; segment boundaries are respected where the differing parts are markers."""
    lseg = segmentize_markers(left)
    rseg = segmentize_markers(right)
    if not lseg:
        return DiffSplit(right=right)
    if not rseg:
        return DiffSplit(left=left)

    # inclusive cursors into the segment lists, as upstream's iterators
    ls, le, rs, re_ = 0, len(lseg) - 1, 0, len(rseg) - 1
    prefix, suffix = "", ""
    left_consumed = right_consumed = False

    while ls != le and rs != re_:
        advanced = False
        if lseg[ls] == rseg[rs]:
            prefix += lseg[ls].value
            ls += 1
            rs += 1
            advanced = True
        if lseg[le] == rseg[re_]:
            suffix = lseg[le].value + suffix
            if ls != le:
                le -= 1
            else:
                left_consumed = True
            if rs != re_:
                re_ -= 1
            else:
                right_consumed = True
            advanced = True
        if not advanced:
            break

    if ls == le and rs != re_:
        if lseg[ls] == rseg[re_]:
            suffix = rseg[re_].value + suffix
            re_ -= 1
            left_consumed = True
        elif lseg[ls] == rseg[rs]:
            prefix += rseg[rs].value
            rs += 1
            left_consumed = True
    elif rs == re_ and ls != le:
        if lseg[le] == rseg[rs]:
            suffix = lseg[le].value + suffix
            le -= 1
            right_consumed = True
        elif lseg[ls] == rseg[rs]:
            prefix += lseg[ls].value
            ls += 1
            right_consumed = True
    elif ls == le and rs == re_ and lseg[ls] == rseg[rs] and lseg[ls].type == MARKER:
        prefix += rseg[rs].value
        left_consumed = right_consumed = True

    text_suffix_possible = lseg[le].type == TEXT and rseg[re_].type == TEXT
    text_prefix_possible = rseg[rs].type == TEXT and lseg[ls].type == TEXT

    rest_left = "".join(s.value for s in lseg[ls:le if left_consumed else le + 1])
    rest_right = "".join(s.value for s in rseg[rs:re_ if right_consumed else re_ + 1])

    suffix_len = common_suffix_len(rest_left, rest_right) if text_suffix_possible else 0
    # the prefix is looked for only before the suffix, so that the two never overlap
    prefix_len = common_prefix_len(rest_left[:len(rest_left) - suffix_len],
                                   rest_right[:len(rest_right) - suffix_len]) if text_prefix_possible else 0

    prefix += rest_left[:prefix_len]
    suffix = rest_left[len(rest_left) - suffix_len:] + suffix
    diff_left = rest_left[prefix_len:len(rest_left) - suffix_len]
    diff_right = rest_right[prefix_len:len(rest_right) - suffix_len]

    if not diff_left and not diff_right:
        return DiffSplit(prefix=left)  # no difference: all of it is "prefix"
    # When left is a prefix of right, the segment matching from both ends can rotate the split
    # (a shared trailing "\n" taken as suffix): say it directly.
    if not diff_left and len(left) <= len(right) and right.startswith(left):
        return DiffSplit(prefix=left, right=right[len(left):])
    return DiffSplit(prefix, suffix, diff_left, diff_right)
