"""The default (non-upstream) chat stream: docs/design.md deviations 2-5 and 17 over upstream's parser.

Per token the output is parsed as upstream parses it (resumed, never from scratch), mapping only
content and thoughts; what is sent is the *stable* part of them (deviation 5, :mod:`.holdback`),
reasoning cleaned per thought (deviation 4, :mod:`.reasoning`: trimmed, escapes decoded, a start
tag repeated at the start of a forced-open thought dropped). With tools and a Qwen XML or
Hermes layout, content is held from the first tool-call opening until generation ends: only the
final parse tells a call from an envelope that stays content. A partial parse that fails sends
nothing and the stream goes on (upstream ends the stream with an error there).

When generation ends, the final message is built: upstream's final parse, with Qwen XML calls
validated against the tools (deviation 2, :mod:`.qwen_xml`) and double-brace Hermes calls
repaired (deviation 3, :mod:`.double_braces`). What of its content and reasoning the stream has
not sent yet is sent, then every tool call whole, with its id (the model's own, else a new one).
A generation cut short (``max_tokens``, full context, cancelled) sends no tool call and its final
message has none; if its final parse fails, the last partial parse that found something stands.

Deviation 17 (:mod:`..recovery`): with tools, the content a stream sends leaves out the calls the
model wrote outside the envelope and holds text where one may be starting (a code fence, a line
opening a JSON value or a tool's name); malformed Hermes envelopes are rewritten before the final
parse; the final message takes those calls out of its content. A complete output whose final parse
fails still gives a message: the text before the tool-call region as the parser reads it, each
envelope read on its own (valid calls; the rest content), or without a layout the text after the
thought as content; the parse error is reported (``recovery.report()``) and logged, not raised.

A thought that never closes is reasoning in the final parse as in the partial ones (the final
parse is the last partial parse, bar the error handling), and it is trimmed like any thought, so
it streams as it ends. The one way the stream and the final message can still disagree: a parse
that gives text as content (or reasoning) at one token and takes it back at a later one, beyond
the hold-back rules. Nothing can be taken back, so nothing more is sent for that field; the final
message is the parse, and :attr:`DefaultStream.diverged` names the field. (No vendored template
does this on the property tests' outputs; the tests show it on a parser built to.)

Enters: the apply result, the tools, the output piece by piece. Leaves: :class:`ChatDelta` lists
and the final message. Raises nothing for what the model wrote.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ..deltas import TRUNCATING_STOPS, ChatDelta, ToolCallDelta
from ..messages import ChatMessage
from ..oai import ChatTool
from ..output_parser import ChatParseError
from ..recovery import Recovery
from ..result import ChatTemplateResult
from .double_braces import repair_double_braces
from .holdback import Markers, advance
from .layouts import HERMES, XML, ToolCallLayout, detect_layout, envelopes, hold_markers
from .qwen_xml import XmlTools, read_region
from .reasoning import (
    THOUGHT_SEPARATOR,
    WHITESPACE,
    clean_thought,
    content_and_thoughts,
    drop_repeated_start,
    forced_start_tag,
    join_thoughts,
    stable_open_thought,
    thoughts,
    unescape,
)

__all__ = ["DefaultStream"]

QWEN3_CODER_FAMILY = "qwen3_coder_xml"
log = logging.getLogger("llamact.chat")


class DefaultStream:
    """One generation's stream with llamact's deviations (see the module docstring)."""

    def __init__(self, result: ChatTemplateResult, tools: Sequence[ChatTool], new_id: Callable[[], str],
                 is_continuation: bool = False, echo: bool = False, tool_choice: str = "auto",
                 named_tool: str | None = None) -> None:
        self._parser = result.output_parser()
        self._thinking = (result.thinking_start_tag, tuple(result.thinking_end_tags),
                          bool(result.thinking_start_tag)
                          and result.generation_prompt.rstrip(WHITESPACE).endswith(result.thinking_start_tag))
        self._new_id = new_id
        layout = detect_layout(result)
        self._decode = not (result.family == QWEN3_CODER_FAMILY or (layout is not None and layout.qwen3_coder))
        # a start tag the model repeats at the start of a thought the prompt opened is dropped (deviation 4)
        self._repeated_start = forced_start_tag(result.thinking_start_tag, result.generation_prompt)
        # the deviations on tool calls apply when calls are validated against tools
        self._layout: ToolCallLayout | None = layout if tools else None
        self._xml_tools = XmlTools(tools) if self._layout is not None and self._layout.kind == XML else None
        self._markers = Markers(hold_markers(result, bool(tools)))
        self._data = b""  # the output so far, UTF-8: appended per token, never re-encoded
        self._sent_content = ""
        self._sent_reasoning = ""
        self._message: ChatMessage | None = None
        # the last partial parse with something in it: what a cut-short generation falls back to
        # when its final parse fails (a partial parse can lose what an earlier one found)
        self._last_good: tuple[str, list[str]] | None = None
        self.diverged: frozenset[str] = frozenset()
        prefill = 0
        if is_continuation and not echo:
            # the prefill is the client's already: the stream continues after it
            start = self._parser.parse("", True)
            self._sent_content = start.content
            self._sent_reasoning = self._reasoning(self._thoughts(start), open_end=True, keep_trailing=True)
            prefill = len(start.content)
        self.recovery = Recovery(tools, tool_choice, named_tool, start=prefill)

    @property
    def text(self) -> str:
        return self._data.decode("utf-8")

    @property
    def message(self) -> ChatMessage:
        """The final message after :meth:`finish`; before, what has been sent."""
        if self._message is not None:
            return self._message
        return ChatMessage(role="assistant", content=self._sent_content, reasoning_content=self._sent_reasoning)

    def feed(self, piece: str) -> list[ChatDelta]:
        """The deltas the output text ``piece`` (appended) makes stable."""
        if not piece:
            return []
        self._data += piece.encode("utf-8")
        result = self._parser.run(self._data)
        if result.fail and result.end == 0:
            return []  # upstream's partial parse throws here; a later text may parse again
        # content and thoughts only: the tool calls are mapped once, from the final parse
        content, texts = content_and_thoughts(result.nodes)
        if content or texts:
            self._last_good = (content, texts)
        out: list[ChatDelta] = []
        reasoning = self._markers.stable(self._reasoning(texts, open_end=True), hold_leading=False)
        delta = advance(self._sent_reasoning, reasoning)
        if delta:
            self._sent_reasoning = reasoning
            out.append(ChatDelta(thinking=delta))
        if self._layout is not None:
            content = content[:self._layout.content_cut(content)]
        content = self._markers.stable(self.recovery.view(content))
        delta = advance(self._sent_content, content)
        if delta:
            self._sent_content = content
            out.append(ChatDelta(content=delta))
        return out

    def finish(self, stop_reason: str) -> list[ChatDelta]:
        """The rest of the final message: unsent content and reasoning, then the tool calls."""
        truncated = stop_reason in TRUNCATING_STOPS
        msg = self._final(truncated)
        if truncated:
            msg.tool_calls = []
        for call in msg.tool_calls:
            call.id = call.id or self._new_id()
        out: list[ChatDelta] = []
        diverged = set()
        for field, sent, final in (("thinking", self._sent_reasoning, msg.reasoning_content),
                                   ("content", self._sent_content, msg.content)):
            if not final.startswith(sent):
                diverged.add(field)
            elif len(final) > len(sent):
                rest = final[len(sent):]
                out.append(ChatDelta(thinking=rest) if field == "thinking" else ChatDelta(content=rest))
        out += [ChatDelta(tool_calls=(ToolCallDelta(i, c.id, c.name, c.arguments),))
                for i, c in enumerate(msg.tool_calls)]
        self.diverged = frozenset(diverged)
        self._message = msg
        return out

    # -- the final message ---------------------------------------------------------------------

    def _final(self, truncated: bool) -> ChatMessage:
        if truncated:
            return self._final_parse(True)
        try:
            msg = self._final_parse(False)
        except ChatParseError as exc:
            self.recovery.parse_error = str(exc)
            msg = self._recover_failed(self.text)
        msg = self.recovery.take_calls(msg)
        report = self.recovery.report()
        if report is not None and report.parse_error is not None:
            log.warning("the final parse of a reply failed (%s): answered with what could be read (%d tool "
                        "call(s), recovered by %s), the rest as content", report.parse_error, len(msg.tool_calls),
                        ", ".join(report.recovered) or "no rule")
        return msg

    def _final_parse(self, truncated: bool) -> ChatMessage:
        text, layout = self.text, self._layout
        region = layout.region_start(text) if layout is not None and not truncated else None
        if layout is not None and region is not None:
            if layout.kind == XML and self._xml_tools is not None:
                msg = self._parse_final(text[:region], truncated)
                calls, extra = read_region(text, region, layout, self._xml_tools)
                msg.content += extra
                msg.tool_calls = calls
                return msg
            if layout.kind == HERMES:
                repair = repair_double_braces(text, region, layout)
                fixed = repair.text
                start = layout.region_start(fixed)
                if start is not None:
                    fixed = self.recovery.repair(fixed, envelopes(fixed, start, layout),
                                                 (layout.open_literal, layout.close))
                msg = self._parse_final(fixed, truncated)
                msg.content = repair.content(msg.content)
                return msg
        return self._parse_final(text, truncated)

    def _parse_final(self, text: str, truncated: bool) -> ChatMessage:
        try:
            msg = self._parser.parse(text, False)
        except ChatParseError:
            if not truncated:
                raise
            # output cut short: what it holds so far, or what the last partial parse found
            try:
                msg = self._parser.parse(text, True)
            except ChatParseError:
                msg = ChatMessage()
            if msg.empty() and self._last_good is not None:
                content, texts = self._last_good
                return ChatMessage(role="assistant", content=content,
                                   reasoning_content=self._reasoning(texts, open_end=False))
        msg.reasoning_content = self._reasoning(self._thoughts(msg), open_end=False)
        return msg

    def _recover_failed(self, text: str) -> ChatMessage:
        """A message from a complete output whose final parse failed (deviation 17): with a layout,
        the text before the tool-call region as the parser reads it and each envelope on its own;
        else the thought and the rest of the text as content."""
        layout = self._layout
        region = layout.region_start(text) if layout is not None else None
        if layout is None or region is None:
            return self._lenient(text)
        msg = self._lenient(text[:region])
        if layout.kind == XML and self._xml_tools is not None:
            calls, extra = read_region(text, region, layout, self._xml_tools)
        else:
            calls, extra = self.recovery.read_envelopes(text, region, envelopes(text, region, layout))
        msg.content += extra
        msg.tool_calls = calls
        return msg

    def _lenient(self, text: str) -> ChatMessage:
        """``text`` read without failing: its thought as a partial parse reads it, the rest of the
        text as content (its leading whitespace too only where the stream sent some)."""
        try:
            msg = self._parser.parse(text, True)
        except ChatParseError:
            msg = ChatMessage(role="assistant")
        reasoning = self._reasoning(self._thoughts(msg), open_end=False) if msg.reasoning_content else ""
        rest = text[self._thought_end(text):]
        if not self._sent_content[:1].isspace():
            rest = rest.lstrip(WHITESPACE)
        return ChatMessage(role="assistant", content=rest, reasoning_content=reasoning)

    def _thought_end(self, text: str) -> int:
        """Where the text after the thought starts (0 without one; the end when it never closes)."""
        start, ends, forced = self._thinking
        if not start:
            return 0
        if forced:
            begin = 0
        else:
            stripped = text.lstrip(WHITESPACE)
            if not stripped.startswith(start):
                return 0
            begin = len(text) - len(stripped) + len(start)
        found = [(at, tag) for tag in ends if (at := text.find(tag, begin)) >= 0]
        if not found:
            return len(text)
        at, tag = min(found)
        return at + len(tag)

    # -- reasoning ---------------------------------------------------------------------------------

    def _thoughts(self, msg: ChatMessage) -> list[str]:
        """The texts of the thoughts of the last parse (which gave ``msg``)."""
        if not msg.reasoning_content:
            return []
        result = self._parser.last_result
        texts = thoughts(result.nodes) if result is not None else []
        if sum(map(len, texts)) != len(msg.reasoning_content):
            texts = [msg.reasoning_content]  # a mapper that reads reasoning otherwise: one thought
        return texts

    def _reasoning(self, texts: list[str], open_end: bool, keep_trailing: bool = False) -> str:
        """The thoughts ``texts`` cleaned and joined; ``open_end``: the last one may go on (only its
        stable part counts; ``keep_trailing`` keeps its trailing whitespace)."""
        if not texts:
            return ""
        texts = [drop_repeated_start(texts[0], self._repeated_start), *texts[1:]]
        done = [clean_thought(t, self._decode) for t in texts[:-1]]
        if not open_end:
            return join_thoughts(done + [clean_thought(texts[-1], self._decode)])
        if keep_trailing:
            last = (unescape(texts[-1]) if self._decode else texts[-1]).lstrip(WHITESPACE)
        else:
            last = stable_open_thought(texts[-1], self._decode)
        head = join_thoughts(done)
        return head + THOUGHT_SEPARATOR + last if head and last else head or last
