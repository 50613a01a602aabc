"""The default (non-upstream) chat stream: DESIGN.md deviations 2-5 over upstream's parser.

Per token the output is parsed as upstream parses it (resumed, never from scratch); what is sent is
the *stable* part of its content and reasoning (deviation 5, :mod:`.holdback`), reasoning cleaned
per thought (deviation 4, :mod:`.reasoning`). A partial parse that fails sends nothing and the
stream goes on (upstream ends the stream with an error there; the final parse decides).

When generation ends, the final message is built: upstream's final parse, with Qwen XML calls
validated against the tools (deviation 2, :mod:`.qwen_xml`) and double-brace Hermes calls
repaired (deviation 3, :mod:`.double_braces`). What of its content and reasoning the stream has
not sent yet is sent, then every tool call whole, with its id. A generation cut short
(``max_tokens``, full context, cancelled) sends no tool call, and the final message has none.

The one way the stream and the final message can disagree: the final parse's content or reasoning
does not start with what was already sent (e.g. a thought that never closes and that the final
parse returns as content). Nothing can be taken back, so nothing more is sent for that field; the
final message is the parse, and :attr:`DefaultStream.diverged` names the field.

Enters: the apply result, the tools, the output piece by piece. Leaves: :class:`ChatDelta` lists
and the final message. Raises :class:`ChatParseError` when the final parse fails (as upstream).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...peg.ast import AstNode
from ..deltas import TRUNCATING_STOPS, ChatDelta, ToolCallDelta
from ..messages import ChatMessage
from ..oai import ChatTool
from ..output_parser import ChatParseError
from ..result import ChatTemplateResult
from .double_braces import repair_double_braces
from .holdback import Markers, advance
from .layouts import HERMES, XML, ToolCallLayout, detect_layout
from .qwen_xml import XmlTools, read_region
from .reasoning import (
    THOUGHT_SEPARATOR,
    WHITESPACE,
    clean_thought,
    join_thoughts,
    stable_open_thought,
    thoughts,
    unescape,
)

__all__ = ["DefaultStream"]

QWEN3_CODER_FAMILY = "qwen3_coder_xml"


class DefaultStream:
    """One generation's stream with llamact's deviations (see the module docstring)."""

    def __init__(self, result: ChatTemplateResult, tools: Sequence[ChatTool], new_id: Callable[[], str],
                 is_continuation: bool = False, echo: bool = False) -> None:
        self._parser = result.output_parser()
        self._new_id = new_id
        layout = detect_layout(result)
        self._decode = not (result.family == QWEN3_CODER_FAMILY or (layout is not None and layout.qwen3_coder))
        # the deviations on tool calls apply when calls are validated against tools
        self._layout: ToolCallLayout | None = layout if tools else None
        self._xml_tools = XmlTools(tools) if self._layout is not None and self._layout.kind == XML else None
        markers = [result.thinking_start_tag, *result.thinking_end_tags]
        if tools:
            markers += [t.value for t in result.grammar_triggers if t.type in ("word", "token")]
        self._markers = Markers(markers)
        self._text = ""
        self._sent_content = ""
        self._sent_reasoning = ""
        self._message: ChatMessage | None = None
        self.diverged: frozenset[str] = frozenset()
        if is_continuation and not echo:
            # the prefill is the client's already: the stream continues after it
            start = self._parser.parse("", True)
            self._sent_content = start.content
            self._sent_reasoning = self._reasoning(start, self._nodes(), open_end=True, keep_trailing=True)

    @property
    def text(self) -> str:
        return self._text

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
        self._text += piece
        try:
            msg = self._parser.parse(self._text, True)
        except ChatParseError:
            return []  # a later text may parse again; the final parse decides
        out: list[ChatDelta] = []
        reasoning = self._markers.stable(self._reasoning(msg, self._nodes(), open_end=True), hold_leading=False)
        delta = advance(self._sent_reasoning, reasoning)
        if delta:
            self._sent_reasoning = reasoning
            out.append(ChatDelta(thinking=delta))
        content = self._markers.stable(msg.content)
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
        text, layout = self._text, self._layout
        region = layout.region_start(text) if layout is not None and not truncated else None
        if layout is not None and region is not None:
            if layout.kind == XML and self._xml_tools is not None:
                msg = self._parse_final(text[:region], truncated)
                calls, extra = read_region(text, region, layout, self._xml_tools)
                msg.content += extra
                msg.tool_calls = calls
                return msg
            if layout.kind == HERMES:
                fixed, stranded = repair_double_braces(text, region, layout)
                msg = self._parse_final(fixed, truncated)
                msg.content += stranded
                return msg
        return self._parse_final(text, truncated)

    def _parse_final(self, text: str, truncated: bool) -> ChatMessage:
        try:
            msg = self._parser.parse(text, False)
        except ChatParseError:
            if not truncated:
                raise
            msg = self._parser.parse(text, True)  # output cut short: what it holds so far
        msg.reasoning_content = self._reasoning(msg, self._nodes(), open_end=False)
        return msg

    # -- reasoning ---------------------------------------------------------------------------------

    def _nodes(self) -> tuple[AstNode, ...]:
        result = self._parser.last_result
        return result.nodes if result is not None else ()

    def _reasoning(self, msg: ChatMessage, nodes: tuple[AstNode, ...], open_end: bool,
                   keep_trailing: bool = False) -> str:
        """The message's reasoning cleaned per thought; ``open_end``: the last thought may go on
        (only its stable part counts; ``keep_trailing`` keeps its trailing whitespace)."""
        if not msg.reasoning_content:
            return ""
        texts = thoughts(nodes)
        if sum(map(len, texts)) != len(msg.reasoning_content):
            texts = [msg.reasoning_content]  # a mapper that reads reasoning otherwise: one thought
        done = [clean_thought(t, self._decode) for t in texts[:-1]]
        if not open_end:
            return join_thoughts(done + [clean_thought(texts[-1], self._decode)])
        if keep_trailing:
            last = (unescape(texts[-1]) if self._decode else texts[-1]).lstrip(WHITESPACE)
        else:
            last = stable_open_thought(texts[-1], self._decode)
        head = join_thoughts(done)
        return head + THOUGHT_SEPARATOR + last if head and last else head or last
