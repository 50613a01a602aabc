"""Gemma 4 against the oracle, on the branches the corpus's 19 scenarios miss: reasoning extraction
with tools (required, parallel), response formats (with reasoning, with tools, an empty schema),
continuations (after a closed turn the model turn is reopened), and the tool-response folding of
older templates: an assistant tool call followed by its results, single and parallel, JSON and plain
results, more results than calls, reasoning on the calling message, a final answer or another call
after the results.

Older templates are the vendored interleaved one (it has no ``{#- OpenAI Chat Completions:``
marker) and the current one with its marker line removed (same template, folded messages)."""

from __future__ import annotations

import copy

import pytest
from apply_checks import assert_apply_matches, chat_inputs, edge_cases, template_source

from llamact.chat.specialized.gemma4 import OPENAI_TEMPLATE_MARKER, fold_tool_responses
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

CURRENT = "google-gemma-4-31B-it"
INTERLEAVED = "google-gemma-4-31B-it-interleaved"
CURRENT_UNMARKED = "google-gemma-4-31B-it (marker line removed)"


def _source(name: str) -> str:
    if name != CURRENT_UNMARKED:
        return template_source(name)
    source = template_source(CURRENT)
    lines = source.splitlines(keepends=True)
    kept = [line for line in lines if OPENAI_TEMPLATE_MARKER not in line]
    assert len(kept) == len(lines) - 1, "the current Gemma 4 template should have one marker line"
    return "".join(kept)


TEMPLATES = [CURRENT, INTERLEAVED, CURRENT_UNMARKED]


def _calls(*calls: Json, content: str = "", **extra: Json) -> Json:
    return {"role": "assistant", "content": content, "tool_calls": list(calls), **extra}


def _result(call_id: str, content: Json) -> Json:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


REASONING = {"reasoning_format": "deepseek"}
FINAL = {"role": "assistant", "content": "It is sunny in Paris and 2+2 is 4."}

CASES: dict[str, Json] = {
    "tools_reasoning": chat_inputs([USER], tools=TOOLS, **REASONING),
    "tools_reasoning_required": chat_inputs([USER], tools=TOOLS, tool_choice="required", **REASONING),
    "tools_reasoning_parallel": chat_inputs([USER], tools=TOOLS, parallel_tool_calls=True, **REASONING),
    "tools_required_parallel": chat_inputs([USER], tools=TOOLS, tool_choice="required", parallel_tool_calls=True),
    "tools_thinking_off": chat_inputs([USER], tools=TOOLS, enable_thinking=False, **REASONING),
    "response_format_reasoning": chat_inputs([USER], json_schema=RESPONSE_SCHEMA, **REASONING),
    "response_format_with_tools": chat_inputs([USER], tools=TOOLS, json_schema=RESPONSE_SCHEMA),
    "response_format_empty_schema": chat_inputs([USER], json_schema={}),
    "continue_reasoning_only": chat_inputs(
        [USER, {"role": "assistant", "content": "", "reasoning_content": "The user wants"}],
        add_generation_prompt=False, continue_final_message=True, **REASONING),
    "continue_content_with_reasoning": chat_inputs(
        [USER, {"role": "assistant", "content": "It is", "reasoning_content": "Check the forecast."}],
        add_generation_prompt=False, continue_final_message=True, **REASONING),
    "continue_after_results": chat_inputs(
        [USER, _calls(CALL_WEATHER), TOOL_RESULT_WEATHER, {"role": "assistant", "content": "It is"}],
        tools=TOOLS, add_generation_prompt=False, continue_final_message=True),
    # an assistant tool call, then its results (the folding of older templates)
    "call_result_final": chat_inputs([USER, _calls(CALL_WEATHER), TOOL_RESULT_WEATHER, FINAL, USER_2], tools=TOOLS),
    "call_result_pending": chat_inputs([USER, _calls(CALL_WEATHER), TOOL_RESULT_WEATHER], tools=TOOLS),
    "parallel_results_final": chat_inputs(
        [USER, _calls(CALL_WEATHER, CALL_CALC_TYPED), TOOL_RESULT_WEATHER, TOOL_RESULT_CALC, FINAL, USER_2],
        tools=TOOLS, parallel_tool_calls=True),
    "parallel_results_json": chat_inputs(
        [USER, _calls(CALL_WEATHER, CALL_CALC_TYPED, content="Checking."),
         _result("call_0001", '{"temperature": 21, "sky": "clear", "tags": ["warm", null, true]}'),
         _result("call_0002", "[4, 4.5]"), USER_2],
        tools=TOOLS, parallel_tool_calls=True, **REASONING),
    "more_results_than_calls": chat_inputs(
        [USER, _calls(CALL_WEATHER), TOOL_RESULT_WEATHER, _result("call_extra", "late result"), USER_2],
        tools=TOOLS),
    "call_with_reasoning": chat_inputs(
        [USER, _calls(CALL_WEATHER, reasoning_content="I should look it up."), TOOL_RESULT_WEATHER, FINAL, USER_2],
        tools=TOOLS, **REASONING),
    # the template opens no model turn after a folded answer: upstream reopens it
    "call_result_final_last": chat_inputs([USER, _calls(CALL_WEATHER), TOOL_RESULT_WEATHER, FINAL], tools=TOOLS),
    # reasoning on a call after the last user turn is rendered by the interleaved template
    "call_with_reasoning_last": chat_inputs(
        [USER, _calls(CALL_WEATHER, reasoning_content="I should look it up."), TOOL_RESULT_WEATHER],
        tools=TOOLS, **REASONING),
    "call_after_results": chat_inputs(
        [USER, _calls(CALL_WEATHER), TOOL_RESULT_WEATHER, _calls(CALL_CALC_TYPED), TOOL_RESULT_CALC,
         {"role": "assistant", "content": ""}, USER_2], tools=TOOLS),
    "typed_result_content": chat_inputs(
        [USER, _calls(CALL_WEATHER), {"role": "tool", "tool_call_id": "call_0001",
                                      "content": [{"type": "text", "text": "sunny"}, {"type": "text", "text": "21 C"}]},
         USER_2], tools=TOOLS),
}

CASES.update(edge_cases())


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_apply_matches_upstream(oracle, template: str, case: str) -> None:
    assert_apply_matches(oracle, _source(template), CASES[case])


def test_folding_leaves_the_messages_alone() -> None:
    messages = [USER, _calls(CALL_WEATHER, CALL_CALC_TYPED), TOOL_RESULT_WEATHER, TOOL_RESULT_CALC, FINAL, USER_2]
    before = copy.deepcopy(messages)
    folded = fold_tool_responses(messages)
    assert messages == before
    assert len(folded) == 3  # user, the folded model turn, user


def test_request_messages_unchanged_by_apply() -> None:
    """The pipeline folds a private copy: the typed request (and its JSON) are left as they were."""
    from llamact.chat.apply import ChatTemplateInputs
    from llamact.chat.oai import parse_messages, parse_tools
    from llamact.chat.pipeline import apply_templates
    from llamact.chat.templates import load_chat_templates

    raw = [USER, _calls(CALL_WEATHER), TOOL_RESULT_WEATHER, FINAL, USER_2]
    before = copy.deepcopy(raw)
    messages = tuple(parse_messages(raw))
    typed_before = copy.deepcopy(messages)
    templates = load_chat_templates(_source(INTERLEAVED), origin="test template")
    result = apply_templates(templates, ChatTemplateInputs(messages=messages, tools=tuple(parse_tools(TOOLS))))
    assert "sunny, 21 C" in result.prompt
    assert raw == before
    assert messages == typed_before
