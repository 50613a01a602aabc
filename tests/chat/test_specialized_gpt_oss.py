"""GPT-OSS (Harmony) beyond the corpus: the builder's branches the 19 scenarios miss, against the oracle."""

from __future__ import annotations

import pytest
from specialized_parity import BRANCH_CASES, REASONING, USER, assert_apply_equal, request_inputs

from llamact.json_types import Json
from llamact.parity.oracle import OracleClient

pytestmark = pytest.mark.parity

TEMPLATES = ["openai-gpt-oss-120b"]

CASES: dict[str, Json] = {
    **BRANCH_CASES,
    # "<|channel|>" templates keep the developer role (the workaround maps it to system elsewhere)
    "developer_role": request_inputs([{"role": "developer", "content": "Answer in French."}, USER]),
    # a turn with reasoning and tool calls loses its content: the template expects none there
    "reasoning_calls_and_content": request_inputs(
        [USER, {"role": "assistant", "content": "Checking.", "reasoning_content": "Weather tool.",
                "tool_calls": [{"id": "c1", "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
         {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
        tools=BRANCH_CASES["tools_reasoning"]["tools"], **REASONING),
    # the history's last <|return|> becomes <|end|> when the prompt is continued without a generation prompt
    "history_return_token": request_inputs(
        [USER, {"role": "assistant", "content": "Sunny.", "reasoning_content": "Easy."}],
        add_generation_prompt=False, **REASONING),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("stem", TEMPLATES)
def test_gpt_oss_apply_equals_oracle(oracle: OracleClient, stem: str, case: str) -> None:
    assert_apply_equal(oracle, stem, CASES[case])
