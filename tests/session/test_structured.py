"""Typed structured output: a pydantic model with nested objects, enums, lists and optional fields
from both bundled models; TypedDict, dataclass and dict schemas; a schema keyword the grammar cannot
enforce refused before generation; an answer that fails validation raised with its raw text."""

from __future__ import annotations

import dataclasses
import enum
import json
from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic import AfterValidator, BaseModel, Field
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from llamact import ChatSession, GenerationParams, LlamaEngine, ModelParams, parse_structured_json
from llamact.errors import LlamaInferenceException, LlamaUnsupportedException

pytestmark = pytest.mark.model

Short = Annotated[str, Field(min_length=1, max_length=10)]
ASK = [{"role": "user", "content": "Describe a red bicycle as JSON."}]


class Color(str, enum.Enum):
    red = "red"
    green = "green"
    blue = "blue"


class Part(BaseModel):
    name: Short
    count: Annotated[int, Field(ge=0, le=9)]


class Bicycle(BaseModel):
    color: Color
    parts: Annotated[list[Part], Field(min_length=1, max_length=2)]
    owner: Short | None = None


class Verdict(TypedDict):
    answer: Literal["yes", "no"]


@dataclasses.dataclass
class Score:
    value: Annotated[int, Field(ge=1, le=5)]


def _refuse(answer: str) -> str:
    raise ValueError("no answer is good enough")


class Picky(BaseModel):
    answer: Annotated[Literal["yes", "no"], AfterValidator(_refuse)]


def test_a_nested_model_from_each_model(model_path: Path) -> None:
    with LlamaEngine.load(model_path, ModelParams(n_ctx=512, n_threads=1)) as engine:
        bike = engine.create_structured(ASK, Bicycle, params=GenerationParams(greedy=True, max_tokens=128))
    assert isinstance(bike, Bicycle) and isinstance(bike.color, Color)
    assert 1 <= len(bike.parts) <= 2 and all(isinstance(p, Part) for p in bike.parts)


@pytest.fixture(scope="module")
def smollm2(smollm2_path: Path):
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=512, n_threads=1)) as eng:
        yield eng


SHORT = GenerationParams(greedy=True, max_tokens=24)


def test_typed_dict_dataclass_and_dict_schema(smollm2: LlamaEngine) -> None:
    verdict = smollm2.create_structured([{"role": "user", "content": "Is the sky blue?"}], Verdict, params=SHORT)
    assert verdict["answer"] in ("yes", "no")
    score = smollm2.create_structured([{"role": "user", "content": "Rate pizza from 1 to 5."}], Score, params=SHORT)
    assert isinstance(score, Score) and 1 <= score.value <= 5
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    assert set(smollm2.create_structured(ASK, schema, params=SHORT)) == {"ok"}


def test_parse_structured_json_of_a_started_stream(smollm2: LlamaEngine) -> None:
    from llamact.engine.structured import response_format_for

    stream = smollm2.create(ASK, response_format=response_format_for(Verdict), params=SHORT)
    first = next(stream)
    assert first.role == "assistant"
    assert parse_structured_json(stream, Verdict)["answer"] in ("yes", "no")


@pytest.mark.parametrize("output", [
    {"type": "object", "properties": {"a": {"not": {"type": "string"}}}},
    {"type": "integer", "multipleOf": 3},
    {"type": "number", "maximum": 3.5},
    {"type": "string", "format": "email"},
    {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
])
def test_unenforceable_keywords_are_refused_before_generation(smollm2: LlamaEngine, output: dict) -> None:
    before = smollm2.context_tokens
    with pytest.raises(LlamaUnsupportedException, match="cannot be enforced"):
        smollm2.create_structured(ASK, output, params=SHORT)
    assert smollm2.context_tokens == before  # nothing was evaluated


def test_a_pydantic_constraint_the_grammar_cannot_see_is_refused() -> None:
    class Odd(BaseModel):
        n: Annotated[int, Field(multiple_of=2)]

    from llamact.engine.structured import schema_for

    with pytest.raises(LlamaUnsupportedException, match="multipleOf"):
        schema_for(Odd)


def test_an_answer_that_fails_validation_carries_its_raw_text(smollm2: LlamaEngine) -> None:
    with pytest.raises(LlamaInferenceException, match="does not match") as info:
        smollm2.create_structured([{"role": "user", "content": "Yes or no?"}], Picky, params=SHORT)
    assert json.loads(info.value.details["raw"])["answer"] in ("yes", "no")
    with pytest.raises(LlamaInferenceException, match="ended early") as cut:
        smollm2.create_structured(ASK, Bicycle, params=GenerationParams(greedy=True, max_tokens=4))
    assert cut.value.details["finish_reason"] == "length" and cut.value.details["raw"]


def test_an_answer_cut_inside_a_character_keeps_whole_characters(smollm2: LlamaEngine) -> None:
    """Issue 26: max_tokens cutting a character left the raw text ending in half of it (shown as
    U+FFFD); the raw answer is the whole characters generated."""
    schema = {"type": "string", "enum": ["日本語のテキストです"]}
    ask = [{"role": "user", "content": "Say something in Japanese"}]
    cuts = 0
    for n in range(4, 12):   # each token of the answer, wherever SmolLM2's tokens split the characters
        with pytest.raises(LlamaInferenceException, match="ended early") as cut:
            smollm2.create_structured(ask, schema, params=GenerationParams(greedy=True, max_tokens=n))
        raw = cut.value.details["raw"]
        assert "\ufffd" not in raw and '"日本語のテキストです"'.startswith(raw.lstrip()), raw
        reply = smollm2.complete_chat(ask, params=GenerationParams(greedy=True, max_tokens=n),
                                          response_format={"type": "json_schema", "json_schema": {"schema": schema}})
        cuts += reply.content.endswith("\ufffd")   # the reply itself is llama-server's text
    assert cuts > 0   # the cut did fall inside a character


def test_session_structured_answer_joins_the_history(smollm2: LlamaEngine) -> None:
    session = ChatSession(smollm2, "Answer in JSON.", params=SHORT)
    verdict = session.create_structured("Is water wet?", Verdict)
    assert verdict["answer"] in ("yes", "no")
    assert [m["role"] for m in session.history] == ["user", "assistant"]
    assert json.loads(session.history[-1]["content"]) == verdict
