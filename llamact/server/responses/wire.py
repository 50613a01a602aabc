"""The Responses family's wire format: an OpenAI Responses body read as the chat body it stands for,
as llama-server reads it, and the answer not streamed in the Responses shape (the stream:
``responses.stream``).

    chat_body(body) -> dict                      the chat completions body (server-chat.cpp's conversion)
    read_responses(body, defaults) -> ChatCall   that body read by ``read_chat``: the chat path from here on
    ids = ResponseIds()
    response_json(completion, ids, model) -> the ``response`` object of a reply not streamed

What enters: the decoded JSON of ``POST /v1/responses`` (or ``/responses/input_tokens``). Converted
as ``server_chat_convert_responses_to_chatcmpl`` converts it at the pin: ``instructions`` becomes a
system message first; ``input`` -- a string (one user message) or a list of items: messages whose
content is a string or ``input_text`` / ``input_image`` / ``output_text`` / ``refusal`` parts,
``function_call`` and ``function_call_output`` items, ``reasoning`` items -- becomes the messages, an
assistant item after an assistant message merging into it (its content, its calls, its reasoning);
the flat ``{"type": "function", "name", ...}`` tools become chat tools (``strict`` true unless given),
other tool types are skipped; ``max_output_tokens`` becomes ``max_tokens``, ``reasoning.effort``
``reasoning_effort``. Every other field passes through as it is (``temperature``, ``stream``,
``tool_choice``, llama-server's own fields), so the chat reader applies the same defaults and checks.

Two fields llama-server leaves unread and llamact reads (docs/design.md, the Responses route): a
named ``tool_choice`` in Responses' flat shape ``{"type": "function", "name": N}`` is the chat
shape's named choice (deviation 9: the call is forced; upstream reads any object as "auto"), and
``text.format`` -- ``json_schema`` or ``json_object`` -- is the ``response_format`` of the reply
(upstream ignores it and the reply is unconstrained; a ``response_format`` given as well wins).

Errors: what upstream refuses with ``std::invalid_argument`` is a ``RequestError`` (400) with its
message; what it refuses with another exception (a JSON type error) is a 400 too (deviation 12).

The answer not streamed (``to_json_oaicompat_resp`` of server-task.cpp), from the chat path's
``ChatCompletion``: output items -- a ``reasoning`` item with the thought, a ``message`` with one
``output_text`` part, a ``function_call`` per call (``fc_`` and ``call_`` plus the call's id) --
status ``completed`` and the usage (input / output tokens, the cached ones).
"""

from __future__ import annotations

import copy
import time
from typing import Any

from ...chat.streaming import gen_tool_call_id
from ...json_types import Json
from ..chat.wire import read_chat
from ..http.errors import RequestError
from ..wire.request import ChatCall, RequestDefaults

__all__ = ["ResponseIds", "call_item", "chat_body", "read_responses", "reasoning_item", "response_json", "text_part",
           "usage_json"]

USER_ROLES = ("user", "system", "developer")


def _has_str(item: Json, key: str) -> bool:
    return isinstance(item, dict) and isinstance(item.get(key), str)


def _has_list(item: Json, key: str) -> bool:
    return isinstance(item, dict) and isinstance(item.get(key), list)


def _input_part(part: Json) -> Json:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "input_text":
        if "text" not in part:
            raise RequestError("'Input text' requires 'text'")
        return {"text": part["text"], "type": "text"}
    if kind == "input_image":   # "detail" may be left out (its default is "auto")
        if "image_url" not in part:
            raise RequestError("'image_url' is required")
        return {"image_url": {"url": part["image_url"]}, "type": "image_url"}
    if kind == "input_file":
        raise RequestError("'input_file' is not supported by llamacpp at this moment")
    raise RequestError("'type' must be one of 'input_text', 'input_image', or 'input_file'")


def _output_part(part: Json) -> Json:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in ("output_text", "input_text"):   # a string content was made an input_text part
        if not _has_str(part, "text"):
            raise RequestError("'Output text' requires 'text'")
        return {"text": part["text"], "type": "text"}
    if kind == "refusal":
        if not _has_str(part, "refusal"):
            raise RequestError("'Refusal' requires 'refusal'")
        return {"refusal": part["refusal"], "type": "refusal"}
    raise RequestError("'type' must be one of 'output_text' or 'refusal'")


def _tool_output(output: Json) -> Json:
    """A ``function_call_output``'s list of parts as a tool message's content."""
    parts = copy.deepcopy(output)
    for part in parts:
        if not isinstance(part, dict) or "type" not in part:
            raise RequestError("Output of tool call missing 'type' field")
        if part["type"] not in ("input_text", "input_image"):
            raise RequestError("Output of tool call should be 'Input text' or 'Input image'")
        if part["type"] == "input_text":
            part["type"] = "text"
        else:
            if "image_url" not in part:
                raise RequestError("'image_url' is required")
            part["type"], part["image_url"] = "image_url", {"url": part["image_url"]}
    return parts


def _add_item(messages: list[Json], item: Json) -> None:
    """One input item into the chat messages (the loop body of upstream's conversion)."""
    merge = bool(messages) and messages[-1].get("role", "") == "assistant"
    item = copy.deepcopy(item) if isinstance(item, dict) else item
    if _has_str(item, "content"):   # an input message's text: one input_text part
        item["content"] = [{"text": item["content"], "type": "input_text"}]
    if _has_list(item, "content") and _has_str(item, "role") and item["role"] in USER_ROLES:
        item["content"] = [_input_part(p) for p in item["content"]]
        item.pop("type", None)
        item.pop("status", None)
        messages.append(item)
    elif _has_str(item, "role") and item["role"] == "assistant" and _has_str(item, "type") \
            and item["type"] == "message":
        content = [_output_part(p) for p in item["content"]] if _has_list(item, "content") else []
        if merge:
            previous = messages[-1]
            if not isinstance(previous.get("content"), list):
                previous["content"] = []
            previous["content"].extend(content)
        else:
            item.pop("status", None)
            item.pop("type", None)
            item["content"] = content
            messages.append(item)
    elif all(_has_str(item, k) for k in ("arguments", "call_id", "name", "type")) and item["type"] == "function_call":
        call = {"function": {"arguments": item["arguments"], "name": item["name"]}, "id": item["call_id"],
                "type": "function"}
        if merge:
            previous = messages[-1]
            if not isinstance(previous.get("tool_calls"), list):
                previous["tool_calls"] = []
            previous["tool_calls"].append(call)
        else:
            messages.append({"role": "assistant", "tool_calls": [call]})
    elif _has_str(item, "call_id") and (_has_str(item, "output") or _has_list(item, "output")) \
            and _has_str(item, "type") and item["type"] == "function_call_output":
        output = item["output"] if isinstance(item["output"], str) else _tool_output(item["output"])
        messages.append({"content": output, "role": "tool", "tool_call_id": item["call_id"]})
    elif _has_list(item, "summary") and _has_str(item, "type") and item["type"] == "reasoning":
        content = item.get("content")
        if not isinstance(content, list):
            raise RequestError("item['content'] is not an array")
        if not content:
            raise RequestError("item['content'] is empty")
        if not _has_str(content[0], "text"):
            raise RequestError("item['content']['text'] is not a string")
        if merge:
            messages[-1]["reasoning_content"] = content[0]["text"]
        else:
            messages.append({"role": "assistant", "content": [], "reasoning_content": content[0]["text"]})
    else:
        raise RequestError("Cannot determine type of 'item'")


def _tools(tools: Json) -> list[Json]:
    if not isinstance(tools, list):
        raise RequestError("'tools' must be an array of objects")
    out = []
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            continue   # web search, file search, ...: no chat equivalent (upstream skips them with a warning)
        function = {k: v for k, v in tool.items() if k != "type"}
        function.setdefault("strict", True)
        out.append({"type": "function", "function": function})
    return out


def _response_format(text: Json) -> Json:
    """``text.format`` as a chat ``response_format`` (None for plain text or no format)."""
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema":
        return {"type": "json_schema", "json_schema": {k: v for k, v in fmt.items() if k != "type"}}
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    return None


def _tool_choice(choice: Json) -> Json:
    if isinstance(choice, dict) and choice.get("type") == "function" and "function" not in choice \
            and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    return choice


def chat_body(body: Json) -> Json:
    """The chat completions body a Responses body stands for (see the module docstring)."""
    if not isinstance(body, dict) or "input" not in body:
        raise RequestError("'input' is required")
    if isinstance(body.get("previous_response_id"), str) and body["previous_response_id"]:
        raise RequestError("llama.cpp does not support 'previous_response_id'.")
    chat = {k: v for k, v in body.items() if k not in ("input", "instructions", "tools", "max_output_tokens",
                                                        "reasoning")}
    messages: list[Json] = []
    if "instructions" in body:
        instructions = body["instructions"]
        messages.append({"role": "system", "content": instructions if isinstance(instructions, str) else ""})
    given = body["input"]
    if isinstance(given, str):
        messages.append({"role": "user", "content": given})
    elif isinstance(given, list):
        for item in given:
            _add_item(messages, item)
    else:
        raise RequestError("'input' must be a string or array of objects")
    chat["messages"] = messages
    if "tools" in body:
        tools = _tools(body["tools"])
        if tools:
            chat["tools"] = tools
    if "max_output_tokens" in body:
        chat["max_tokens"] = body["max_output_tokens"]
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and "effort" in reasoning:
        chat["reasoning_effort"] = reasoning["effort"]
    # llamact's two: the flat named tool choice, text.format (see the module docstring)
    if "tool_choice" in chat:
        chat["tool_choice"] = _tool_choice(chat["tool_choice"])
    response_format = _response_format(body.get("text"))
    if response_format is not None and chat.get("response_format") is None:
        chat["response_format"] = response_format
    return chat


def read_responses(body: Json, defaults: RequestDefaults) -> ChatCall:
    """A ``/v1/responses`` body, read as its chat body (``read_chat``)."""
    return read_chat(chat_body(body), defaults)


# -- the answer ---------------------------------------------------------------------------------------


class ResponseIds:
    """The ids one answer uses: the response's, its reasoning item's, its message's."""

    def __init__(self) -> None:
        self.response = "resp_" + gen_tool_call_id()
        self.reasoning = "rs_" + gen_tool_call_id()
        self.message = "msg_" + gen_tool_call_id()


def usage_json(usage: Any) -> Json:
    return {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens, "input_tokens_details": {"cached_tokens": usage.cached_tokens}}


def reasoning_item(item_id: str, text: str) -> Json:
    return {"id": item_id, "summary": [], "type": "reasoning", "content": [{"text": text, "type": "reasoning_text"}],
            "encrypted_content": ""}


def text_part(text: str) -> Json:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def call_item(call: Any) -> Json:
    return {"id": "fc_" + call.id, "type": "function_call", "status": "completed", "arguments": call.arguments,
            "call_id": "call_" + call.id, "name": call.name}


def response_json(completion: Any, ids: ResponseIds, model: str) -> Json:
    """The ``response`` object of a reply not streamed (an output whose every parse was empty is
    its raw text, as in the chat answer: ``ChatCompletion.message`` is already that)."""
    message = completion.message
    output: list[Json] = []
    if message.reasoning_content:
        output.append({**reasoning_item("rs_" + gen_tool_call_id(), message.reasoning_content),
                       "status": "completed"})
    if message.content:
        output.append({"content": [text_part(message.content)], "id": "msg_" + gen_tool_call_id(),
                       "role": message.role or "assistant", "status": "completed", "type": "message"})
    output.extend(call_item(call) for call in message.tool_calls)
    now = int(time.time())
    out = {"completed_at": now, "created_at": now, "id": ids.response, "model": model, "object": "response",
           "output": output, "status": "completed", "usage": usage_json(completion.usage)}
    if completion.recovery is not None:   # llamact's extension field (docs/design.md deviation 17)
        out["llamact"] = completion.recovery.to_json()
    return out
