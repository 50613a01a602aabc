"""The streaming half of a chat completion: model output in, content / thinking / tool-call deltas out.

    parser = ChatStreamParser(result, tools=tools)         # result: LlamaEngine.chat_template(...)
    for piece in token_texts:                               # the text each token appends
        for delta in parser.feed(piece): ...                # ChatDelta(content, thinking, tool_calls)
    for delta in parser.finish("eog"): ...                  # flush; the final parse
    parser.message, parser.finish_reason                    # the final message; "stop" / "tool_calls" / ...

Two modes:

* ``upstream_compat=True``: exactly llama-server's ``task_result_state::update_chat_msg``
  (tools/server/server-task.cpp): the output so far is parsed after each piece (partially; finally
  not), an empty message is skipped, calls get stable ids (the model's own, else a new one), and
  the deltas are upstream's ``compute_diffs`` -- one :class:`ChatDelta` per upstream diff, i.e. per
  OpenAI chunk. Where upstream throws, this raises the same typed error with upstream's message:
  :class:`ChatParseError` (the parse; llama-server then ends the stream with a server error) or
  :class:`ChatDiffError` (a parse that does not extend the previous one). The stream state is
  upstream's after the throw (the text appended; after a diff error, the new message kept).
  A ``"cancelled"`` finish does no final parse: llama-server sends no final result then.
* default: docs/design.md deviations 2-5 (:mod:`llamact.chat.deviations`): streamed content and thinking
  equal the final message, tool calls are validated and sent whole at the end; and deviation 17
  (:mod:`llamact.chat.recovery`): calls written outside the envelope or malformed are recovered when
  they validate, and a final parse that fails gives a message all the same (:attr:`ChatStreamParser.recovery`
  reports the error and the rules used).

Either way the parse resumes where appended text cannot change it (``ChatOutputParser``), never
from scratch per token. Raises :class:`LlamaStateException` on use after :meth:`finish` and
:class:`LlamaInferenceException` for an unknown stop reason.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import LlamaInferenceException, LlamaStateException
from .deltas import STOP_CANCELLED, STOP_REASONS, ChatDelta, ToolCallDelta, finish_reason
from .deviations.stream import DefaultStream
from .diffs import ChatDiffError, compute_diffs, set_tool_call_ids
from .messages import ChatMessage
from .oai import ChatTool, parse_tools
from .output_parser import ChatParseError
from .recovery import RecoveryReport
from .result import ChatTemplateResult

__all__ = ["ChatDelta", "ChatDiffError", "ChatParseError", "ChatStreamParser", "RecoveryReport", "ToolCallDelta",
           "finish_reason", "gen_tool_call_id"]

_ID_ALPHABET = string.digits + string.ascii_uppercase + string.ascii_lowercase


def gen_tool_call_id() -> str:
    """A fresh tool-call id as llama-server makes one (``gen_tool_call_id``): 32 random characters
    from [0-9A-Za-z]."""
    chars: list[str] = []
    while len(chars) < 32:   # one read of the system's randomness (not one per character)
        # bytes below 248 = 4 x 62 map evenly onto the alphabet; the rest are dropped
        chars += [_ID_ALPHABET[b % 62] for b in secrets.token_bytes(48) if b < 248]
    return "".join(chars[:32])


class _UpstreamStream:
    """llama-server's ``task_result_state`` for one generation (see the module docstring)."""

    def __init__(self, result: ChatTemplateResult, new_id: Callable[[], str], is_continuation: bool,
                 echo: bool, stream: bool = True) -> None:
        self._parser = result.output_parser()
        self._new_id = new_id
        self._stream = stream
        self._ids: list[str] = []
        self._data = b""  # the output so far, UTF-8: appended per token, never re-encoded
        self._parsed = False  # the last parse of the current text succeeded
        self.message = ChatMessage()
        if is_continuation and not echo:
            # upstream's constructor: no delta for the assistant prefill
            self.message = self._parser.parse("", True)
        self.diverged: frozenset[str] = frozenset()

    @property
    def text(self) -> str:
        return self._data.decode("utf-8")

    def feed(self, piece: str) -> list[ChatDelta]:
        self._data += piece.encode("utf-8")
        if not self._stream:
            return []  # a non-streamed request is parsed once, at the end
        if not piece and self._parsed:
            return []  # the same text parses to the same message: upstream's diffs are empty
        return self._update(True)

    def finish(self, stop_reason: str) -> list[ChatDelta]:
        if stop_reason == STOP_CANCELLED:
            return []
        return self._update(False)

    def _update(self, is_partial: bool) -> list[ChatDelta]:
        self._parsed = False
        new = self._parser.parse(self._data, is_partial)
        self._parsed = True
        if new.empty():
            return []
        set_tool_call_ids(new, self._ids, self._new_id)
        previous, self.message = self.message, new
        return [ChatDelta.from_diff(d) for d in compute_diffs(previous, new)]


class ChatStreamParser:
    """Parses one generation's output as it streams (see the module docstring).

    ``result`` is the request's apply result, ``tools`` the request's tools (``ChatTool`` values or
    OpenAI tool dicts; they validate Qwen XML calls in the default mode), ``is_continuation`` /
    ``echo`` as llama-server's (a continued final message is not streamed again unless echoed),
    ``tool_call_id`` makes ids for calls that bring none (default: :func:`gen_tool_call_id`).
    ``stream=False`` (upstream mode): llama-server's non-streamed request, whose output is parsed
    once, when it is complete (no partial parse can fail it; :meth:`feed` only collects).
    ``tool_choice`` ("auto", "required", "none") and ``named_tool`` (a named choice's function) are
    the request's: they say which calls the default mode recovers (deviation 17).
    """

    def __init__(self, result: ChatTemplateResult, *, tools: Sequence[ChatTool] | Sequence[Any] = (),
                 upstream_compat: bool = False, is_continuation: bool = False, echo: bool = False,
                 tool_call_id: Callable[[], str] | None = None, stream: bool = True, tool_choice: str = "auto",
                 named_tool: str | None = None) -> None:
        new_id = tool_call_id or gen_tool_call_id
        self.upstream_compat = upstream_compat
        self._impl: _UpstreamStream | DefaultStream
        if upstream_compat:
            self._impl = _UpstreamStream(result, new_id, is_continuation, echo, stream)
        else:
            self._impl = DefaultStream(result, _tools(tools), new_id, is_continuation, echo, tool_choice, named_tool)
        self._stop_reason: str | None = None

    @property
    def text(self) -> str:
        """The output text fed so far."""
        return self._impl.text

    @property
    def message(self) -> ChatMessage:
        """The current message: the final one after :meth:`finish`. Upstream mode: the last
        non-empty parse, with ids; default mode: what has been streamed so far."""
        return self._impl.message

    @property
    def response_message(self) -> ChatMessage:
        """The message of a whole (non-streamed) response: :attr:`message`, except that llama-server
        answers an output whose every parse was empty with the raw text as content
        (server-task.cpp ``to_json_oaicompat_chat``)."""
        message = self.message
        if self.upstream_compat and message.empty():
            return ChatMessage(role="assistant", content=self.text)
        return message

    @property
    def stop_reason(self) -> str | None:
        return self._stop_reason

    @property
    def finish_reason(self) -> str | None:
        """llama-server's ``finish_reason`` for the final message (None before :meth:`finish`)."""
        if self._stop_reason is None:
            return None
        return finish_reason(self._stop_reason, self.message)

    @property
    def recovery(self) -> RecoveryReport | None:
        """Default mode, after :meth:`finish`: the final parse's error (it raised nothing) and the
        rules that recovered calls (deviation 17); None when the reply needed neither."""
        if self._stop_reason is None or isinstance(self._impl, _UpstreamStream):
            return None
        return self._impl.recovery.report()

    @property
    def diverged(self) -> frozenset[str]:
        """Default mode, after :meth:`finish`: the fields ("content", "thinking") whose final text
        did not extend what had been streamed (the documented exceptions of deviation 5)."""
        return self._impl.diverged

    def feed(self, piece: str) -> list[ChatDelta]:
        """The deltas after the text ``piece`` (one token's) is appended to the output. Upstream
        mode raises ChatParseError / ChatDiffError where llama-server fails."""
        if self._stop_reason is not None:
            raise LlamaStateException("this chat stream has finished: start a new ChatStreamParser",
                                      {"stop_reason": self._stop_reason})
        return self._impl.feed(piece)

    def finish(self, stop_reason: str) -> list[ChatDelta]:
        """The last deltas, from the final parse, once generation ended for ``stop_reason``: "eog",
        "stop_string", "max_tokens", "context_full" or "cancelled". Upstream mode raises
        ChatParseError when the final parse fails (as llama-server does) and ChatDiffError; the
        default mode answers with what it could read (:attr:`recovery`)."""
        if self._stop_reason is not None:
            raise LlamaStateException("this chat stream has already finished", {"stop_reason": self._stop_reason})
        if stop_reason not in STOP_REASONS:
            raise LlamaInferenceException(
                f"unknown stop reason {stop_reason!r}: use one of {', '.join(sorted(STOP_REASONS))}",
                {"stop_reason": stop_reason})
        self._stop_reason = stop_reason
        return self._impl.finish(stop_reason)


def _tools(tools: Sequence[Any]) -> list[ChatTool]:
    if all(isinstance(t, ChatTool) for t in tools):
        return list(tools)
    return parse_tools(list(tools))
