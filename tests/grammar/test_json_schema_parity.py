"""llamact.grammar's JSON-schema -> GBNF converter against upstream's own code (the oracle).

Every upstream vector (tests/test-json-schema-to-grammar.cpp) and every schema of
llamact.parity.schema_corpus is converted by both; a grammar must be byte-identical, and where
upstream refuses the schema llamact must raise LlamaUnsupportedException carrying upstream's
message and naming where in the schema the problem is.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from llamact.errors import LlamaUnsupportedException
from llamact.grammar import json_schema_to_grammar
from llamact.parity.oracle import OracleError
from llamact.parity.schema_corpus import SCHEMA_CORPUS
from llamact.parity.upstream_vectors import json_schema_vectors

pytestmark = pytest.mark.parity

LLAMA_CPP = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp"
POINTER = re.compile(r"\bat #(/[^\s:,)]*)?")


def _upstream_cases() -> list[tuple[str, Any]]:
    cases = []
    for vec in json_schema_vectors(LLAMA_CPP):
        try:
            schema = json.loads(vec.schema_text)
        except ValueError:
            schema = vec.schema_text  # upstream feeds some unparsable text on purpose
        cases.append((f"upstream/{vec.name}", schema))
    return cases


CASES = _upstream_cases() + [(f"corpus/{name}", schema) for name, schema in SCHEMA_CORPUS]


def test_corpus_is_broad() -> None:
    invalid = [name for name, _ in SCHEMA_CORPUS if name.startswith("bad")]
    assert len(SCHEMA_CORPUS) >= 200
    assert len(invalid) >= 40


@pytest.mark.parametrize("name,schema", CASES, ids=[name for name, _ in CASES])
def test_matches_oracle(oracle, name: str, schema: Any) -> None:
    expected = oracle.request("json_schema_to_grammar", schema=schema, force_gbnf=False)
    try:
        got: Any = json_schema_to_grammar(schema)
    except LlamaUnsupportedException as exc:
        got = exc
    if isinstance(expected, OracleError):
        assert isinstance(got, LlamaUnsupportedException), f"upstream refuses {name}: {expected.message}"
        assert expected.message in got.message
        assert POINTER.search(got.message), got.message
        assert got.details.get("path", "").startswith("#")
    else:
        assert not isinstance(got, Exception), f"upstream converts {name}, llamact raised {got}"
        assert got == expected
