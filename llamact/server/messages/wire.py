"""The Messages family's wire format (Anthropic's Messages API on the chat path): a ``/v1/messages``
body read as llama-server reads it, and the whole reply written in its shape (the stream:
``messages.stream``).

    call = read_messages(body, defaults)       # a ChatCall, as read_chat gives for /v1/chat/completions
    message_json(completion, id, model, stop_string) -> {"id", "type": "message", "content": [...], ...}

What enters: the decoded body. llama-server does not read it field by field: it rewrites it into an
OpenAI chat body (``server_chat_convert_anthropic_to_oai``, tools/server/server-chat.cpp) and reads
that as any chat request. ``to_chat_body`` is that rewrite, rule for rule and with its leniency
(``json_value``: a field of the wrong type is its default; blocks of unknown types are dropped; only
the listed fields reach the chat body, so ``seed`` or ``cache_prompt`` on this route do nothing), then
``read_chat`` reads the result, so every check and error of the chat route applies. Two differences,
both llamact's rules elsewhere: a body llama-server refuses with 500 ("'messages' is required", an
image without a multimodal model: ``chat.wire.check_messages``) is a 400 with its text
(docs/design.md deviation 12), and ``tool_choice: {"type": "tool", "name": N}`` forces a call of N
(deviation 9) where llama-server reads it as "required" (any tool).

What leaves: the reply as ``to_json_anthropic`` writes it (server-task.cpp): a thinking block (empty
signature), a text block, one tool_use block per call; ``stop_reason`` "end_turn" / "tool_use" for an
end token or a stop string, "max_tokens" otherwise (llama-server never says "stop_sequence": a stop
string is "end_turn" with ``stop_sequence`` set); usage counts the cached prompt tokens apart.
Errors keep llama-server's OpenAI shape on this route too (``ex_wrapper`` / ``format_error_response``).
"""

from __future__ import annotations

import json
from typing import Any

from ...json_types import Json
from ..chat.wire import read_chat
from ..http.errors import RequestError
from ..wire.request import ChatCall, RequestDefaults

__all__ = ["message_json", "read_messages", "stop_reason", "to_chat_body", "tool_input",
           "usage_json"]

DEFAULT_MAX_TOKENS = 4096          # "required in Anthropic, but we're permissive"
DEFAULT_THINKING_BUDGET = 10000
_PASSED_THROUGH = ("temperature", "top_p", "top_k", "stream", "chat_template_kwargs", "upstream_compat")
_BILLING_HEADER = "x-anthropic-billing-header:"


def _value(obj: Json, key: str, kind: type | tuple[type, ...] | None, default: Json) -> Json:
    """``json_value(obj, key, default)``: the default when ``obj`` is not an object, the key is absent
    or null, or (for a typed default) the value has another type."""
    if not isinstance(obj, dict) or obj.get(key) is None:
        return default
    value = obj[key]
    if kind is None:
        return value
    if kind is int and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return default
    if kind is int:
        return int(value)
    return value if isinstance(value, kind) else default


def _text(obj: Json, key: str) -> str:
    return str(_value(obj, key, str, ""))


def _dump(value: Json) -> str:
    """nlohmann's ``dump()``: compact, UTF-8 as is, keys in their order."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def normalize_billing_header(text: str) -> str:
    """Claude Code's ``x-anthropic-billing-header`` system prompt changes its ``cch=`` stamp on every
    request, which defeats the prompt cache; llama-server writes the five characters as ``fffff``."""
    if not text.startswith(_BILLING_HEADER):
        return text
    at = text.find("cch=", len(_BILLING_HEADER))
    if at < 0:
        return text
    start = at + 4
    if start + 5 < len(text) and text[start + 5] == ";":
        return text[:start] + "fffff" + text[start + 5:]
    return text


def _image_part(block: Json) -> Json | None:
    source = _value(block, "source", dict, {})
    kind = _text(source, "type")
    if kind == "base64":
        media_type = _value(source, "media_type", str, "image/jpeg")
        return {"type": "image_url", "image_url": {"url": f"data:{media_type};base64,{_text(source, 'data')}"}}
    if kind == "url":
        return {"type": "image_url", "image_url": {"url": _text(source, "url")}}
    return None


def _tool_result(block: Json) -> Json:
    call_id = _text(block, "tool_use_id")
    content = _value(block, "content", None, None)
    if isinstance(content, str):
        return {"role": "tool", "tool_call_id": call_id, "content": content}
    if not isinstance(content, list):
        return {"role": "tool", "tool_call_id": call_id, "content": ""}
    text, parts, images = "", [], False
    for part in content:
        kind = _text(part, "type")
        if kind == "text":
            piece = _text(part, "text")
            text += piece
            parts.append({"type": "text", "text": piece})
        elif kind == "image":
            images = True
            image = _image_part(part)
            if image is not None:
                parts.append(image)
    # text only: one string, what every template can show
    return {"role": "tool", "tool_call_id": call_id, "content": parts if images else text}


def _message(message: Json) -> list[Json]:
    """One Anthropic message as OpenAI messages: its text, thinking and tool_use blocks as one
    message, then one tool message per tool_result block (after it, as llama-server orders them)."""
    role = _text(message, "role")
    if not isinstance(message, dict) or "content" not in message:
        return [] if role == "assistant" else [message]
    content = message["content"]
    if not isinstance(content, list):
        return [message]
    parts: list[Json] = []
    calls: list[Json] = []
    results: list[Json] = []
    reasoning = ""
    for block in content:
        kind = _text(block, "type")
        if kind == "text":
            parts.append(block)
        elif kind == "thinking":
            reasoning += _text(block, "thinking")
        elif kind == "image":
            image = _image_part(block)
            if image is not None:
                parts.append(image)
        elif kind == "tool_use":
            calls.append({"id": _text(block, "id"), "type": "function", "function": {
                "name": _text(block, "name"), "arguments": _dump(_value(block, "input", None, {}))}})
        elif kind == "tool_result":
            results.append(_tool_result(block))
    out: list[Json] = []
    if parts or calls or reasoning:
        converted: Json = {"role": role, "content": parts or ""}
        if calls:
            converted["tool_calls"] = calls
        if reasoning:
            converted["reasoning_content"] = reasoning
        out.append(converted)
    return out + results


def _system(system: Json) -> str:
    if isinstance(system, str):
        return normalize_billing_header(system)
    if isinstance(system, list):
        return "".join(normalize_billing_header(_text(block, "text")) for block in system
                       if _text(block, "type") == "text")
    return ""


def to_chat_body(body: Json) -> Json:
    """The OpenAI chat body llama-server makes of an Anthropic one (see the module docstring)."""
    if not isinstance(body, dict) or "messages" not in body:
        raise RequestError("'messages' is required")   # llama-server: 500 (a std::runtime_error)
    messages: list[Json] = []
    if body.get("system") is not None:
        messages.append({"role": "system", "content": _system(body["system"])})
    if isinstance(body["messages"], list):
        for message in body["messages"]:
            messages.extend(_message(message))
    out: Json = {"messages": messages}
    if isinstance(body.get("tools"), list):
        out["tools"] = [{"type": "function", "function": {
            "name": _text(tool, "name"), "description": _text(tool, "description"),
            "parameters": tool["input_schema"] if isinstance(tool, dict) and "input_schema" in tool else {}}}
            for tool in body["tools"]]
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        kind = _text(choice, "type")
        if kind == "auto":
            out["tool_choice"] = "auto"
        elif kind == "any":
            out["tool_choice"] = "required"
        elif kind == "tool":   # llama-server: "required"; llamact forces the named call (deviation 9)
            name = choice.get("name")
            out["tool_choice"] = {"type": "function", "function": {"name": name}} if isinstance(name, str) \
                else "required"
    if "stop_sequences" in body:
        out["stop"] = body["stop_sequences"]
    out["max_tokens"] = body["max_tokens"] if "max_tokens" in body else DEFAULT_MAX_TOKENS
    for key in _PASSED_THROUGH:
        if key in body:
            out[key] = body[key]
    if "thinking" in body:
        thinking = _value(body, "thinking", None, {})
        if _text(thinking, "type") == "enabled":
            out["thinking_budget_tokens"] = _value(thinking, "budget_tokens", int, DEFAULT_THINKING_BUDGET)
    return out


def read_messages(body: Json, defaults: RequestDefaults) -> ChatCall:
    """A ``/v1/messages`` (or ``/v1/messages/count_tokens``) body, read as the chat route reads the
    chat body llama-server makes of it."""
    return read_chat(to_chat_body(body), defaults)


# -- the reply ----------------------------------------------------------------------------------------


def stop_reason(finish_reason: str | None) -> str:
    """llama-server's ``stop_reason``: an end token or a stop string is "end_turn" ("tool_use" with
    calls), anything else "max_tokens"."""
    return {"stop": "end_turn", "tool_calls": "tool_use"}.get(finish_reason or "", "max_tokens")


def tool_input(arguments: str) -> Json:
    """A call's ``input``: its arguments parsed, ``{}`` where they are not JSON (a call cut short)."""
    def refuse(name: str) -> Any:   # NaN / Infinity: Python's json takes them, nlohmann does not
        raise ValueError(name)

    try:
        return json.loads(arguments, parse_constant=refuse)
    except ValueError:
        return {}


def usage_json(n_prompt: int, n_cached: int, n_output: int) -> Json:
    return {"cache_read_input_tokens": n_cached, "input_tokens": n_prompt - n_cached, "output_tokens": n_output}


def message_json(completion: Any, message_id: str, model: str, stop_string: str | None) -> Json:
    """A ``ChatCompletion`` as llama-server's ``to_json_anthropic`` writes it."""
    message = completion.message
    content: list[Json] = []
    if message.reasoning_content:
        content.append({"type": "thinking", "thinking": message.reasoning_content, "signature": ""})
    if message.content:
        content.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": tool_input(call.arguments)})
    usage = completion.usage
    out = {"id": message_id, "type": "message", "role": "assistant", "content": content, "model": model,
           "stop_reason": stop_reason(completion.finish_reason), "stop_sequence": stop_string or None,
           "usage": usage_json(usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens)}
    if completion.recovery is not None:   # llamact's extension field (docs/design.md deviation 17)
        out["llamact"] = completion.recovery.to_json()
    return out
