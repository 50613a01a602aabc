"""Tokenizing under a limit (``llamact.native.token_limit``): the answer is always the whole text's
tokens, a refusal is true (the whole text holds more than the limit), and a huge text is refused
after counting a prefix whose size follows the limit, not the text (llama.cpp's tokenizer holds
about 55 bytes per byte of short words: 20 MB of ``"a "`` took 1.1 GiB and wedged the fuzzed
server above its memory bound)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from llamact import LlamaContextException, LlamaEngine, ModelParams
from llamact.errors import LlamaRequestException, LlamaTokenLimitException
from llamact.native.token_limit import MARGIN, tokenize_within

TEXTS = {
    "words": "The quick brown fox jumps over the lazy dog. " * 400,
    "one-token words": "a " * 20_000,
    "no spaces": "abcdefghij" * 3000,
    "multibyte": "héllo wörld ✓ 日本語のテキスト " * 600,
    "long whitespace runs": ("x" + " " * 700) * 40,
    "special tokens": "<|im_start|>user\nhi<|im_end|>\n" * 800,
}


@pytest.fixture(scope="module")
def engine(smollm2_path: Path) -> Iterator[LlamaEngine]:
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=512, n_threads=2)) as e:
        yield e


@pytest.mark.model
@pytest.mark.parametrize("name", sorted(TEXTS))
def test_an_answer_is_the_whole_texts_tokens_and_a_refusal_is_true(engine: LlamaEngine, name: str) -> None:
    text = TEXTS[name]
    whole = engine.tokenize(text)
    assert engine.tokenize(text, limit=len(whole)) == whole
    for limit in (len(whole) - 1, len(whole) // 3, 50, 1):
        with pytest.raises(LlamaTokenLimitException) as caught:
            engine.tokenize(text, limit=limit)
        at_least = caught.value.details["at_least"]
        assert limit < at_least <= len(whole), (limit, at_least, len(whole))
        if caught.value.details["exact"]:
            assert at_least == len(whole)
    with pytest.raises(LlamaTokenLimitException) as caught:   # a text far past the limit: counted on a prefix
        engine.tokenize(text * 10, limit=50)
    assert not caught.value.details["exact"]


def test_a_huge_text_is_refused_on_a_prefix_sized_by_the_limit() -> None:
    seen: list[int] = []

    def tokenize(raw: bytes) -> list[int]:   # one token per word, as "a " is for SmolLM2
        seen.append(len(raw))
        return [0] * raw.count(b" ")

    text = ("a " * (10 << 20)).encode()
    with pytest.raises(LlamaTokenLimitException, match="at least .* more than the limit of 1000"):
        tokenize_within(tokenize, text, 1000)
    assert max(seen) <= 4 * (1000 + MARGIN), seen
    assert tokenize_within(tokenize, text, 10 << 20) == [0] * (10 << 20)   # within the limit: all of it


def test_a_prefix_is_cut_on_a_character_boundary() -> None:
    cuts: list[bytes] = []

    def tokenize(raw: bytes) -> list[int]:
        raw.decode("utf-8")   # raises on a cut inside a character
        cuts.append(raw)
        return [0] * len(raw)

    with pytest.raises(LlamaTokenLimitException):
        tokenize_within(tokenize, "日本語".encode() * 100_000, 10)
    assert cuts


@pytest.mark.model
def test_a_prompt_beyond_the_context_is_a_context_error_without_tokenizing_it_all(engine: LlamaEngine) -> None:
    with pytest.raises(LlamaContextException, match=r"the prompt \(at least \d+ tokens\) does not fit the context"):
        engine.complete("a " * (10 << 20), max_tokens=1)
    with pytest.raises(LlamaContextException, match=r"the prompt \(\d+ tokens\) does not fit the context \(512"):
        engine.complete("a " * 600, max_tokens=1)
    assert engine.complete("Hello", max_tokens=2).text is not None   # the engine is fine after it


def test_the_refusal_is_a_request_error() -> None:
    assert issubclass(LlamaTokenLimitException, LlamaRequestException)
