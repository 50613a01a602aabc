"""Grammar-constrained generation through the engine, and grammars that must never reach llama.cpp."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llamact import GenerationParams, LlamaEngine, LlamaInferenceException, ModelParams, StopReason
from llamact.grammar import GbnfAcceptor, json_schema_to_grammar, parse_gbnf

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def engine(smollm2_path: Path):
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=1024, n_threads=2)) as eng:
        yield eng


def test_output_follows_a_json_schema_grammar(engine: LlamaEngine) -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 20},
                                               "score": {"type": "integer", "minimum": 0, "maximum": 9}},
              "required": ["answer", "score"], "additionalProperties": False}
    grammar = json_schema_to_grammar(schema)
    prompt = engine.chat_template([{"role": "system", "content": "You reply with JSON only."},
                                   {"role": "user", "content": "Reply in JSON with an answer and a score."}]).prompt
    result = engine.complete(prompt, GenerationParams(greedy=True, max_tokens=64, grammar=grammar))
    assert result.stop_reason is StopReason.EOG, result  # the grammar completed and allowed EOG
    value = json.loads(result.text)
    assert set(value) == {"answer", "score"} and 0 <= value["score"] <= 9
    assert GbnfAcceptor(parse_gbnf(grammar)).accepts(result.text)


@pytest.mark.parametrize(
    "grammar",
    ['root ::= "a"{5,2}', "root ::= [", "root ::= undefined-rule", 'other ::= "x"'],
)
def test_invalid_grammars_raise_before_generating(engine: LlamaEngine, grammar: str) -> None:
    # the refusal comes from generate() itself, before any token is produced
    with pytest.raises(LlamaInferenceException, match="invalid grammar"):
        engine.generate("Hello", GenerationParams(grammar=grammar))
    assert engine.complete("Hello", GenerationParams(greedy=True, max_tokens=2)).tokens  # engine still free
