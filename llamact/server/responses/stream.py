"""A chat completion streamed as an OpenAI Responses answer, as llama-server writes it at the pin
(server-task.cpp: ``to_json_oaicompat_resp_stream`` and the partial results' ``to_json_oaicompat_resp``;
the answer not streamed, and the ids and items both share: ``responses.wire``).

    events = ResponseEvents(ids, model); events.of(chunk, message) -> the named events of one chunk

What enters: the chat path's ``ChatChunk`` values with the final ``ChatMessage``. What leaves:
``response.created`` and ``response.in_progress`` with the first chunk; as the deltas
come, ``output_item.added`` for the thought, the message (with its ``content_part.added``) and each
call, ``reasoning_text.delta`` / ``output_text.delta`` / ``function_call_arguments.delta``; at the end
the ``*.done`` events of the final message and ``response.completed`` with the output, usage and
timings (and llamact's extension field ``llamact`` when the reply needed recovery, deviation 17).
Upstream's quirks are kept: the final parse's deltas are not streamed (only the ``done`` events
show them; ``upstream_compat`` streams only: the default stream's last deltas are ordinary ones),
the streamed reasoning item has no status, no ``sequence_number``, and no ``[DONE]`` after the last
event.

Two additions (docs/design.md, the Responses route): every event about an output item carries its
``output_index`` (the item's place in the output, in the order the items were added) and every
event about a part its ``content_index`` (0: one part an item). OpenAI's events have both and
llama-server's have neither; the OpenAI SDK's own stream helper (``client.responses.stream``)
places each delta by them and fails without them. And ``response.created`` / ``response.in_progress``
carry ``created_at``, ``model`` and ``output: []`` beside upstream's ``id``, ``object`` and
``status``: the openai 2.x SDK's helper (which openai-agents' Responses model used before 3.x)
appends to that ``output`` and fails on its absence (``'NoneType' object has no attribute 'append'``).
"""

from __future__ import annotations

import time
from typing import Any

from ...json_types import Json
from .wire import ResponseIds, call_item, reasoning_item, text_part, usage_json

__all__ = ["ResponseEvents"]


def _event(name: str, **data: Json) -> Json:
    return {"event": name, "data": {"type": name, **data}}


class ResponseEvents:
    """The named events of one streamed answer, chunk by chunk (see the module docstring)."""

    def __init__(self, ids: ResponseIds, model: str) -> None:
        self.ids = ids
        self.model = model
        self._thinking = False     # the reasoning item was added
        self._text = False         # the message item and its part were added
        self._call_id = ""         # the call whose arguments stream now
        self._indices: dict[str, int] = {}   # output_index of each item, by id, in the order added
        self.created = int(time.time())

    def _at(self, item_id: str) -> int:
        """The item's ``output_index`` (the next one for an item not seen yet)."""
        return self._indices.setdefault(item_id, len(self._indices))

    def _status(self, name: str) -> Json:
        # created_at, model and an empty output beside upstream's three keys: the openai 2.x SDK's stream
        # helper appends each added item to the created response's output (None without it)
        return _event(name, response={"id": self.ids.response, "object": "response", "created_at": self.created,
                                      "status": "in_progress", "model": self.model, "output": []})

    def of(self, chunk: Any, message: Any) -> list[Json]:
        """The events of ``chunk``; ``message`` is the stream's message (read on the last chunk)."""
        if chunk.role is not None:
            return [self._status("response.created"), self._status("response.in_progress")]
        if chunk.finish_reason is not None:
            return self._done(chunk, message)
        if chunk.final_parse:   # the final parse's deltas: upstream's final result does not stream them
            return []
        out: list[Json] = []
        if chunk.thinking:
            if not self._thinking:
                self._thinking = True
                out.append(_event("response.output_item.added", item={
                    "id": self.ids.reasoning, "summary": [], "type": "reasoning", "content": [],
                    "encrypted_content": "", "status": "in_progress"}, output_index=self._at(self.ids.reasoning)))
            out.append(_event("response.reasoning_text.delta", delta=chunk.thinking, item_id=self.ids.reasoning,
                              output_index=self._at(self.ids.reasoning), content_index=0))
        if chunk.content:
            if not self._text:
                self._text = True
                out.append(_event("response.output_item.added", item={
                    "content": [], "id": self.ids.message, "role": "assistant", "status": "in_progress",
                    "type": "message"}, output_index=self._at(self.ids.message)))
                out.append(_event("response.content_part.added", item_id=self.ids.message,
                                  part={"type": "output_text", "text": ""}, output_index=self._at(self.ids.message),
                                  content_index=0))
            out.append(_event("response.output_text.delta", item_id=self.ids.message, delta=chunk.content,
                              output_index=self._at(self.ids.message), content_index=0))
        for call in chunk.tool_calls:
            if call.name:
                self._call_id = call.id or ""
                out.append(_event("response.output_item.added", item={
                    "id": "fc_" + self._call_id, "arguments": "", "call_id": "call_" + self._call_id,
                    "name": call.name, "type": "function_call", "status": "in_progress"},
                    output_index=self._at("fc_" + self._call_id)))
            if call.arguments:
                out.append(_event("response.function_call_arguments.delta", delta=call.arguments,
                                  item_id="fc_" + self._call_id, output_index=self._at("fc_" + self._call_id)))
        return out

    def _done(self, chunk: Any, message: Any) -> list[Json]:
        out: list[Json] = []
        output: list[Json] = []
        if message.reasoning_content:
            item = reasoning_item(self.ids.reasoning, message.reasoning_content)
            out.append(_event("response.output_item.done", item=item, output_index=self._at(self.ids.reasoning)))
            output.append(item)
        if message.content:
            at = self._at(self.ids.message)
            out.append(_event("response.output_text.done", item_id=self.ids.message, text=message.content,
                              output_index=at, content_index=0))
            part = text_part(message.content)
            out.append(_event("response.content_part.done", item_id=self.ids.message, part=part, output_index=at,
                              content_index=0))
            item = {"type": "message", "status": "completed", "id": self.ids.message, "content": [part],
                    "role": "assistant"}
            out.append(_event("response.output_item.done", item=item, output_index=at))
            output.append(item)
        for call in message.tool_calls:
            item = call_item(call)
            out.append(_event("response.output_item.done", item=item, output_index=self._at(item["id"])))
            output.append(item)
        completed = _event("response.completed", response={
            "id": self.ids.response, "object": "response", "created_at": self.created, "status": "completed",
            "model": self.model, "output": output, "usage": usage_json(chunk.usage)})
        if chunk.timings is not None:
            completed["data"]["timings"] = chunk.timings.to_openai()
        if chunk.recovery is not None:
            completed["data"]["response"]["llamact"] = chunk.recovery.to_json()
        out.append(completed)
        return out
