"""Functionary v3.2 beyond the corpus: the builder's branches the 19 scenarios miss, against the oracle."""

from __future__ import annotations

import pytest
from specialized_parity import BRANCH_CASES, USER, assert_apply_equal, request_inputs

from llamact.json_types import Json
from llamact.parity.oracle import OracleClient

pytestmark = pytest.mark.parity

TEMPLATES = ["meetkai-functionary-medium-v3.2"]

CASES: dict[str, Json] = {
    **BRANCH_CASES,
    "continue_typed_content": request_inputs(
        [USER, {"role": "assistant", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]}],
        add_generation_prompt=False, continue_final_message="content"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("stem", TEMPLATES)
def test_functionary_v3_2_apply_equals_oracle(oracle: OracleClient, stem: str, case: str) -> None:
    assert_apply_equal(oracle, stem, CASES[case])
