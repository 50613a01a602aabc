"""DeepSeek V3.2 / V4 (DSML) against the oracle, on the branches the corpus's 19 scenarios miss:
reasoning with tools (the thought may end in the tool block), thinking off with tools (V3.2's
``<think></think>`` vs V4's bare ``</think>``), response formats with reasoning and tools (V4 passes
the schema to the template), continuations of reasoning (V4 without reasoning continues after
``</think>``), V4's tool results reordered to the order of the calls, and argument layouts the
corpus tools lack (several required arguments, none, a string-or-number union)."""

from __future__ import annotations

import copy

import pytest
from apply_checks import assert_apply_matches, chat_inputs, edge_cases, template_source

from llamact.chat.specialized.deepseek_v3_2 import sort_v4_tool_results
from llamact.json_types import Json
from llamact.parity.scenarios import (
    CALL_CALC_TYPED,
    CALL_WEATHER,
    RESPONSE_SCHEMA,
    TOOL_RESULT_CALC,
    TOOL_RESULT_WEATHER,
    TOOLS,
    USER,
    USER_2,
)

pytestmark = pytest.mark.parity

STEMS = ["deepseek-ai-DeepSeek-V3.2", "deepseek-ai-DeepSeek-V4-Flash-0731", "deepseek-ai-DeepSeek-V4"]

MOVE_TOOL: Json = {"type": "function", "function": {
    "name": "move", "description": "Move a piece",
    "parameters": {"type": "object", "properties": {
        "x": {"type": "integer"}, "y": {"type": "integer"}, "label": {"type": ["string", "number"]}},
        "required": ["x", "y"]}}}
PING_TOOL: Json = {"type": "function", "function": {"name": "ping", "description": "Ping"}}
CALL_MOVE: Json = {"id": "call_0003", "type": "function",
                   "function": {"name": "move", "arguments": '{"x": 1, "y": 2}'}}
TOOL_RESULT_MOVE = {"role": "tool", "tool_call_id": "call_0003", "name": "move", "content": "moved"}


def _calls(*calls: Json, content: str = "") -> Json:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


REASONING = {"reasoning_format": "deepseek"}

CASES: dict[str, Json] = {
    "tools_reasoning": chat_inputs([USER], tools=TOOLS, **REASONING),
    "tools_reasoning_required": chat_inputs([USER], tools=TOOLS, tool_choice="required", **REASONING),
    "tools_reasoning_parallel": chat_inputs([USER], tools=TOOLS, parallel_tool_calls=True, **REASONING),
    "tools_thinking_off": chat_inputs([USER], tools=TOOLS, enable_thinking=False, **REASONING),
    "tools_thinking_off_required": chat_inputs([USER], tools=TOOLS, enable_thinking=False, tool_choice="required",
                                               **REASONING),
    "tools_none_reasoning": chat_inputs([USER], tools=TOOLS, tool_choice="none", **REASONING),
    "response_format_reasoning": chat_inputs([USER], json_schema=RESPONSE_SCHEMA, **REASONING),
    "response_format_thinking_off": chat_inputs([USER], json_schema=RESPONSE_SCHEMA, enable_thinking=False,
                                                **REASONING),
    "response_format_with_tools": chat_inputs([USER], tools=TOOLS, json_schema=RESPONSE_SCHEMA),
    "response_format_empty_schema": chat_inputs([USER], json_schema={}),
    "argument_layouts": chat_inputs([USER], tools=[MOVE_TOOL, PING_TOOL, *TOOLS], parallel_tool_calls=True),
    "argument_layouts_required": chat_inputs([USER], tools=[MOVE_TOOL, PING_TOOL], tool_choice="required",
                                             **REASONING),
    "continue_reasoning_only": chat_inputs(
        [USER, {"role": "assistant", "content": "", "reasoning_content": "The user wants"}],
        add_generation_prompt=False, continue_final_message=True, **REASONING),
    "continue_content_with_reasoning": chat_inputs(
        [USER, {"role": "assistant", "content": "It is", "reasoning_content": "Check the forecast."}],
        add_generation_prompt=False, continue_final_message=True, **REASONING),
    "continue_content_as_reasoning": chat_inputs(
        [USER, {"role": "assistant", "content": "It is", "reasoning_content": "Check the forecast."}],
        add_generation_prompt=False, continue_final_message="reasoning_content", **REASONING),
    "continue_with_tools": chat_inputs(
        [USER, {"role": "assistant", "content": "Let me check."}], tools=TOOLS,
        add_generation_prompt=False, continue_final_message=True, **REASONING),
    # V4: results given in another order than the calls are rendered in call order
    "results_out_of_order": chat_inputs(
        [USER, _calls(CALL_WEATHER, CALL_CALC_TYPED, CALL_MOVE), TOOL_RESULT_MOVE, TOOL_RESULT_WEATHER,
         TOOL_RESULT_CALC], tools=[*TOOLS, MOVE_TOOL], parallel_tool_calls=True),
    "results_with_user_between": chat_inputs(
        [USER, _calls(CALL_WEATHER, CALL_CALC_TYPED), TOOL_RESULT_CALC, USER_2, TOOL_RESULT_WEATHER],
        tools=TOOLS, parallel_tool_calls=True),
    "results_unknown_id": chat_inputs(
        [USER, _calls(CALL_WEATHER, CALL_CALC_TYPED), TOOL_RESULT_CALC,
         {"role": "tool", "tool_call_id": "call_9999", "content": "stray"}, TOOL_RESULT_WEATHER],
        tools=TOOLS, parallel_tool_calls=True),
    "results_two_turns": chat_inputs(
        [USER, _calls(CALL_WEATHER, CALL_CALC_TYPED), TOOL_RESULT_CALC, TOOL_RESULT_WEATHER,
         {"role": "assistant", "content": "Done."}, USER_2, _calls(CALL_MOVE, CALL_WEATHER),
         TOOL_RESULT_WEATHER, TOOL_RESULT_MOVE], tools=[*TOOLS, MOVE_TOOL], parallel_tool_calls=True,
        **REASONING),
}

CASES.update(edge_cases())


@pytest.mark.parametrize("stem", STEMS)
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_apply_matches_upstream(oracle, stem: str, case: str) -> None:
    assert_apply_matches(oracle, template_source(stem), CASES[case])


def test_v4_sort_leaves_the_messages_alone() -> None:
    messages = [USER, _calls(CALL_WEATHER, CALL_CALC_TYPED), TOOL_RESULT_CALC, TOOL_RESULT_WEATHER]
    before = copy.deepcopy(messages)
    adjusted = sort_v4_tool_results(messages)
    assert messages == before
    assert [m.get("tool_call_id") for m in adjusted[2:]] == ["call_0001", "call_0002"]
