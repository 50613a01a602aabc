"""Kimi K2 and Kimi K3 beyond the corpus: the builders' branches the 19 scenarios miss, against the oracle."""

from __future__ import annotations

import pytest
from specialized_parity import BRANCH_CASES, USER, assert_apply_equal, request_inputs

from llamact.json_types import Json
from llamact.parity.oracle import OracleClient

pytestmark = pytest.mark.parity

K2_TEMPLATES = ["Kimi-K2-Instruct", "Kimi-K2-Thinking", "moonshotai-Kimi-K2"]
K3_TEMPLATES = ["Kimi-K3"]

# Kimi K3 reads an argument as raw text unless its property has a single non-string "type":
# untyped and union-typed properties are text; a tool with no properties takes no arguments
ODD_TOOLS: Json = [
    {"type": "function", "function": {"name": "odd", "parameters": {"type": "object", "properties": {
        "note": {"description": "untyped"}, "count": {"type": ["integer", "null"]}, "flag": {"type": "boolean"},
        "entries": {"type": "array"}}}}},
    {"type": "function", "function": {"name": "empty_props", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "no_props", "parameters": {"type": "object"}}},
]

K3_CASES: dict[str, Json] = {
    **BRANCH_CASES,
    "argument_types_from_schema": request_inputs([USER], tools=ODD_TOOLS, parallel_tool_calls=True),
    "argument_types_from_schema_required": request_inputs([USER], tools=ODD_TOOLS, tool_choice="required"),
}


@pytest.mark.parametrize("case", sorted(BRANCH_CASES))
@pytest.mark.parametrize("stem", K2_TEMPLATES)
def test_kimi_k2_apply_equals_oracle(oracle: OracleClient, stem: str, case: str) -> None:
    assert_apply_equal(oracle, stem, BRANCH_CASES[case])


@pytest.mark.parametrize("case", sorted(K3_CASES))
@pytest.mark.parametrize("stem", K3_TEMPLATES)
def test_kimi_k3_apply_equals_oracle(oracle: OracleClient, stem: str, case: str) -> None:
    assert_apply_equal(oracle, stem, K3_CASES[case])
