"""Deviation 4: reasoning trimmed per thought, escaped ``\\n`` / ``\\r`` decoded.

Upstream concatenates the text of every reasoning node as parsed, so the whitespace before
``</think>`` stays ("Plan it.\\n"). Here each thought (one ``reasoning`` node of the parse tree) is
trimmed of C-locale whitespace on both ends, and, except for the Qwen3-Coder XML family, an escaped
``\\n`` or ``\\r`` (backslash + letter) becomes a newline / carriage return first. Non-empty thoughts
are joined by :data:`THOUGHT_SEPARATOR` (upstream glues them: "First. Second." reads "First.Second."
once trimmed). A start tag the model repeats at the start of a thought the generation prompt opened
(``<think>\n<think>\nPlan.``: R1-Distill, Qwen 3.5, MiniMax-M2, ...) is dropped, as the
specification's parse drops it; upstream keeps it in the reasoning (:func:`drop_repeated_start`).

Enters: the AST nodes of a parse (``ParseResult.nodes``) and the upstream message built from them.
Leaves: the thoughts (raw texts), and the reasoning text as the final message carries it; for a
stream, the part of a still-open thought that no later text can change (:func:`stable_open_thought`).
Raises nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ...peg.ast import AstNode
from ..peg_mappers import visit_top_tags

__all__ = ["THOUGHT_SEPARATOR", "WHITESPACE", "clean_thought", "content_and_thoughts", "drop_repeated_start",
           "forced_start_tag", "join_thoughts", "stable_open_thought", "thoughts", "unescape"]

#: what separates two thoughts once each is trimmed
THOUGHT_SEPARATOR = "\n\n"
#: C ``isspace`` in the "C" locale: upstream's notion of whitespace
WHITESPACE = " \t\n\v\f\r"

_ESCAPED = re.compile(r"\\[nr]")
_DECODED = {"\\n": "\n", "\\r": "\r"}


def unescape(text: str) -> str:
    """``\\n`` -> newline, ``\\r`` -> carriage return (two-character escapes, left to right)."""
    if "\\" not in text:
        return text
    return _ESCAPED.sub(lambda m: _DECODED[m.group()], text)


def thoughts(nodes: Iterable[AstNode]) -> list[str]:
    """The text of each reasoning node, in order (see :func:`content_and_thoughts`)."""
    return content_and_thoughts(nodes)[1]


def content_and_thoughts(nodes: Iterable[AstNode]) -> tuple[str, list[str]]:
    """The content and the text of each reasoning node, found top-down as every mapper finds them
    (a reasoning, content or tool node is not descended): what a stream shows, without mapping the
    tool calls (the whole message is mapped once, at the end)."""
    content: list[str] = []
    out: list[str] = []
    visit_top_tags(nodes, content, out, lambda _tool: None)
    return "".join(content), out


def forced_start_tag(start_tag: str, generation_prompt: str) -> str:
    """The thinking start tag when the generation prompt ends with it (the output starts inside a
    thought the prompt opened), else ""."""
    tag = start_tag.strip(WHITESPACE)
    return tag if tag and generation_prompt.rstrip(WHITESPACE).endswith(tag) else ""


def drop_repeated_start(text: str, tag: str) -> str:
    """A forced-open thought's text without the start tag ``tag`` the model wrote again at its start
    (after whitespace, if any); ``text`` itself when it does not start so (or ``tag`` is "")."""
    if not tag:
        return text
    stripped = text.lstrip(WHITESPACE)
    return stripped[len(tag):] if stripped.startswith(tag) else text


def clean_thought(text: str, decode: bool) -> str:
    """A finished thought: decoded (``decode``), then trimmed."""
    return (unescape(text) if decode else text).strip(WHITESPACE)


def join_thoughts(texts: Iterable[str]) -> str:
    """Cleaned thoughts as one reasoning text (empty ones dropped)."""
    return THOUGHT_SEPARATOR.join(t for t in texts if t)


def stable_open_thought(text: str, decode: bool) -> str:
    """The part of a thought still being written that the finished thought will start with: leading
    whitespace dropped, trailing whitespace (and, when decoding, a trailing backslash that may start
    an escape) held back."""
    if decode:
        if text.endswith("\\"):
            text = text[:-1]  # it may pair with the next character
        text = unescape(text)
    return text.strip(WHITESPACE)
