"""Where an assistant turn and a user turn start (upstream's ``detect_assistant_start_marker`` /
``detect_user_start_marker``): the message delimiters the parser result reports.

    assistant_start_marker(probe, reasoning) -> str    e.g. "<|im_start|>assistant"
    user_start_marker(probe) -> str                    e.g. "<|im_start|>user"
"""

from __future__ import annotations

from .diff_split import MARKER, TEXT, segmentize_markers
from .fixtures import ASSISTANT_MSG, USER_MSG, USER_MSG_TWO, assistant, user
from .helpers import trim_whitespace
from .model import ReasoningAnalysis
from .variants import TemplateParams, TemplateProbe

__all__ = ["assistant_start_marker", "user_start_marker"]

# C's tolower: ASCII letters only
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _before(text: str, needle: str) -> str:
    """``text`` up to ``needle`` (all of it when absent, as ``substr(0, npos)``)."""
    pos = text.find(needle)
    return text if pos < 0 else text[:pos]


def assistant_start_marker(probe: TemplateProbe, reasoning: ReasoningAnalysis) -> str:
    """What an assistant turn adds before its content, reasoning markers cut off."""
    cmp = probe.compare(TemplateParams(messages=[user()]), messages=[user(), assistant()])
    if cmp is None:
        return ""
    prefix = _before(cmp.diff.right, ASSISTANT_MSG)
    for marker in (reasoning.start, reasoning.end):
        if marker and trim_whitespace(marker) in prefix:
            prefix = _before(prefix, trim_whitespace(marker))
    return trim_whitespace(prefix)


def user_start_marker(probe: TemplateProbe) -> str:
    """What a user turn adds before its content: no messages vs one user message (or, when a
    template refuses an empty conversation, a second user turn after an exchange). Leading markers
    that look like end markers (the previous turn's) are dropped."""
    cmp = probe.compare(TemplateParams(messages=[]), messages=[user()])
    if cmp is None:
        exchange = [user(USER_MSG_TWO), assistant()]
        cmp = probe.compare(TemplateParams(messages=exchange), messages=[*exchange, user()])
        if cmp is None:
            return ""
    text = cmp.diff.right
    if ASSISTANT_MSG in text:
        text = text[text.find(ASSISTANT_MSG) + len(ASSISTANT_MSG):]
    out: list[str] = []
    seen_marker = False
    for seg in segmentize_markers(_before(text, USER_MSG)):
        if not seen_marker:
            lower = seg.value.translate(_ASCII_LOWER)
            if seg.type == MARKER and ("end" in lower or "close" in lower):
                continue
            if seg.type == TEXT and not trim_whitespace(seg.value):
                continue
        seen_marker |= seg.type == MARKER
        out.append(seg.value)
    return trim_whitespace("".join(out))
