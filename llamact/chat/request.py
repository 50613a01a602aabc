"""An OpenAI-style chat request turned into the apply pipeline's inputs, as llama-server reads one
(``oaicompat_chat_params_parse``, tools/server/server-common.cpp).

    chat_inputs(messages, *, tools=None, tool_choice="auto", ...) -> ChatTemplateInputs

What the server adds on top of ``common_chat_templates_apply``: ``response_format`` (text /
json_object / json_schema, or a bare schema; an empty schema means any object), ``reasoning_effort``
("none" turns thinking off, anything else reaches the template as ``reasoning_effort``),
``chat_template_kwargs["enable_thinking"]`` overriding ``enable_thinking``, ``preserve_reasoning``
(templates that can keep earlier thoughts), and its request checks. ``add_generation_prompt``
defaults to true, or false when continuing the last message. ``tool_choice`` may also name a
function, OpenAI's ``{"type": "function", "function": {"name": ...}}``: llamact then forces an
immediate call of it (DESIGN deviation 9; llama-server would read it as "auto").

Raises ``ChatRequestError`` (upstream's reasons) and ``LlamaUnsupportedException`` for a
``response_format`` shape that is not recognised (DESIGN deviation 8).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..grammar.response_format import parse_response_format
from .apply import ChatTemplateInputs
from .named_tool import require_tool
from .oai import ChatRequestError, ChatTool, parse_messages, parse_tool_choice, parse_tools

__all__ = ["chat_inputs"]

Json = Any


def _continuation(value: Json) -> str:
    if value is True:
        return "auto"
    if value in (False, None):
        return "none"
    if value in ("content", "reasoning_content", "auto", "none"):
        return str(value)
    raise ChatRequestError(f'continue_final_message must be a bool, "content" or "reasoning_content", got {value!r}')


def _tool_choice(value: Json, tools: list[ChatTool]) -> tuple[str, str | None]:
    """(upstream's tool choice, the named function or None). A named choice reads as "required"
    plus the name (DESIGN deviation 9); the name must be one of the tools."""
    if isinstance(value, str):
        return parse_tool_choice(value), None
    function = value.get("function") if isinstance(value, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(value, Mapping) or value.get("type") != "function" or not isinstance(name, str):
        raise ChatRequestError('tool_choice must be "auto", "required", "none" or {"type": "function", '
                               f'"function": {{"name": ...}}}}, got {value!r:.200}')
    require_tool(name, tools)
    return "required", name


def chat_inputs(messages: Json, *, tools: Json = None, tool_choice: str | Mapping[str, Json] = "auto",
                parallel_tool_calls: bool = False, enable_thinking: bool = True, reasoning_format: str = "deepseek",
                add_generation_prompt: bool | None = None, continue_final_message: Json = False,
                response_format: Json = None, grammar: str | None = None,
                chat_template_kwargs: Mapping[str, Json] | None = None, reasoning_effort: str | None = None,
                preserve_reasoning: bool | None = None, template_now: float | None = None,
                force_pure_content: bool = False) -> ChatTemplateInputs:
    """The request as the apply pipeline's inputs (see the module docstring). Nothing the caller
    passed is modified."""
    parsed_messages = parse_messages(messages)
    parsed_tools: list[ChatTool] = parse_tools(tools)
    choice, named_tool = _tool_choice(tool_choice, parsed_tools)
    if choice == "required" and not parsed_tools:
        raise ChatRequestError('tool_choice "required" needs at least one tool')

    schema = None
    if response_format is not None:
        resolved = parse_response_format(response_format)
        schema = dict(resolved.schema) if resolved.schema is not None else None
        if schema == {}:
            schema = {"type": "object"}  # an empty schema means any object, as the server reads it
    if schema is not None and grammar:
        raise ChatRequestError("Cannot use both json_schema and grammar")
    if parsed_tools and choice != "none" and grammar:
        raise ChatRequestError("Cannot use custom grammar constraints with tools.")

    continuation = _continuation(continue_final_message)
    if add_generation_prompt is None:
        add_generation_prompt = continuation == "none"
    elif continuation != "none" and add_generation_prompt:
        raise ChatRequestError("Cannot set both add_generation_prompt and continue_final_message to true.")
    if continuation != "none" and parsed_messages and parsed_messages[-1].role == "assistant" \
            and parsed_messages[-1].tool_calls:
        raise ChatRequestError("Cannot continue an assistant message that contains tool calls.")

    kwargs: dict[str, Json] = dict(chat_template_kwargs or {})
    thinking_kwarg = kwargs.get("enable_thinking")
    if isinstance(thinking_kwarg, bool):
        enable_thinking = thinking_kwarg
    elif isinstance(thinking_kwarg, str):
        raise ChatRequestError('invalid type for "enable_thinking" (expected boolean, got string)')
    if reasoning_effort is not None:
        if reasoning_effort == "none":
            enable_thinking = False
            kwargs.pop("reasoning_effort", None)
        elif reasoning_effort:
            kwargs["reasoning_effort"] = reasoning_effort
    if preserve_reasoning is not None:
        kwargs["preserve_reasoning"] = bool(preserve_reasoning)

    return ChatTemplateInputs(
        messages=tuple(parsed_messages), tools=tuple(parsed_tools), tool_choice=choice,
        parallel_tool_calls=parallel_tool_calls, reasoning_format=reasoning_format,
        enable_thinking=enable_thinking, add_generation_prompt=add_generation_prompt, json_schema=schema,
        grammar=grammar or "", chat_template_kwargs=kwargs, continue_final_message=continuation,
        force_pure_content=force_pure_content, now=template_now, named_tool=named_tool)

