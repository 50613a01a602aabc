"""A streamed ``/v1/messages`` reply: the chat stream's chunks as llama-server's Anthropic events.

    events = AnthropicEvents(stream, model)     # stream: the ChatStream being read
    for name, data in events.render(chunk): ...  # ("message_start", {...}), ("content_block_delta", {...}), ...
    anthropic_sse((name, data)) -> b"event: NAME\\ndata: {...}\\n\\n"

What enters: the ``ChatChunk`` values of one ``create()`` stream, in order; with
``upstream_compat=True`` each delta chunk is one of upstream's message diffs (by default the deltas
are deviation 5's, none marked ``final_parse``; a recovery report rides on ``message_delta`` as
``llamact``, deviation 17). What leaves: the events of server-task.cpp's
``server_task_result_cmpl_partial::to_json_anthropic`` (per token) and
``server_task_result_cmpl_final::to_json_anthropic_stream`` (at the end), quirks and all:

* ``message_start`` with the first token (the chunk with the role), its usage the prompt's;
* a block opens when its first delta comes -- thinking at index 0, text at 1 once any thought was
  seen (else 0), a call at (thought seen) + (text opened) + its index -- and deltas follow;
* the final parse's deltas are rendered with every block counted as not yet open (llama-server's
  final result keeps no state), so a delta there opens its block again; their indexes use the final
  message (thought, text, calls) instead;
* then, from the final message: ``signature_delta`` (empty) and ``content_block_stop`` for a
  thought, ``content_block_stop`` for the text and for each call, ``message_delta`` (stop reason,
  stop sequence, the output tokens) and ``message_stop``. No ``[DONE]``.
"""

from __future__ import annotations

import json
from typing import Any

from ...json_types import Json
from ..http.sse import Framing
from .wire import stop_reason, usage_json

Event = tuple[str, Json]

__all__ = ["ANTHROPIC_FRAMING", "AnthropicEvents", "anthropic_sse"]


def anthropic_sse(event: Event) -> bytes:
    """``format_anthropic_sse``: an ``event:`` line, then the ``data:`` line."""
    name, data = event
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {name}\ndata: {text}\n\n".encode()


def _event(name: str, **fields: Json) -> Event:
    return name, {"type": name, **fields}


def _start(index: int, block: Json) -> Event:
    return _event("content_block_start", index=index, content_block=block)


def _delta(index: int, delta: Json) -> Event:
    return _event("content_block_delta", index=index, delta=delta)


class _Blocks:
    """Which blocks one of llama-server's results has opened, and how it numbers them."""

    def __init__(self, thinking: bool = False, text: bool = False) -> None:
        self.thinking = thinking
        self.text = text

    def render(self, chunk: Any, has_thinking: bool, call_offset: int, names: Any) -> list[Event]:
        """One diff's events. ``call_offset`` numbers the calls, ``names(delta)`` gives the id and
        name of a call to open, or None where the diff opens none."""
        out: list[Event] = []
        if chunk.thinking:
            if not self.thinking:
                out.append(_start(0, {"type": "thinking", "thinking": ""}))
                self.thinking = True
            out.append(_delta(0, {"type": "thinking_delta", "thinking": chunk.thinking}))
        if chunk.content:
            index = int(has_thinking)
            if not self.text:
                out.append(_start(index, {"type": "text", "text": ""}))
                self.text = True
            out.append(_delta(index, {"type": "text_delta", "text": chunk.content}))
        for call in chunk.tool_calls:
            index = int(has_thinking) + int(self.text) + call.index if call_offset < 0 else call_offset + call.index
            opened = names(call)
            if opened is not None:
                out.append(_start(index, {"type": "tool_use", "id": opened[0], "name": opened[1]}))
            if call.arguments:
                out.append(_delta(index, {"type": "input_json_delta", "partial_json": call.arguments}))
        return out


class AnthropicEvents:
    """See the module docstring. ``stream`` gives the prompt's token counts, the final message and
    the stop string."""

    def __init__(self, stream: Any, model: str) -> None:
        self.stream = stream
        self.model = model
        self.message_id = stream.id
        self._blocks = _Blocks()
        self._has_thinking = False      # any thought so far (llama-server's anthropic_has_reasoning)
        self._final: list[Any] = []     # the final parse's chunks, rendered with the finish

    def render(self, chunk: Any) -> list[Event]:
        if chunk.role is not None:
            return [self._message_start()]
        if chunk.finish_reason is not None:
            return self._finish(chunk)
        if chunk.final_parse:
            self._final.append(chunk)
            return []
        self._has_thinking = self._has_thinking or bool(chunk.thinking)
        return self._blocks.render(chunk, self._has_thinking, -1,
                                   lambda call: (call.id or "", call.name) if call.name else None)

    def _message_start(self) -> Event:
        usage = usage_json(self.stream.n_prompt, self.stream.n_cached, 0)
        return _event("message_start", message={
            "id": self.message_id, "type": "message", "role": "assistant", "content": [], "model": self.model,
            "stop_reason": None, "stop_sequence": None, "usage": usage})

    def _finish(self, chunk: Any) -> list[Event]:
        message = self.stream.message
        has_thinking, has_text = bool(message.reasoning_content), bool(message.content)
        first_call = int(has_thinking) + int(has_text)
        opened: set[int] = set()

        def names(call: Any) -> tuple[str, str] | None:
            if call.index in opened:
                return None
            opened.add(call.index)
            whole = message.tool_calls[call.index]
            return whole.id, whole.name

        final = _Blocks()
        out: list[Event] = []
        for delta in self._final:
            out.extend(final.render(delta, has_thinking, first_call, names))
        if has_thinking:
            out.append(_delta(0, {"type": "signature_delta", "signature": ""}))
            out.append(_event("content_block_stop", index=0))
        if has_text:
            out.append(_event("content_block_stop", index=int(has_thinking)))
        out.extend(_event("content_block_stop", index=first_call + i) for i in range(len(message.tool_calls)))
        stop_string = self.stream.stop_string
        out.append(_event("message_delta", delta={"stop_reason": stop_reason(chunk.finish_reason),
                                                  "stop_sequence": stop_string or None},
                          usage={"output_tokens": chunk.usage.completion_tokens if chunk.usage else 0}))
        if chunk.recovery is not None:   # llamact's extension field (docs/design.md deviation 17)
            out[-1][1]["llamact"] = chunk.recovery.to_json()
        out.append(_event("message_stop"))
        return out


def _error_event(error: Json) -> bytes:
    return anthropic_sse(("error", error))


# llama-server's framing on this route: event lines, an "error" event carrying the error object, no [DONE]
ANTHROPIC_FRAMING = Framing(anthropic_sse, _error_event, b"")
