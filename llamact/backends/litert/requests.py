"""A chat request on LiteRT-LM: refused early, sent through the runtime's Conversation API, or rendered by llamact.

    refuse_unsupported(request)                        raises for what the runtime cannot do at all
    call, reason = conversation_call(request, runtime_parses_tools=..., has_template=...)
    call.preface, call.message, call.tools, call.extra_context, call.json_schema

The specification's routing: an eligible chat request goes to the runtime's Conversation API
(system message and history as a preface, the last user message sent, tools declared, the
request's template variables as extra context), so the runtime's model processor sees structured
messages; llamact parses the text the runtime streams. A request the conversation cannot express
takes the other path: llamact renders the prompt with the same template and the runtime only
generates (``reason`` says why, for diagnostics and tests). What makes a request ineligible:
continuing a message or no generation prompt, a last message that is not the user's, a history
with tool calls, tool results or reasoning (their JSON shape is the runtime processor's), a
per-call template, and tools on a bundle whose runtime model type parses tool calls itself (it
would hand back calls instead of text to parse).

Refused for every path, with ``LlamaUnsupportedException`` saying what to do instead: a GBNF
grammar, a named ``tool_choice`` and ``"required"`` (both need a grammar over the call), logprobs,
media parts, and a ``response_format`` on a request that cannot take the conversation path (the
runtime constrains output only there). A JSON schema the grammar converter would not enforce is
refused as on a GGUF model (docs/design.md deviation 8).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...chat.request import ChatRequest
from ...errors import LlamaUnsupportedException
from ...grammar.enforcement import refuse_unenforced
from ...json_types import Json

__all__ = ["ConversationCall", "conversation_call", "refuse_unsupported"]

_GGUF = "or use a GGUF model, where llama.cpp's grammar sampler runs"


@dataclass(frozen=True)
class ConversationCall:
    preface: list[dict[str, Json]]
    message: dict[str, Json]
    tools: list[dict[str, Json]]
    extra_context: dict[str, Json]
    enable_thinking: bool
    thinking_budget: int
    json_schema: str | None      # the response format's schema (JSON text), for the runtime's constraint


def refuse_unsupported(request: ChatRequest) -> None:
    """Raise ``LlamaUnsupportedException`` for what no path on the runtime can honour."""
    inputs = request.inputs
    if inputs.grammar:
        raise LlamaUnsupportedException(
            "the LiteRT-LM runtime cannot apply a GBNF grammar; pass response_format with a JSON schema instead "
            f"(the runtime constrains to those), {_GGUF}", {"option": "grammar"})
    if request.named_tool is not None:
        raise LlamaUnsupportedException(
            f"a named tool_choice ({request.named_tool!r}) needs a grammar that admits only that call, which the "
            f"LiteRT-LM runtime cannot apply: use tool_choice='auto' {_GGUF}", {"option": "tool_choice"})
    if inputs.tool_choice == "required" and inputs.tools:
        raise LlamaUnsupportedException(
            "tool_choice='required' needs a grammar that forces a call, which the LiteRT-LM runtime cannot apply: "
            f"use tool_choice='auto' {_GGUF}", {"option": "tool_choice"})
    if request.logprobs or request.top_logprobs:
        raise LlamaUnsupportedException("the LiteRT-LM runtime gives no token probabilities: drop logprobs, or use "
                                        "a GGUF model", {"option": "logprobs"})
    for message in inputs.messages:
        if any(part.type != "text" for part in message.content_parts):
            raise LlamaUnsupportedException(
                "llamact sends text to the LiteRT-LM runtime; a message with image or audio parts is not supported "
                "on a .litertlm model yet", {"option": "messages"})
    refuse_unenforced(inputs.json_schema, "pass a schema without it (the runtime's constraint is not checked by "
                                          "llamact's converter for those)")


def _text(message: Any) -> str:
    return str(message.content or "".join(p.text for p in message.content_parts))


def conversation_call(request: ChatRequest, *, runtime_parses_tools: bool,
                      has_template: bool) -> tuple[ConversationCall | None, str]:
    """The request as a conversation call, or None and why it takes the rendered path."""
    inputs = request.inputs
    reason = ""
    messages = inputs.messages
    if request.custom_template is not None:
        reason = "a per-call custom_template is rendered by llamact"
    elif not has_template:
        reason = "the runtime has no chat template to render with"
    elif request.is_continuation or not inputs.add_generation_prompt:
        reason = "continuing a message or rendering no generation prompt"
    elif not messages or messages[-1].role != "user":
        reason = "the last message is not the user's"
    elif any(m.role not in ("system", "user", "assistant") or m.tool_calls or m.reasoning_content or m.tool_call_id
             for m in messages):
        reason = "the history holds tool calls, tool results or reasoning"
    elif inputs.tools and inputs.tool_choice != "none" and runtime_parses_tools:
        reason = "the bundle's runtime model type parses tool calls itself; llamact parses them from its rendering"
    if reason:
        if inputs.json_schema is not None:
            raise LlamaUnsupportedException(
                f"response_format on a .litertlm model is enforced by the runtime's conversation path, which this "
                f"request cannot take ({reason}); change that, {_GGUF}", {"option": "response_format"})
        return None, reason
    tools = [t.to_json() for t in inputs.tools] if inputs.tool_choice != "none" else []
    extra: dict[str, Json] = dict(inputs.chat_template_kwargs)
    extra["enable_thinking"] = inputs.enable_thinking
    schema = None if inputs.json_schema is None else json.dumps(inputs.json_schema)
    turns = [{"role": m.role, "content": _text(m)} for m in messages]
    budget = -1 if request.thinking_budget_tokens is None else int(request.thinking_budget_tokens)
    return ConversationCall(turns[:-1], turns[-1], tools, extra, inputs.enable_thinking, budget, schema), ""
