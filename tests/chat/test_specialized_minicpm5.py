"""MiniCPM5 against the oracle, on the branches the corpus's 19 scenarios miss: reasoning extraction
with tools (auto, required, parallel, none), a response format with reasoning and with tools, an
empty response schema (not a response format here, unlike DeepSeek and Gemma 4), continuations of
reasoning, and argument schemas the corpus tools lack (a string-or-number union takes the raw / CDATA
value, no parameters at all)."""

from __future__ import annotations

import pytest
from apply_checks import assert_apply_matches, chat_inputs, edge_cases, template_source

from llamact.json_types import Json
from llamact.parity.scenarios import CALL_WEATHER, RESPONSE_SCHEMA, TOOL_RESULT_WEATHER, TOOLS, USER, USER_2

pytestmark = pytest.mark.parity

STEM = "openbmb-MiniCPM5-1B"

LABEL_TOOL: Json = {"type": "function", "function": {
    "name": "label", "description": "Label a point",
    "parameters": {"type": "object", "properties": {
        "x": {"type": "integer"}, "text": {"type": ["string", "number"]}, "extra": {"anyOf": [{"type": "null"},
                                                                                            {"type": "string"}]}},
        "required": ["x", "text"]}}}
PING_TOOL: Json = {"type": "function", "function": {"name": "ping", "description": "Ping"}}


REASONING = {"reasoning_format": "deepseek"}

CASES: dict[str, Json] = {
    "tools_reasoning": chat_inputs([USER], tools=TOOLS, **REASONING),
    "tools_reasoning_required": chat_inputs([USER], tools=TOOLS, tool_choice="required", **REASONING),
    "tools_reasoning_parallel": chat_inputs([USER], tools=TOOLS, parallel_tool_calls=True, **REASONING),
    "tools_required_parallel": chat_inputs([USER], tools=TOOLS, tool_choice="required", parallel_tool_calls=True),
    "tools_none_reasoning": chat_inputs([USER], tools=TOOLS, tool_choice="none", **REASONING),
    "tools_thinking_off": chat_inputs([USER], tools=TOOLS, enable_thinking=False, **REASONING),
    "response_format_reasoning": chat_inputs([USER], json_schema=RESPONSE_SCHEMA, **REASONING),
    "response_format_with_tools": chat_inputs([USER], tools=TOOLS, json_schema=RESPONSE_SCHEMA),
    "response_format_empty_schema": chat_inputs([USER], json_schema={}),
    "argument_layouts": chat_inputs([USER], tools=[LABEL_TOOL, PING_TOOL, *TOOLS], parallel_tool_calls=True,
                                    **REASONING),
    "continue_reasoning_only": chat_inputs(
        [USER, {"role": "assistant", "content": "", "reasoning_content": "The user wants"}],
        add_generation_prompt=False, continue_final_message=True, **REASONING),
    "continue_content_with_reasoning": chat_inputs(
        [USER, {"role": "assistant", "content": "It is", "reasoning_content": "Check the forecast."}],
        add_generation_prompt=False, continue_final_message=True, **REASONING),
    "continue_content_as_reasoning": chat_inputs(
        [USER, {"role": "assistant", "content": "It is", "reasoning_content": "Check the forecast."}],
        add_generation_prompt=False, continue_final_message="reasoning_content"),
    "history_with_reasoning": chat_inputs(
        [USER, {"role": "assistant", "content": "", "reasoning_content": "Look it up.",
                "tool_calls": [CALL_WEATHER]}, TOOL_RESULT_WEATHER,
         {"role": "assistant", "content": "Sunny.", "reasoning_content": "Done."}, USER_2],
        tools=TOOLS, **REASONING),
}

CASES.update(edge_cases())


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_apply_matches_upstream(oracle, case: str) -> None:
    assert_apply_matches(oracle, template_source(STEM), CASES[case])
