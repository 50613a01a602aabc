"""Muse Glimmer beyond the corpus: the builder's branches the 19 scenarios miss, against the oracle."""

from __future__ import annotations

import pytest
from specialized_parity import BRANCH_CASES, USER, assert_apply_equal, request_inputs

from llamact.json_types import Json
from llamact.parity.oracle import OracleClient

pytestmark = pytest.mark.parity

TEMPLATES = ["muse-glimmer"]

# arguments typed through a $ref (the schema node keeps its document), a string-or-number union
# (raw text: it may be a string), a numeric enum and an array (JSON)
REF_TOOL: Json = {"type": "function", "function": {"name": "locate", "parameters": {
    "type": "object",
    "properties": {"where": {"$ref": "#/$defs/Loc"},
                   "label": {"anyOf": [{"type": "string"}, {"type": "number"}]},
                   "level": {"enum": [1, 2, 3]},
                   "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["where"],
    "$defs": {"Loc": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                      "required": ["lat"]}}}}}

CASES: dict[str, Json] = {
    **BRANCH_CASES,
    "ref_and_union_arguments": request_inputs([USER], tools=[REF_TOOL], tool_choice="required"),
    "ref_and_union_arguments_parallel": request_inputs([USER], tools=[REF_TOOL], parallel_tool_calls=True),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("stem", TEMPLATES)
def test_muse_glimmer_apply_equals_oracle(oracle: OracleClient, stem: str, case: str) -> None:
    assert_apply_equal(oracle, stem, CASES[case])
