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
