"""DeepSeek V3.2 / V4 (DSML) against the oracle, on the branches the corpus's 19 scenarios miss:
reasoning with tools (the thought may end in the tool block), thinking off with tools (V3.2's
``<think></think>`` vs V4's bare ``</think>``), response formats with reasoning and tools (V4 passes
the schema to the template), continuations of reasoning (V4 without reasoning continues after
``</think>``), V4's tool results reordered to the order of the calls, and argument layouts the
corpus tools lack (several required arguments, none, a string-or-number union)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from apply_checks import assert_apply_matches, template_source

from llamact.chat.specialized.deepseek_v3_2 import sort_v4_tool_results
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

Json = Any

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


def _inputs(messages: list[Json], **options: Json) -> Json:
    out: Json = {"messages": copy.deepcopy(messages), "tools": [], "tool_choice": "auto",
                 "parallel_tool_calls": False, "reasoning_format": "none", "enable_thinking": True,
                 "add_generation_prompt": True, "continue_final_message": False, "chat_template_kwargs": {}}
    out.update(copy.deepcopy(options))
    return out


REASONING = {"reasoning_format": "deepseek"}

CASES: dict[str, Json] = {
    "tools_reasoning": _inputs([USER], tools=TOOLS, **REASONING),
    "tools_reasoning_required": _inputs([USER], tools=TOOLS, tool_choice="required", **REASONING),
    "tools_reasoning_parallel": _inputs([USER], tools=TOOLS, parallel_tool_calls=True, **REASONING),
    "tools_thinking_off": _inputs([USER], tools=TOOLS, enable_thinking=False, **REASONING),
    "tools_thinking_off_required": _inputs([USER], tools=TOOLS, enable_thinking=False, tool_choice="required",
                                           **REASONING),
    "tools_none_reasoning": _inputs([USER], tools=TOOLS, tool_choice="none", **REASONING),
    "response_format_reasoning": _inputs([USER], json_schema=RESPONSE_SCHEMA, **REASONING),
    "response_format_thinking_off": _inputs([USER], json_schema=RESPONSE_SCHEMA, enable_thinking=False,
                                            **REASONING),
    "response_format_with_tools": _inputs([USER], tools=TOOLS, json_schema=RESPONSE_SCHEMA),
    "response_format_empty_schema": _inputs([USER], json_schema={}),
    "argument_layouts": _inputs([USER], tools=[MOVE_TOOL, PING_TOOL, *TOOLS], parallel_tool_calls=True),
    "argument_layouts_required": _inputs([USER], tools=[MOVE_TOOL, PING_TOOL], tool_choice="required",
                                         **REASONING),
    "continue_reasoning_only": _inputs(
        [USER, {"role": "assistant", "content": "", "reasoning_content": "The user wants"}],
        add_generation_prompt=False, continue_final_message=True, **REASONING),
    "continue_content_with_reasoning": _inputs(
        [USER, {"role": "assistant", "content": "It is", "reasoning_content": "Check the forecast."}],
        add_generation_prompt=False, continue_final_message=True, **REASONING),
    "continue_content_as_reasoning": _inputs(
        [USER, {"role": "assistant", "content": "It is", "reasoning_content": "Check the forecast."}],
        add_generation_prompt=False, continue_final_message="reasoning_content", **REASONING),
    "continue_with_tools": _inputs(
        [USER, {"role": "assistant", "content": "Let me check."}], tools=TOOLS,
        add_generation_prompt=False, continue_final_message=True, **REASONING),
    # V4: results given in another order than the calls are rendered in call order
    "results_out_of_order": _inputs(
        [USER, _calls(CALL_WEATHER, CALL_CALC_TYPED, CALL_MOVE), TOOL_RESULT_MOVE, TOOL_RESULT_WEATHER,
         TOOL_RESULT_CALC], tools=[*TOOLS, MOVE_TOOL], parallel_tool_calls=True),
    "results_with_user_between": _inputs(
        [USER, _calls(CALL_WEATHER, CALL_CALC_TYPED), TOOL_RESULT_CALC, USER_2, TOOL_RESULT_WEATHER],
        tools=TOOLS, parallel_tool_calls=True),
    "results_unknown_id": _inputs(
        [USER, _calls(CALL_WEATHER, CALL_CALC_TYPED), TOOL_RESULT_CALC,
         {"role": "tool", "tool_call_id": "call_9999", "content": "stray"}, TOOL_RESULT_WEATHER],
        tools=TOOLS, parallel_tool_calls=True),
    "results_two_turns": _inputs(
        [USER, _calls(CALL_WEATHER, CALL_CALC_TYPED), TOOL_RESULT_CALC, TOOL_RESULT_WEATHER,
         {"role": "assistant", "content": "Done."}, USER_2, _calls(CALL_MOVE, CALL_WEATHER),
         TOOL_RESULT_WEATHER, TOOL_RESULT_MOVE], tools=[*TOOLS, MOVE_TOOL], parallel_tool_calls=True,
        **REASONING),
}


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
