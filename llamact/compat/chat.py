"""Chat completions in llama-cpp-python's shapes: ``Llama.create_chat_completion``.

    {"id": "chatcmpl-...", "object": "chat.completion", "created", "model",
     "choices": [{"index": 0, "message": {"role": "assistant", "content", ...}, "logprobs",
                  "finish_reason"}], "usage": {...}}

Streamed: ``chat.completion.chunk`` dicts, the first with ``delta: {"role": "assistant"}``, then
``{"content": ...}`` deltas, the last with ``delta: {}`` and the finish reason.

What is llamact's and better: the prompt is the model's own chat template as llama-server renders it
(not one of llama-cpp-python's hand-written ``chat_format`` guesses), tools reach the template, and
the reply is parsed as llama-server parses it: a tool call the model makes comes back in
``message.tool_calls`` (with ``function_call``, llama-cpp-python's legacy field, for the first) and
finish reason "tool_calls" whatever the tool choice (llama-cpp-python parses only a named one and
returns any other call as text); a reasoning model's thought is ``reasoning_content``, apart from
``content``. ``tool_choice`` "required" is llama-server's: its grammar lets content come first.
Calls a model writes outside its template's envelope (a fenced JSON block, ...) come back as calls
when they validate, and an output the parser cannot read is answered, not raised: the message (the
last chunk's delta) then has llamact's extension field ``llamact`` (docs/design.md deviation 17).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..chat.deltas import ToolCallDelta
from ..engine import ChatBackend, GenerationParams
from ..engine.chat_completion import ChatStream
from ..engine.chat_types import ChatChunk
from ..engine.logprobs import TokenLogprob
from ..errors import LlamaUnsupportedException
from ..json_types import JsonObject


def legacy_tools(functions: list[JsonObject] | None, function_call: Any, tools: Any,
                 tool_choice: Any) -> tuple[Any, Any]:
    """OpenAI's old ``functions`` / ``function_call`` as ``tools`` / ``tool_choice`` (as llama-cpp-python)."""
    if functions is not None:
        tools = [{"type": "function", "function": function} for function in functions]
    if function_call in ("none", "auto"):
        tool_choice = function_call
    elif isinstance(function_call, dict) and "name" in function_call:
        tool_choice = {"type": "function", "function": {"name": function_call["name"]}}
    return tools, tool_choice


def chat_completion(engine: ChatBackend, messages: Any, options: JsonObject, params: GenerationParams, model: str,
                    stream: bool) -> JsonObject | Iterator[JsonObject]:
    forced: str | None = None
    try:
        chat = engine.create(messages, params=params, **options)   # a bad request raises here, before iteration
    except LlamaUnsupportedException as exc:
        forced = _forced_tool(exc, options)
        if forced is None:
            raise
        chat = engine.create(messages, params=params, **_as_schema_request(options, forced))
    chunks = _chunks(chat, model, forced)
    return chunks if stream else _collect(chat, chunks, model, forced)


def _forced_tool(exc: LlamaUnsupportedException, options: JsonObject) -> str | None:
    """The named tool when llamact refused to force it because the template has no tool-call format
    (docs/design.md deviation 9); llama-cpp-python then constrains the reply to the tool's parameter
    schema and returns the JSON as the call, and so does this shim."""
    choice = options.get("tool_choice")
    name = exc.details.get("tool_choice")
    if not isinstance(choice, dict) or "family" not in exc.details or name != choice.get("function", {}).get("name"):
        return None
    return name if isinstance(name, str) else None


def _as_schema_request(options: JsonObject, name: str) -> JsonObject:
    tool = next(t for t in options["tools"] if t.get("function", {}).get("name") == name)
    schema = tool["function"].get("parameters") or {}
    rest = {k: v for k, v in options.items() if k not in ("tools", "tool_choice", "response_format")}
    return {**rest, "response_format": {"type": "json_object", "schema": schema}}


def _head(chat: ChatStream, model: str) -> JsonObject:
    return {"id": chat.id, "model": model, "created": chat.created, "object": "chat.completion.chunk"}


def _forced_call_id(chat: ChatStream, name: str) -> str:
    return f"call__0_{name}_{chat.id}"   # llama-cpp-python's id for a forced call


def _chunks(chat: ChatStream, model: str, forced: str | None = None) -> Iterator[JsonObject]:
    head = _head(chat, model)
    with chat:
        for chunk in chat:
            if forced is not None and chunk.content:   # the schema-constrained text is the call's arguments
                chunk = chunk._replace(content=None, tool_calls=(
                    ToolCallDelta(0, _forced_call_id(chat, forced), forced, chunk.content),))
            if forced is not None and chunk.finish_reason is not None:
                chunk = chunk._replace(finish_reason="tool_calls")
            delta = _delta(chunk)
            if forced is not None and (chunk.role is not None or chunk.finish_reason is not None):
                # llama-cpp-python's forced-call stream spells the opening and closing deltas' keys out
                delta = {"role": chunk.role, "content": None, "function_call": None, "tool_calls": None}
            if chunk.recovery is not None:   # llamact's extension field (docs/design.md deviation 17)
                delta = {**(delta or {}), "llamact": chunk.recovery.to_json()}
            if delta is None and chunk.finish_reason is None:
                continue
            yield {**head, "choices": [{"index": 0, "delta": delta or {}, "logprobs": _logprobs(chunk.logprobs),
                                        "finish_reason": chunk.finish_reason}]}


def _delta(chunk: ChatChunk) -> JsonObject | None:
    if chunk.role is not None:
        return {"role": chunk.role}
    delta: JsonObject = {}
    if chunk.thinking:
        delta["reasoning_content"] = chunk.thinking
    if chunk.content:
        delta["content"] = chunk.content
    if chunk.tool_calls:
        first = chunk.tool_calls[0]
        delta.update({"role": None, "content": delta.get("content"),
                      "function_call": {"name": first.name, "arguments": first.arguments},
                      "tool_calls": [_tool_call_delta(call) for call in chunk.tool_calls]})
    return delta or None


def _tool_call_delta(call: ToolCallDelta) -> JsonObject:
    return {"index": call.index, "id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": call.arguments}}


def _logprob_entry(entry: TokenLogprob) -> JsonObject:
    return {"token": entry.token, "bytes": list(entry.bytes), "logprob": entry.logprob,
            "top_logprobs": [{"token": alt.token, "logprob": alt.logprob, "bytes": list(alt.bytes)}
                             for alt in entry.top_logprobs]}


def _logprobs(entries: tuple[TokenLogprob, ...] | list[TokenLogprob] | None) -> JsonObject | None:
    if not entries:
        return None
    return {"content": [_logprob_entry(e) for e in entries], "refusal": None}


def _collect(chat: ChatStream, chunks: Iterator[JsonObject], model: str, forced: str | None = None) -> JsonObject:
    for _ in chunks:   # the same conversion as a stream's, run to its end
        pass
    reply = chat.completion()
    calls = [{"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
             for call in reply.tool_calls]
    content: str | None = reply.content
    if forced is not None:
        calls = [{"id": _forced_call_id(chat, forced), "type": "function",
                  "function": {"name": forced, "arguments": reply.content}}]
    message: JsonObject = {"role": "assistant",
                           "content": None if forced is not None or (calls and not content) else content}
    if reply.thinking:
        message["reasoning_content"] = reply.thinking
    if calls:
        message["function_call"] = dict(calls[0]["function"])
        message["tool_calls"] = calls
    if reply.recovery is not None:
        message["llamact"] = reply.recovery.to_json()
    n_generated = chat.n_generated
    return {
        "id": chat.id, "object": "chat.completion", "created": chat.created, "model": model,
        "choices": [{"index": 0, "message": message,
                     "logprobs": _logprobs(reply.logprobs) if reply.logprobs is not None else None,
                     "finish_reason": "tool_calls" if calls else reply.finish_reason}],
        "usage": {"prompt_tokens": chat.n_prompt, "completion_tokens": n_generated,
                  "total_tokens": chat.n_prompt + n_generated},
    }
