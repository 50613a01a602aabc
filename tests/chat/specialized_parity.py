"""Shared by the specialized-family tests: chat_apply requests beyond the corpus, checked against the oracle.

``BRANCH_CASES`` are requests that reach branches of the family builders the corpus's 19 scenarios
miss (reasoning extraction together with tools or a response format, ``tool_choice="required"``
with parallel calls, continuing a thought, a tool without parameters, ...). ``assert_apply_equal``
runs one request through llamact and the oracle: the answers must be equal field by field, and an
oracle error must be matched by a ``LlamaException``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llamact.errors import LlamaException
from llamact.json_types import Json
from llamact.parity.apply_runner import apply_request
from llamact.parity.components import ORACLE_NOW
from llamact.parity.corpus import BOS_TOKEN, EOS_TOKEN
from llamact.parity.oracle import OracleClient, OracleError
from llamact.parity.scenarios import (
    CALL_CALC_TYPED,
    CALL_WEATHER,
    RESPONSE_SCHEMA,
    SYSTEM,
    TOOL_RESULT_CALC,
    TOOL_RESULT_WEATHER,
    TOOLS,
    USER,
)

LLAMA_CPP = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp"

NO_PARAMS_TOOL: Json = {"type": "function", "function": {"name": "get_time", "description": "The current time"}}


def template_source(stem: str) -> str:
    return (LLAMA_CPP / "models" / "templates" / f"{stem}.jinja").read_text(encoding="utf-8")


def request_inputs(messages: list[Json], **options: Json) -> Json:
    """A ``chat_apply`` inputs object: the corpus's defaults, then ``options`` (upstream's names)."""
    out: Json = {"messages": messages, "tools": [], "tool_choice": "auto", "parallel_tool_calls": False,
                 "reasoning_format": "none", "enable_thinking": True, "add_generation_prompt": True,
                 "continue_final_message": False, "chat_template_kwargs": {}}
    out.update(options)
    return out


def _assistant(content: str = "", reasoning: str = "", calls: tuple[Json, ...] = ()) -> Json:
    msg: Json = {"role": "assistant", "content": content}
    if reasoning:
        msg["reasoning_content"] = reasoning
    if calls:
        msg["tool_calls"] = list(calls)
    return msg


REASONING = {"reasoning_format": "deepseek"}

BRANCH_CASES: dict[str, Json] = {
    "tools_reasoning": request_inputs([SYSTEM, USER], tools=TOOLS, **REASONING),
    "tools_parallel_reasoning": request_inputs([USER], tools=TOOLS, parallel_tool_calls=True, **REASONING),
    "tools_required_reasoning": request_inputs([USER], tools=TOOLS, tool_choice="required", **REASONING),
    "tools_required_parallel": request_inputs([USER], tools=TOOLS, tool_choice="required",
                                              parallel_tool_calls=True),
    "tools_none_reasoning": request_inputs([USER], tools=TOOLS, tool_choice="none", **REASONING),
    "tools_thinking_off": request_inputs([USER], tools=TOOLS, enable_thinking=False, **REASONING),
    "response_format_reasoning": request_inputs([USER], json_schema=RESPONSE_SCHEMA, **REASONING),
    "response_format_tools": request_inputs([USER], tools=TOOLS, json_schema=RESPONSE_SCHEMA),
    "response_format_tools_required": request_inputs([USER], tools=TOOLS, tool_choice="required",
                                                     json_schema=RESPONSE_SCHEMA),
    "response_format_empty_schema": request_inputs([USER], json_schema={}),
    "no_params_tool": request_inputs([USER], tools=[NO_PARAMS_TOOL, *TOOLS], parallel_tool_calls=True,
                                     **REASONING),
    "no_params_tool_required": request_inputs([USER], tools=[NO_PARAMS_TOOL], tool_choice="required"),
    # continuation: a thought alone is continued as reasoning; "content" closes it first
    "continue_reasoning_auto": request_inputs([USER, _assistant(reasoning="The user wants the weather")],
                                              add_generation_prompt=False, continue_final_message=True,
                                              **REASONING),
    "continue_content_after_reasoning": request_inputs(
        [USER, _assistant("It is", "Check the forecast.")], add_generation_prompt=False,
        continue_final_message="content", **REASONING),
    "continue_reasoning_explicit": request_inputs(
        [USER, _assistant("It is", "Check the forecast")], add_generation_prompt=False,
        continue_final_message="reasoning_content", **REASONING),
    "continue_with_tools": request_inputs([USER, _assistant("Let me check")], tools=TOOLS,
                                          add_generation_prompt=False, continue_final_message=True),
    "reasoning_tool_call_history": request_inputs(
        [USER, _assistant("I will check.", "Need the forecast.", (CALL_WEATHER,)), TOOL_RESULT_WEATHER],
        tools=TOOLS, **REASONING),
    "reasoning_parallel_call_history": request_inputs(
        [USER, _assistant("", "Two calls.", (CALL_WEATHER, CALL_CALC_TYPED)), TOOL_RESULT_WEATHER,
         TOOL_RESULT_CALC], tools=TOOLS, parallel_tool_calls=True, **REASONING),
}


def assert_apply_equal(oracle: OracleClient, stem: str, inputs: Json) -> Json:
    """llamact's ``chat_apply`` answer for ``inputs`` on template ``stem`` equals the oracle's;
    returns the oracle's answer (an :class:`OracleError` when upstream refused the request)."""
    request = {"template": template_source(stem), "bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN,
               "add_bos": False, "add_eos": False, "inputs": inputs}
    expected = oracle.request("chat_apply", **request)
    if isinstance(expected, OracleError):
        with pytest.raises(LlamaException):
            apply_request(request, ORACLE_NOW)
        return expected
    got = apply_request(request, ORACLE_NOW)
    differing = [key for key in expected if expected[key] != got.get(key)]
    assert not differing, (f"{stem}: {differing} differ\ninputs: {inputs}\n"
                           + "\n".join(f"{key}:\n  expected {expected[key]!r}\n  got      {got.get(key)!r}"
                                       for key in differing))
    return expected
