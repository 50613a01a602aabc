"""One chat request's answer, in a shape both llama-server and ``engine.create()`` can fill.

Both sides are read from OpenAI JSON: the streamed ``chat.completion.chunk`` objects and the
non-streamed ``chat.completion`` of the same request. llama-server produces them over HTTP; llamact's
chunks and results produce them with ``to_openai()``. Reading both through :func:`answer_from_openai`
means the comparison sees one normalization: tool-call ids (random on the server) are renamed by
order of appearance, per response; the completion id, ``created``, model name and fingerprint are
dropped (checked for consistency only).

Token-level facts come from elsewhere: the server's prompt tokens are its ``/tokenize`` of its own
``/apply-template`` prompt (add_special and parse_special, as the chat endpoint tokenizes), its
generated tokens the ``__verbose.tokens`` of the non-streamed request; llamact reports its own.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..json_types import Json


@dataclass
class ChatAnswer:
    """What one side answered. ``message`` is reassembled from the stream, ``final`` is the
    non-streamed completion's message; both canonical (:func:`canonical_message`)."""

    prompt: str
    prompt_tokens: list[int]
    tokens: list[int]                  # generated token ids, the end-of-generation token included
    text: str                          # the raw generated text, before parsing
    chunks: list[Json]                 # per streamed choice: {"delta": ..., "finish_reason": ...}
    message: Json                      # reassembled from ``chunks``
    finish_reason: str | None          # the stream's
    final: Json                        # the non-streamed message
    final_json: Json                   # the non-streamed message as sent (ids renamed)
    final_finish_reason: str | None
    usage: Json                        # the stream's usage chunk
    timings: Json                      # the stream's last timings
    problems: list[str] = field(default_factory=list)   # inconsistencies seen while reading
    raw_chunks: list[Json] = field(default_factory=list)

    def to_json(self, with_raw: bool = False) -> Json:
        out = asdict(self)
        if not with_raw:
            out.pop("raw_chunks")
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ChatAnswer:
        values = dict(data)
        values.setdefault("raw_chunks", [])
        values.setdefault("problems", [])
        return cls(**values)


class _IdNames:
    """Renames tool-call ids by order of first appearance: ``call#0``, ``call#1``, ..."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    def __call__(self, value: str) -> str:
        if value not in self._names:
            self._names[value] = f"call#{len(self._names)}"
        return self._names[value]


def _rename_ids(tool_calls: Json, names: _IdNames) -> Json:
    out = copy.deepcopy(tool_calls)
    for call in out or []:
        if isinstance(call, dict) and isinstance(call.get("id"), str) and call["id"]:
            call["id"] = names(call["id"])
    return out


def canonical_message(message: Mapping[str, Any] | None) -> Json:
    """content / reasoning_content as strings ("" when absent or null), tool calls as
    ``{"id", "name", "arguments"}`` in order."""
    message = message or {}
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        calls.append({"id": call.get("id") or "", "name": function.get("name") or "",
                      "arguments": function.get("arguments") or ""})
    return {"content": message.get("content") or "", "reasoning_content": message.get("reasoning_content") or "",
            "tool_calls": calls}


def reassemble(deltas: Sequence[Mapping[str, Any]]) -> Json:
    """The message a client builds from streamed deltas (OpenAI's rules: text appended, tool calls
    keyed by ``index``, their name and arguments appended, the first id kept)."""
    content, reasoning = [], []
    calls: dict[int, dict[str, str]] = {}
    for delta in deltas:
        if isinstance(delta.get("content"), str):
            content.append(delta["content"])
        if isinstance(delta.get("reasoning_content"), str):
            reasoning.append(delta["reasoning_content"])
        for part in delta.get("tool_calls") or []:
            call = calls.setdefault(int(part.get("index", 0)), {"id": "", "name": "", "arguments": ""})
            if part.get("id") and not call["id"]:
                call["id"] = part["id"]
            function = part.get("function") or {}
            call["name"] += function.get("name") or ""
            call["arguments"] += function.get("arguments") or ""
    return {"content": "".join(content), "reasoning_content": "".join(reasoning),
            "tool_calls": [calls[i] for i in sorted(calls)]}


def answer_from_openai(chunks: Sequence[Mapping[str, Any]], completion: Mapping[str, Any], *, prompt: str,
                       prompt_tokens: Sequence[int], tokens: Sequence[int], text: str) -> ChatAnswer:
    """A :class:`ChatAnswer` from the OpenAI JSON of one streamed and one non-streamed run."""
    problems: list[str] = []
    names = _IdNames()
    normalized: list[Json] = []
    finish_reason: str | None = None
    usage: Json = None
    timings: Json = None
    completion_ids = {c.get("id") for c in chunks}
    if len(completion_ids) > 1:
        problems.append(f"the stream's chunks carry {len(completion_ids)} different completion ids")
    for i, chunk in enumerate(chunks):
        if chunk.get("object") != "chat.completion.chunk":
            problems.append(f"chunk {i}: object is {chunk.get('object')!r}")
        if "timings" in chunk:
            timings = chunk["timings"]
        if "usage" in chunk and chunk["usage"] is not None:
            if usage is not None:
                problems.append(f"chunk {i}: a second usage")
            usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if len(choices) > 1:
            problems.append(f"chunk {i}: {len(choices)} choices")
        for choice in choices:
            delta = dict(choice.get("delta") or {})
            if "tool_calls" in delta:
                delta["tool_calls"] = _rename_ids(delta["tool_calls"], names)
            if finish_reason is not None:
                problems.append(f"chunk {i}: a choice after finish_reason {finish_reason!r}")
            if choice.get("finish_reason") is not None:
                finish_reason = choice["finish_reason"]
            normalized.append({"delta": delta, "finish_reason": choice.get("finish_reason")})
    if usage is None:
        problems.append("the stream has no usage chunk")

    final_choices = completion.get("choices") or [{}]
    final_raw = dict(final_choices[0].get("message") or {})
    if "tool_calls" in final_raw:
        final_raw["tool_calls"] = _rename_ids(final_raw["tool_calls"], _IdNames())
    return ChatAnswer(
        prompt=prompt, prompt_tokens=list(prompt_tokens), tokens=list(tokens), text=text,
        chunks=normalized, message=reassemble([c["delta"] for c in normalized]), finish_reason=finish_reason,
        final=canonical_message(final_raw), final_json=final_raw,
        final_finish_reason=final_choices[0].get("finish_reason"),
        usage=usage, timings=timings, problems=problems, raw_chunks=[dict(c) for c in chunks],
    )
