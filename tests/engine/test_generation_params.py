"""GenerationParams.stop: one string is one stop sequence (as OpenAI's `str | list[str]`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llamact import GenerationParams, LlamaEngine, LlamaInferenceException, ModelParams, StopReason


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        ("END", ("END",)),
        (["END", "\n\n"], ("END", "\n\n")),
        (("a",), ("a",)),
        ([], ()),
        ((), ()),
        (iter(["x", "y"]), ("x", "y")),
    ],
)
def test_stop_is_a_string_or_a_sequence_of_strings(stop: Any, expected: tuple[str, ...]) -> None:
    assert GenerationParams(stop=stop).stop == expected


@pytest.mark.parametrize("stop", [["END", 5], [None], [b"END"], b"END", 5, None, [1.5]])
def test_a_stop_that_is_not_text_is_refused(stop: Any) -> None:
    with pytest.raises(LlamaInferenceException, match="stop"):
        GenerationParams(stop=stop)


@pytest.mark.model
def test_a_string_stop_does_not_stop_on_its_characters(smollm2_path: Path) -> None:
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=256, n_threads=2)) as engine:
        plain = engine.complete("The capital of France is", GenerationParams(greedy=True, max_tokens=12))
        never = "zq-never-here"
        assert never not in plain.text and set(never) & set(plain.text)  # its characters do occur
        result = engine.complete("The capital of France is", GenerationParams(greedy=True, max_tokens=12, stop=never))
        assert result.stop_reason is StopReason.MAX_TOKENS and result.text == plain.text
        # a word of the output, as a plain string, stops there
        word = plain.text.split()[1]
        cut = engine.complete("The capital of France is", GenerationParams(greedy=True, max_tokens=12, stop=word))
        assert cut.stop_reason is StopReason.STOP_STRING and cut.stop_string == word
        assert cut.text == plain.text[: plain.text.index(word)]


@pytest.mark.parametrize("value", ["temperature", ["top_k", 3], None])
def test_samplers_and_dry_breakers_are_sequences_of_strings(value: Any) -> None:
    for name in ("samplers", "dry_sequence_breakers"):
        with pytest.raises(LlamaInferenceException, match=name):
            GenerationParams(**{name: value})


@pytest.mark.model
def test_the_sampler_order_is_the_chain(smollm2_path: Path) -> None:
    """``samplers`` builds the chain in its order and leaves out what it does not name: temperature
    before a top-k of 1 is greedy, top-k after a hot temperature alone is not; an unknown name is
    refused when the chain is made."""
    from llamact.errors import LlamaSamplerParameterException

    prompt = "Once upon a time"
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=256, n_threads=2)) as engine:
        greedy = engine.complete(prompt, GenerationParams(greedy=True, max_tokens=16)).text
        top_1 = GenerationParams(temperature=3.0, top_k=1, seed=1, max_tokens=16, samplers=("temperature", "top_k"))
        assert engine.complete(prompt, top_1).text == greedy
        hot = GenerationParams(temperature=3.0, top_k=1, seed=1, max_tokens=16, samplers=("temperature",))
        assert engine.complete(prompt, hot).text != greedy
        with pytest.raises(LlamaSamplerParameterException, match="unknown sampler 'infill'"):
            engine.complete(prompt, GenerationParams(seed=1, samplers=("infill",)))
