"""The runtime's streamed output as the text the model wrote, with cancellation and a clean close.

    pieces = RuntimeStream(chunks, cancel)          iterate for text pieces (one per token or so)
    conversation_text(chunks, channels)             a conversation's message chunks -> text
    session_text(responses)                         a session's responses -> text

What enters: the runtime wrapper's blocking iterator (``Conversation.send_message_async``: message
dicts; ``Session.run_decode_async``: ``Responses``) and the call that cancels it from any thread.
What leaves: the generated text, piece by piece, as llamact's parser expects it. A conversation's
model processor may split a channel (a thought) from the answer; its text is put back between the
channel's start and end markers from the bundle's metadata, so the template's reasoning format
parses it as it would parse raw output. Chunks that carry tool calls the runtime parsed itself
raise ``LlamaInferenceException``: llamact routes tools on such bundles to the rendered path.

``close()`` (also on garbage collection) cancels a generation still running and drains the
runtime's queue until its C++ thread has stopped calling back, so the runtime objects are never
freed under it. Errors the runtime reports mid-stream become ``LlamaInferenceException``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ...errors import LlamaInferenceException
from .bundle import Channel

__all__ = ["RuntimeStream", "conversation_text", "session_text"]


def conversation_text(chunks: Iterable[Any], channels: Sequence[Channel] = ()) -> Iterator[str]:
    """The text of a conversation's streamed message chunks (see the module docstring)."""
    by_name = {c.name: c for c in channels}
    open_channel: Channel | None = None
    for chunk in chunks:
        message = chunk.to_json() if hasattr(chunk, "to_json") else chunk
        if message.get("tool_calls"):
            raise LlamaInferenceException("the LiteRT-LM runtime parsed tool calls itself; llamact expected their "
                                          "text (report this with the bundle's model type)")
        for name, text in (message.get("channels") or {}).items():
            channel = by_name.get(name) or Channel(name, "", "", False)
            if open_channel is not channel:
                if open_channel is not None and open_channel.end:
                    yield open_channel.end
                open_channel = channel
                if channel.start:
                    yield channel.start
            if text:
                yield str(text)
        content = message.get("content")
        parts = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        text = "".join(str(p.get("text") or "") for p in parts if isinstance(p, dict) and p.get("type") == "text")
        if text:
            if open_channel is not None:
                if open_channel.end:
                    yield open_channel.end
                open_channel = None
            yield text
    if open_channel is not None and open_channel.end:
        yield open_channel.end


def session_text(responses: Iterable[Any]) -> Iterator[str]:
    for response in responses:
        for text in response.texts[:1]:
            if text:
                yield str(text)


class RuntimeStream:
    """Text pieces from a running generation (see the module docstring)."""

    def __init__(self, pieces: Iterator[str], cancel: Callable[[], None], release: Callable[[], None]) -> None:
        self._pieces = pieces
        self._cancel = cancel
        self._release: Callable[[], None] | None = release
        self.done = False

    def __iter__(self) -> RuntimeStream:
        return self

    def __next__(self) -> str:
        if self.done:
            raise StopIteration
        try:
            return next(self._pieces)
        except StopIteration:
            self.done = True
            self._finish()
            raise
        except RuntimeError as exc:   # the wrapper's report of an error mid-stream
            self.done = True
            self._finish()
            raise LlamaInferenceException(f"the LiteRT-LM runtime failed while generating: {exc}") from exc
        except BaseException:
            self.close()
            raise

    def cancel(self) -> None:
        """Stop the generation from any thread; the stream then ends."""
        self._cancel()

    def close(self) -> None:
        if not self.done:
            self.done = True
            self._cancel()
            try:
                for _ in self._pieces:   # until the runtime's thread reports the cancellation
                    pass
            except (RuntimeError, LlamaInferenceException):
                pass
        self._finish()

    def _finish(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
