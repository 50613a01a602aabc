"""Calls a model wrote in its content, outside the template's envelope (deviation 17).

    scan = ContentScan(reader, inline=False)     # inline: tool_choice "required" or a named tool
    scan.view(content)      # while streaming: the content without the calls found so far, cut where
                            # a call may still be starting (what a stream may send of it)
    scan.finish(content)    # at the end: (content without the calls, the calls, the rules used)

What is a call here (each only when every call it holds validates against the tools, see
``reader``): a Markdown code fence whose body is calls (`FENCED_BLOCK`; never closed:
`MISSING_CLOSE` too); a JSON value on lines of its own, starting a line, that is calls
(`BARE_JSON`); a Python call ``f(a=1)`` of a tool (or a name variant of it, see ``reader``) on a
line of its own (`PYTHON_CALL`); and with
``inline``, a call's JSON object anywhere in the text (`INLINE_JSON`). A call is taken out with its
line(s) and the whitespace after it; everything else stays content, in order. A fence whose body
cannot begin a call (by its first character) is content at once, up to its closing fence.

While streaming, the text from where a call may be starting (a line's first characters, an open
fence or bracket) is held until it is decided; decisions depend only on the text they cover, so
what :meth:`view` returned is always a prefix of what :meth:`finish` returns for the whole content
(deviation 5's rule). The scan resumes where the last one stopped when the content grew by
appending, so a stream costs linear time overall.

Enters: a ``CallReader``, then the content (growing). Leaves: content text, ``ToolCall`` values,
rule names. Raises nothing.
"""

from __future__ import annotations

import re

from ..messages import ToolCall
from .jsonish import MAX_CALL_TEXT, Brackets
from .reader import CallReader, Read
from .rules import BARE_JSON, FENCED_BLOCK, INLINE_JSON, MISSING_CLOSE, PYTHON_CALL

__all__ = ["ContentScan"]

_FENCE = "```"
_CLOSING_FENCE = re.compile(r"^[ \t]*```[ \t]*(?:\n|\Z)", re.M)
_IDENTIFIER = re.compile(r"[A-Za-z_][\w.\-]*")
_ENVELOPE = re.compile(r"\A\s*<tool_call>(.*)</tool_call>\s*\Z", re.S)
_SPACE = " \t\n\r\f\v"


class _Undecided(Exception):
    """The text at ``hold`` may still become a call: the scan stops there until more text comes."""

    def __init__(self, hold: int) -> None:
        super().__init__(hold)
        self.hold = hold


class _State:
    """One pass over a content text: what is decided (``pos``, ``kept``), what was found."""

    def __init__(self, start: int, prefix: str) -> None:
        self.pos = start
        self.kept: list[str] = [prefix] if prefix else []
        self.calls: list[ToolCall] = []
        self.rules: list[str] = []
        self.after_call = False       # whitespace after a call goes with it
        self.in_fence = False         # inside a fence that holds no call: content up to its close
        self.brackets: Brackets | None = None   # the undecided bracketed candidate's scan, resumed

    def keep(self, text: str, end: int) -> None:
        if end > self.pos:
            self.kept.append(text[self.pos:end])
        self.pos = end

    def take(self, read: Read, end: int, *rules: str) -> None:
        self.calls.extend(read.calls)
        for rule in (*rules, *sorted(read.rules)):
            if rule not in self.rules:
                self.rules.append(rule)
        self.pos = end
        self.after_call = True


class ContentScan:
    """See the module docstring. ``start``: the content before it is kept as it is (a continued
    message's prefill, which the client wrote)."""

    def __init__(self, reader: CallReader, *, inline: bool = False, start: int = 0) -> None:
        self._reader = reader
        self._inline = inline
        self._start = start
        self._text = ""
        self._state: _State | None = None
        self._view = ""

    def view(self, content: str) -> str:
        """The content a stream may send now (see the module docstring)."""
        state = self._state
        if state is None or not content.startswith(self._text[:state.pos]):
            state = self._state = _State(self._start, content[:self._start])
        self._text = content
        hold = self._run(state, content, final=False)
        kept = "".join(state.kept)
        state.kept = [kept] if kept else []
        self._view = kept + content[state.pos:hold]
        return self._view

    def finish(self, content: str) -> tuple[str, list[ToolCall], list[str]]:
        """The whole content's scan: (content without the calls, the calls, the rules used)."""
        state = _State(self._start, content[:self._start])
        self._run(state, content, final=True)
        return "".join(state.kept), state.calls, state.rules

    # -- the scan ----------------------------------------------------------------------------------

    def _run(self, state: _State, text: str, final: bool) -> int:
        """Decide as much of ``text`` as can be; the offset where undecided text starts."""
        n = len(text)
        try:
            while state.pos < n:
                if state.after_call:
                    j = state.pos
                    while j < n and text[j] in _SPACE:
                        j += 1
                    if j == n and not final:
                        return state.pos
                    state.pos, state.after_call = j, False
                    continue
                line_start = text.rfind("\n", 0, state.pos) + 1
                head = line_start
                while head < n and text[head] in " \t":
                    head += 1
                if head >= state.pos and not state.in_fence:
                    self._line(state, text, line_start, head, final)
                else:
                    self._rest_of_line(state, text, final)
        except _Undecided as held:
            return held.hold
        state.brackets = None
        return n

    def _rest_of_line(self, state: _State, text: str, final: bool) -> None:
        """Content up to the end of the current line (inline calls looked for in it)."""
        n = len(text)
        end = text.find("\n", state.pos)
        end = n if end < 0 else end + 1
        if state.in_fence:
            line_start = text.rfind("\n", 0, state.pos) + 1
            if end == n and not text.endswith("\n") and not final:
                if _FENCE.startswith(text[line_start:n].strip(" \t")):
                    raise _Undecided(state.pos)   # the line may still become the closing fence
            elif _CLOSING_FENCE.match(text, line_start) is not None:
                state.in_fence = False
            state.keep(text, end)
            return
        if self._inline and self._inline_call(state, text, end, final):
            return
        state.keep(text, end)

    def _line(self, state: _State, text: str, line_start: int, head: int, final: bool) -> None:
        """A line from its first character: a fence, a bracketed value, a tool's name, or content."""
        n = len(text)
        if head == n:
            if not final:
                raise _Undecided(line_start)
            state.keep(text, n)
            return
        c = text[head]
        if c == "`":
            self._fence(state, text, line_start, head, final)
        elif c in "{[":
            self._bracketed(state, text, line_start, head, head, final, BARE_JSON)
        else:
            m = _IDENTIFIER.match(text, head)
            name = m.group() if m is not None else ""
            if name and m is not None and m.end() == n and not final and self._reader.may_name(name):
                raise _Undecided(line_start)
            if name and self._reader.resolve(name) is not None and text.startswith("(", head + len(name)):
                self._bracketed(state, text, line_start, head, head + len(name), final, PYTHON_CALL)
            else:
                self._rest_of_line(state, text, final)

    def _fence(self, state: _State, text: str, line_start: int, head: int, final: bool) -> None:
        n = len(text)
        if not text.startswith(_FENCE, head):
            if _FENCE.startswith(text[head:n]) and not final:
                raise _Undecided(line_start)   # "`" or "``" at the end: a fence may be opening
            self._rest_of_line(state, text, final)
            return
        opened = text.find("\n", head)
        if opened < 0 or "`" in text[head + 3:opened]:
            if opened < 0 and not final:
                raise _Undecided(line_start)
            self._rest_of_line(state, text, final)   # inline code, or a fence line with nothing after it
            return
        body_start = opened + 1
        first = body_start
        while first < n and text[first] in _SPACE:
            first += 1
        if first < n and not self._may_begin_call(text, first, final):
            state.in_fence = True   # a fence of something else: content up to its close
            state.keep(text, body_start)
            return
        close = _CLOSING_FENCE.search(text, body_start)
        if close is not None and close.end() == n and not text.endswith("\n") and not final:
            close = None   # "```" at the very end: the line may still go on
        rules: tuple[str, ...]
        if close is None:
            if not final:
                if n - body_start > MAX_CALL_TEXT:
                    state.in_fence = True
                    state.keep(text, body_start)
                    return
                raise _Undecided(line_start)
            body, end, rules = text[body_start:], n, (FENCED_BLOCK, MISSING_CLOSE)
        else:
            body, end, rules = text[body_start:close.start()], close.end(), (FENCED_BLOCK,)
        envelope = _ENVELOPE.match(body)
        read = self._reader.read(envelope.group(1) if envelope is not None else body)
        if read is None:
            state.keep(text, end)
        else:
            state.take(read, end, *rules)

    def _may_begin_call(self, text: str, at: int, final: bool) -> bool:
        c = text[at]
        if c in "{[<":
            return True
        m = _IDENTIFIER.match(text, at)
        if m is None:
            return False
        name = m.group()
        if m.end() == len(text) and not final:
            return self._reader.may_name(name)
        return self._reader.resolve(name) is not None

    def _bracketed(self, state: _State, text: str, line_start: int, head: int, opening: int, final: bool,
                   rule: str) -> None:
        """A value (or a call's argument list) opening at ``opening`` on a line of its own."""
        n = len(text)
        brackets = state.brackets
        if brackets is None or brackets.start != opening:
            brackets = state.brackets = Brackets(opening)
        end = brackets.end(text)
        if end is None:
            if not final and n - head <= MAX_CALL_TEXT:
                raise _Undecided(line_start)
            state.brackets = None
            self._rest_of_line(state, text, final)
            return
        state.brackets = None
        line_end = text.find("\n", max(end, head))
        if end < 0 or text[end:n if line_end < 0 else line_end].strip(_SPACE):
            self._rest_of_line(state, text, final)   # not a value, or more text follows it on its line
            return
        if line_end < 0 and not final:
            raise _Undecided(line_start)   # its line may still go on
        read = self._reader.read(text[head:end])
        if read is None:
            state.keep(text, end)
            return
        state.take(read, n if line_end < 0 else line_end + 1, PYTHON_CALL if PYTHON_CALL in read.rules else rule)

    def _inline_call(self, state: _State, text: str, end: int, final: bool) -> bool:
        """``inline``: the first call object in ``text[state.pos:end]`` taken (True), or none there."""
        at = text.find("{", state.pos, end)
        while at >= 0:
            brackets = state.brackets
            if brackets is None or brackets.start != at:
                brackets = state.brackets = Brackets(at)
            close = brackets.end(text)
            if close is None and not final and len(text) - at <= MAX_CALL_TEXT:
                state.keep(text, at)
                raise _Undecided(at)
            state.brackets = None
            read = self._reader.read(text[at:close]) if close is not None and close > 0 else None
            if read is not None and close is not None:
                state.keep(text, at)
                state.take(read, close, INLINE_JSON)
                return True
            at = text.find("{", at + 1, end)
        return False
