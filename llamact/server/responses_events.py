"""A chat completion written as an OpenAI Responses answer, as llama-server writes it at the pin
(server-task.cpp: ``to_json_oaicompat_resp``, ``to_json_oaicompat_resp_stream`` and the partial
results' ``to_json_oaicompat_resp``).

    ids = ResponseIds()
    response_json(completion, ids, model) -> the ``response`` object of a reply not streamed
    events = ResponseEvents(ids, model); events.of(chunk, message) -> the named events of one chunk

What enters: the chat path's ``ChatCompletion`` (not streamed) or its ``ChatChunk`` values (streamed)
with the final ``ChatMessage``. What leaves, not streamed: output items -- a ``reasoning`` item with the
thought, a ``message`` with one ``output_text`` part, a ``function_call`` per call (``fc_`` and
``call_`` plus the call's id) -- status ``completed`` and the usage (input / output tokens, the cached
ones). Streamed: ``response.created`` and ``response.in_progress`` with the first chunk; as the deltas
come, ``output_item.added`` for the thought, the message (with its ``content_part.added``) and each
call, ``reasoning_text.delta`` / ``output_text.delta`` / ``function_call_arguments.delta``; at the end
the ``*.done`` events of the final message and ``response.completed`` with the output, usage and
timings (and llamact's extension field ``llamact`` when the reply needed recovery, deviation 17).
Upstream's quirks are kept: the final parse's deltas are not streamed (only the ``done`` events
show them; ``upstream_compat`` streams only: the default stream's last deltas are ordinary ones),
the streamed reasoning item has no status, no ``sequence_number``, and no ``[DONE]`` after the last
event.

One addition (docs/design.md, the Responses route): every event about an output item carries its
``output_index`` (the item's place in the output, in the order the items were added) and every
event about a part its ``content_index`` (0: one part an item). OpenAI's events have both and
llama-server's have neither; the OpenAI SDK's own stream helper (``client.responses.stream``)
places each delta by them and fails without them.
"""

from __future__ import annotations

import time
from typing import Any

from ..chat.streaming import gen_tool_call_id

__all__ = ["ResponseEvents", "ResponseIds", "response_json"]

Json = Any


class ResponseIds:
    """The ids one answer uses: the response's, its reasoning item's, its message's."""

    def __init__(self) -> None:
        self.response = "resp_" + gen_tool_call_id()
        self.reasoning = "rs_" + gen_tool_call_id()
        self.message = "msg_" + gen_tool_call_id()


def _usage(usage: Any) -> Json:
    return {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens, "input_tokens_details": {"cached_tokens": usage.cached_tokens}}


def _reasoning_item(item_id: str, text: str) -> Json:
    return {"id": item_id, "summary": [], "type": "reasoning", "content": [{"text": text, "type": "reasoning_text"}],
            "encrypted_content": ""}


def _text_part(text: str) -> Json:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def _call_item(call: Any) -> Json:
    return {"id": "fc_" + call.id, "type": "function_call", "status": "completed", "arguments": call.arguments,
            "call_id": "call_" + call.id, "name": call.name}


def response_json(completion: Any, ids: ResponseIds, model: str) -> Json:
    """The ``response`` object of a reply not streamed (an output whose every parse was empty is
    its raw text, as in the chat answer: ``ChatCompletion.message`` is already that)."""
    message = completion.message
    output: list[Json] = []
    if message.reasoning_content:
        output.append({**_reasoning_item("rs_" + gen_tool_call_id(), message.reasoning_content),
                       "status": "completed"})
    if message.content:
        output.append({"content": [_text_part(message.content)], "id": "msg_" + gen_tool_call_id(),
                       "role": message.role or "assistant", "status": "completed", "type": "message"})
    output.extend(_call_item(call) for call in message.tool_calls)
    now = int(time.time())
    out = {"completed_at": now, "created_at": now, "id": ids.response, "model": model, "object": "response",
           "output": output, "status": "completed", "usage": _usage(completion.usage)}
    if completion.recovery is not None:   # llamact's extension field (docs/design.md deviation 17)
        out["llamact"] = completion.recovery.to_json()
    return out


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

    def _at(self, item_id: str) -> int:
        """The item's ``output_index`` (the next one for an item not seen yet)."""
        return self._indices.setdefault(item_id, len(self._indices))

    def _status(self, name: str) -> Json:
        return _event(name, response={"id": self.ids.response, "object": "response", "status": "in_progress"})

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
            item = _reasoning_item(self.ids.reasoning, message.reasoning_content)
            out.append(_event("response.output_item.done", item=item, output_index=self._at(self.ids.reasoning)))
            output.append(item)
        if message.content:
            at = self._at(self.ids.message)
            out.append(_event("response.output_text.done", item_id=self.ids.message, text=message.content,
                              output_index=at, content_index=0))
            part = _text_part(message.content)
            out.append(_event("response.content_part.done", item_id=self.ids.message, part=part, output_index=at,
                              content_index=0))
            item = {"type": "message", "status": "completed", "id": self.ids.message, "content": [part],
                    "role": "assistant"}
            out.append(_event("response.output_item.done", item=item, output_index=at))
            output.append(item)
        for call in message.tool_calls:
            item = _call_item(call)
            out.append(_event("response.output_item.done", item=item, output_index=self._at(item["id"])))
            output.append(item)
        completed = _event("response.completed", response={
            "id": self.ids.response, "object": "response", "created_at": int(time.time()), "status": "completed",
            "model": self.model, "output": output, "usage": _usage(chunk.usage)})
        if chunk.timings is not None:
            completed["data"]["timings"] = chunk.timings.to_openai()
        if chunk.recovery is not None:
            completed["data"]["response"]["llamact"] = chunk.recovery.to_json()
        out.append(completed)
        return out
