"""The scenario matrix: the conversations every template is rendered and parsed with.

Pure data plus small builders. Each scenario is a ``chat_apply`` input (OpenAI-style messages and
tools, and upstream's apply options); each assistant output is a message that is rendered through
the template itself to synthesise what a model would have produced for it (see corpus.py).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ..json_types import Json

WEATHER_TOOL: Json = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}

CALC_TOOL: Json = {
    "type": "function",
    "function": {
        "name": "calculate",
        "description": "Evaluate an arithmetic expression",
        "parameters": {
            "type": "object",
            "properties": {
                "expression": {"type": "string"},
                "precision": {"type": "integer"},
                "exact": {"type": "boolean"},
                "options": {"type": "object", "properties": {"mode": {"type": "string"}}},
                "values": {"type": "array", "items": {"type": "number"}},
            },
            "required": ["expression"],
        },
    },
}

TOOLS: list[Json] = [WEATHER_TOOL, CALC_TOOL]

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
USER = {"role": "user", "content": "What is the weather in Paris?"}
ASSISTANT = {"role": "assistant", "content": "It is sunny in Paris today."}
USER_2 = {"role": "user", "content": "And in Tokyo?"}
UNICODE_USER = {
    "role": "user",
    "content": "héllo wörld — 世界 🎉 \"quotes\" 'single' <|im_start|> [INST] {{ not jinja }} {% raw %} \\n tab\there",
}

CALL_WEATHER: Json = {
    "id": "call_0001",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'},
}
CALL_CALC_TYPED: Json = {
    "id": "call_0002",
    "type": "function",
    "function": {
        "name": "calculate",
        "arguments": '{"expression": "2+2", "precision": 3, "exact": true, "options": {"mode": "fast"}, '
        '"values": [1.5, 2, -3]}',
    },
}
TOOL_RESULT_WEATHER = {"role": "tool", "tool_call_id": "call_0001", "name": "get_weather", "content": "sunny, 21 C"}
TOOL_RESULT_CALC = {"role": "tool", "tool_call_id": "call_0002", "name": "calculate", "content": "4.000"}


def _assistant_calls(*calls: Json, content: str = "") -> Json:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


@dataclass(frozen=True)
class Scenario:
    """One ``chat_apply`` input: messages plus apply options (upstream's names)."""

    name: str
    messages: list[Json]
    tools: list[Json] = field(default_factory=list)
    tool_choice: str = "auto"
    parallel_tool_calls: bool = False
    reasoning_format: str = "none"
    enable_thinking: bool = True
    json_schema: Json = None
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    chat_template_kwargs: dict[str, Json] = field(default_factory=dict)  # JSON values

    def inputs(self) -> Json:
        """The request's ``inputs`` object (deep-copied so callers may not alias the data)."""
        out: Json = {
            "messages": copy.deepcopy(self.messages),
            "tools": copy.deepcopy(self.tools),
            "tool_choice": self.tool_choice,
            "parallel_tool_calls": self.parallel_tool_calls,
            "reasoning_format": self.reasoning_format,
            "enable_thinking": self.enable_thinking,
            "add_generation_prompt": self.add_generation_prompt,
            "continue_final_message": self.continue_final_message,
            "chat_template_kwargs": copy.deepcopy(self.chat_template_kwargs),
        }
        if self.json_schema is not None:
            out["json_schema"] = copy.deepcopy(self.json_schema)
        return out


RESPONSE_SCHEMA: Json = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
    "required": ["answer"],
}

SCENARIOS: list[Scenario] = [
    Scenario("basic", [USER]),
    Scenario("system", [SYSTEM, USER]),
    Scenario("multi_turn", [SYSTEM, USER, ASSISTANT, USER_2]),
    Scenario("tools_auto", [SYSTEM, USER], tools=TOOLS),
    Scenario("tools_required", [USER], tools=TOOLS, tool_choice="required"),
    Scenario("tools_none", [USER], tools=TOOLS, tool_choice="none"),
    Scenario("tools_parallel", [USER], tools=TOOLS, parallel_tool_calls=True),
    Scenario(
        "tool_call_history",
        [USER, _assistant_calls(CALL_WEATHER), TOOL_RESULT_WEATHER, USER_2],
        tools=TOOLS,
    ),
    Scenario(
        "typed_arguments_history",
        [USER, _assistant_calls(CALL_CALC_TYPED), TOOL_RESULT_CALC, USER_2],
        tools=TOOLS,
    ),
    Scenario(
        "parallel_call_history",
        [USER, _assistant_calls(CALL_WEATHER, CALL_CALC_TYPED), TOOL_RESULT_WEATHER, TOOL_RESULT_CALC],
        tools=TOOLS,
        parallel_tool_calls=True,
    ),
    Scenario(
        "reasoning_history",
        [USER, {"role": "assistant", "content": "Sunny.", "reasoning_content": "Check the forecast."}, USER_2],
        reasoning_format="deepseek",
    ),
    Scenario("thinking_off", [USER], enable_thinking=False, reasoning_format="deepseek"),
    Scenario("thinking_on", [USER], enable_thinking=True, reasoning_format="deepseek"),
    Scenario(
        "typed_content",
        [
            {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}]},
        ],
    ),
    Scenario("response_format", [USER], json_schema=RESPONSE_SCHEMA),
    Scenario("kwargs", [USER], chat_template_kwargs={"enable_thinking": "false", "custom_flag": '"yes"'}),
    Scenario(
        "continue_final_message",
        [USER, {"role": "assistant", "content": "The weather in Paris is"}],
        add_generation_prompt=False,
        continue_final_message=True,
    ),
    Scenario("no_generation_prompt", [SYSTEM, USER, ASSISTANT], add_generation_prompt=False),
    Scenario("unicode", [UNICODE_USER]),
    Scenario("developer_role", [{"role": "developer", "content": "Answer in French."}, USER]),
    Scenario("reasoning_effort", [USER], reasoning_format="deepseek",
             chat_template_kwargs={"reasoning_effort": "high"}),
    Scenario(
        "preserve_reasoning",
        [USER, {"role": "assistant", "content": "Sunny.", "reasoning_content": "Check the forecast."}, USER_2],
        reasoning_format="deepseek",
        chat_template_kwargs={"preserve_reasoning": True},
    ),
    Scenario("response_format_with_tools", [USER], tools=TOOLS, json_schema=RESPONSE_SCHEMA),
    Scenario(
        "continue_reasoning",
        [USER, {"role": "assistant", "content": "", "reasoning_content": "The user asks about"}],
        reasoning_format="deepseek",
        add_generation_prompt=False,
        continue_final_message=True,
    ),
]


@dataclass(frozen=True)
class AssistantOutput:
    """An assistant message whose rendering is the synthesised model output to parse."""

    name: str
    message: Json
    tools: list[Json] = field(default_factory=list)
    parallel_tool_calls: bool = False
    reasoning_format: str = "none"


ASSISTANT_OUTPUTS: list[AssistantOutput] = [
    AssistantOutput("content", {"role": "assistant", "content": "It is sunny in Paris, 21 °C. 🌞"}),
    AssistantOutput(
        "reasoning",
        {"role": "assistant", "content": "Sunny.", "reasoning_content": "The user wants the weather."},
        reasoning_format="deepseek",
    ),
    AssistantOutput("one_call", _assistant_calls(CALL_WEATHER), tools=TOOLS),
    AssistantOutput("typed_call", _assistant_calls(CALL_CALC_TYPED), tools=TOOLS),
    AssistantOutput(
        "parallel_calls", _assistant_calls(CALL_WEATHER, CALL_CALC_TYPED), tools=TOOLS, parallel_tool_calls=True
    ),
]
