"""Ministral 3 / Devstral beyond the corpus: the builder's branches the 19 scenarios miss, against the oracle."""

from __future__ import annotations

import pytest
from specialized_parity import BRANCH_CASES, REASONING, SYSTEM, USER, assert_apply_equal, request_inputs

from llamact.json_types import Json
from llamact.parity.oracle import OracleClient

pytestmark = pytest.mark.parity

TEMPLATES = ["mistralai-Ministral-3-14B-Reasoning-2512", "unsloth-mistral-Devstral-Small-2507"]

CASES: dict[str, Json] = {
    **BRANCH_CASES,
    # the thinking block comes first: Devstral, which renders the first block's text, drops the answer
    "typed_assistant_with_reasoning": request_inputs(
        [SYSTEM, USER, {"role": "assistant", "content": [{"type": "text", "text": "Part one."},
                                                         {"type": "text", "text": "Part two."}],
                        "reasoning_content": "Thinking."}, {"role": "user", "content": "More?"}],
        **REASONING),
    # typed assistant content stays typed blocks (Devstral reads the first; Ministral's template
    # takes strings only, so the pipeline joins the parts before the builder sees them)
    "typed_assistant": request_inputs(
        [USER, {"role": "assistant", "content": [{"type": "text", "text": "Part one."},
                                                 {"type": "text", "text": "Part two."}]},
         {"role": "user", "content": "More?"}]),
    # the system message may carry a thought too
    "system_with_reasoning": request_inputs([{"role": "system", "content": "Sys.", "reasoning_content": "Hm."},
                                             USER]),
    "continue_typed_content": request_inputs(
        [USER, {"role": "assistant", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]}],
        add_generation_prompt=False, continue_final_message="content"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("stem", TEMPLATES)
def test_ministral3_apply_equals_oracle(oracle: OracleClient, stem: str, case: str) -> None:
    assert_apply_equal(oracle, stem, CASES[case])
