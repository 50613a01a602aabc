"""Ling 3.0, Cohere2 MoE, LFM2 / LFM2.5, GigaChat 3 and MiniMax-M3 against the oracle, on the
branches the corpus's 19 scenarios miss: reasoning with tools (Ling's thought may end at a tool
call), required and parallel calls together, thinking off with tools, response formats with tools
(Cohere's schema text competes with the calls; LFM2 and MiniMax take even an empty schema),
continuations of reasoning (the thought stays open), argument layouts the corpus tools lack
(several required arguments, none, a non-object root, unions with and without a string) and
MiniMax's recursive XML values (unions, arrays of objects, objects without properties, refs), plus
schemas upstream rejects.
Expected values always come from the oracle."""

from __future__ import annotations

import copy

import pytest
from apply_checks import assert_apply_matches, template_source

from llamact.chat.specialized import detect
from llamact.chat.templates import normalized_source
from llamact.jinja import JinjaException
from llamact.json_types import Json
from llamact.parity.apply_runner import apply_request
from llamact.parity.components import ORACLE_NOW
from llamact.parity.corpus import BOS_TOKEN, EOS_TOKEN
from llamact.parity.oracle import OracleError
from llamact.parity.scenarios import RESPONSE_SCHEMA, TOOLS, USER

pytestmark = pytest.mark.parity

STEMS = {
    "ling_3": ["inclusionai-ling-3.0-flash"],
    "cohere2_moe": ["Cohere2MoE"],
    "lfm2": ["LFM2-8B-A1B"],
    "lfm2_5": ["LFM2.5-8B-A1B", "LFM2.5-Instruct"],
    "gigachat_v3": ["GigaChat3-10B-A1.8B"],
    "minimax_m3": ["MiniMax-M3"],
}

MOVE_TOOL: Json = {"type": "function", "function": {
    "name": "move", "description": "Move a piece",
    "parameters": {"type": "object", "properties": {
        "x": {"type": "integer"}, "y": {"type": "integer"}, "label": {"type": ["string", "number"]},
        "speed": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]}},
        "required": ["x", "y"]}}}
PING_TOOL: Json = {"type": "function", "function": {"name": "ping", "description": "Ping"}}
# MiniMax expands values recursively: every schema shape its builder tells apart
SHAPES_TOOL: Json = {"type": "function", "function": {
    "name": "plan", "description": "Plan a route",
    "parameters": {
        "type": "object",
        "$defs": {"stop": {"type": "object", "properties": {"city": {"type": "string"},
                                                            "days": {"type": "integer"}},
                           "required": ["city"]}},
        "properties": {
            "stops": {"type": "array", "items": {"$ref": "#/$defs/stop"}},
            "legs": {"type": "array", "items": {"type": "object", "properties": {
                "from": {"type": "string"}, "to": {"type": "string"}}, "required": ["from", "to"]}},
            "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
            "budget": {"anyOf": [{"type": "number"}, {"type": "null"},
                                 {"type": "object", "properties": {"max": {"type": "number"}}}]},
            "meta": {"type": "object"},
            "mode": {"enum": ["fast", "cheap"]},
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
            "note": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        },
        "required": ["stops", "budget", "mode"],
    }}}
# parameters whose root is not an object: no arguments to expand
RAW_TOOL: Json = {"type": "function", "function": {"name": "echo", "description": "Echo",
                                                   "parameters": {"type": "string"}}}
# a schema the converter rejects: upstream's error text must come back
BAD_SCHEMA_TOOL: Json = {"type": "function", "function": {
    "name": "broken", "description": "Bad schema",
    "parameters": {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}}}


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
    "tools_required_parallel": _inputs([USER], tools=TOOLS, tool_choice="required", parallel_tool_calls=True),
    "tools_thinking_off": _inputs([USER], tools=TOOLS, enable_thinking=False, **REASONING),
    "tools_none_reasoning": _inputs([USER], tools=TOOLS, tool_choice="none", **REASONING),
    "response_format_reasoning": _inputs([USER], json_schema=RESPONSE_SCHEMA, **REASONING),
    "response_format_thinking_off": _inputs([USER], json_schema=RESPONSE_SCHEMA, enable_thinking=False,
                                            **REASONING),
    "response_format_with_tools": _inputs([USER], tools=TOOLS, json_schema=RESPONSE_SCHEMA),
    "response_format_with_tools_required": _inputs([USER], tools=TOOLS, tool_choice="required",
                                                   json_schema=RESPONSE_SCHEMA, **REASONING),
    "response_format_empty_schema": _inputs([USER], json_schema={}),
    "argument_layouts": _inputs([USER], tools=[MOVE_TOOL, PING_TOOL, *TOOLS], parallel_tool_calls=True),
    "argument_layouts_required": _inputs([USER], tools=[MOVE_TOOL, PING_TOOL], tool_choice="required",
                                         **REASONING),
    "argument_shapes": _inputs([USER], tools=[SHAPES_TOOL, PING_TOOL, RAW_TOOL], parallel_tool_calls=True, **REASONING),
    "bad_schema": _inputs([USER], tools=[BAD_SCHEMA_TOOL]),
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
}

# GigaChat 3's own template fails on a type array (`ty in ["number", "integer"]` with `ty` a list):
# upstream raises a Jinja error whose text carries a source excerpt that llamact's errors do not copy
TEMPLATE_FAILS = {("GigaChat3-10B-A1.8B", "argument_layouts"), ("GigaChat3-10B-A1.8B", "argument_layouts_required")}

PAIRS = [(family, stem) for family, stems in STEMS.items() for stem in stems]


def _request(source: str, inputs: Json) -> Json:
    return {"template": source, "bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN, "add_bos": False, "add_eos": False,
            "inputs": copy.deepcopy(inputs)}


@pytest.mark.parametrize(("family", "stem"), PAIRS, ids=[stem for _, stem in PAIRS])
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_apply_matches_upstream(oracle, family: str, stem: str, case: str) -> None:
    source = template_source(stem)
    detected = detect(normalized_source(source))
    assert detected is not None and detected.family == family  # the family under test is the one built
    if (stem, case) in TEMPLATE_FAILS:
        expected = oracle.request("chat_apply", **_request(source, CASES[case]))
        assert isinstance(expected, OracleError), "upstream no longer fails here: move the case back"
        with pytest.raises(JinjaException) as raised:
            apply_request(_request(source, CASES[case]), ORACLE_NOW)
        assert expected.message == raised.value.reason  # upstream's text, its location preamble included
        return
    assert_apply_matches(oracle, source, CASES[case])
