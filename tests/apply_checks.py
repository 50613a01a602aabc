"""Shared by the specialized-family tests: one ``chat_apply`` request, ours checked against upstream's."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from llamact.errors import LlamaException
from llamact.json_types import Json
from llamact.parity.apply_runner import apply_request
from llamact.parity.components import ORACLE_NOW
from llamact.parity.corpus import BOS_TOKEN, EOS_TOKEN
from llamact.parity.oracle import OracleClient, OracleError

__all__ = ["assert_apply_matches", "chat_inputs", "edge_cases", "template_source"]

_TEMPLATES = Path(__file__).resolve().parent.parent / "vendor" / "llama.cpp" / "models" / "templates"


def template_source(stem: str) -> str:
    """A vendored template's source (models/templates/<stem>.jinja)."""
    path = _TEMPLATES / f"{stem}.jinja"
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/vendor_llama_cpp.py")
    return path.read_text(encoding="utf-8")


def assert_apply_matches(oracle: OracleClient, source: str, inputs: Json) -> Json:
    """Our ``chat_apply`` answer for ``source`` and ``inputs`` (the oracle's request shape) equals
    upstream's, field by field; an upstream error must be a LlamaException with the same text.
    Returns upstream's answer (or its OracleError)."""
    request = {"template": source, "bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN, "add_bos": False,
               "add_eos": False, "inputs": inputs}
    expected = oracle.request("chat_apply", **copy.deepcopy(request))
    if isinstance(expected, OracleError):
        with pytest.raises(LlamaException) as raised:
            apply_request(request, ORACLE_NOW)
        assert str(raised.value) == expected.message, f"upstream: {expected.message}\nours: {raised.value}"
        return expected
    got = apply_request(request, ORACLE_NOW)
    for key in expected:
        assert got.get(key) == expected[key], (
            f"{key} differs\ninputs: {json.dumps(inputs)[:2000]}\n"
            f"expected: {json.dumps(expected[key])[:3000]}\ngot: {json.dumps(got.get(key))[:3000]}")
    assert got == expected
    return expected


def chat_inputs(messages: list[Json], **options: Json) -> Json:
    """A ``chat_apply`` request's ``inputs`` (the corpus's defaults, ``options`` on top; copies)."""
    out: Json = {"messages": copy.deepcopy(messages), "tools": [], "tool_choice": "auto",
                 "parallel_tool_calls": False, "reasoning_format": "none", "enable_thinking": True,
                 "add_generation_prompt": True, "continue_final_message": False, "chat_template_kwargs": {}}
    out.update(copy.deepcopy(options))
    return out


_USER = {"role": "user", "content": "What is the weather in Paris?"}
_BAD_REF_TOOL: Json = {"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"a": {"$ref": "#/nope"}}, "required": ["a"]}}}
_ODD_NAME_TOOL: Json = {"type": "function", "function": {"name": "get weather!", "parameters": {
    "type": "object", "properties": {"a b": {"type": "string"}}}}}
_ARRAY_PARAMS_TOOL: Json = {"type": "function", "function": {"name": "g", "parameters": {
    "type": "array", "items": {"type": "string"}}}}


def edge_cases() -> dict[str, Json]:
    """Tools and schemas at the edges: an unresolvable ``$ref`` (an error where the family reads the
    parameters), names that need sanitising into rule names, non-object parameters, a string schema."""
    return {
        "tool_schema_unresolvable_ref": chat_inputs([_USER], tools=[_BAD_REF_TOOL]),
        "tool_names_sanitised": chat_inputs([_USER], tools=[_ODD_NAME_TOOL], parallel_tool_calls=True),
        "array_parameters": chat_inputs([_USER], tools=[_ARRAY_PARAMS_TOOL]),
        "string_response_schema": chat_inputs([_USER], json_schema={"type": "string"}),
        "response_schema_unresolvable_ref": chat_inputs([_USER], json_schema={"type": "object", "properties": {
            "a": {"$ref": "#/nope"}}}),
    }
