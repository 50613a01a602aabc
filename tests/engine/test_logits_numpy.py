"""Logits as numpy arrays, logprobs without a server, and logits processors (SmolLM2)."""

from __future__ import annotations

import numpy as np
import pytest

from llamact.engine import GenerationParams, LlamaEngine, ModelParams
from llamact.errors import LlamaInferenceException

pytestmark = pytest.mark.model

GREEDY = GenerationParams(greedy=True, max_tokens=6)


@pytest.fixture(scope="module")
def engine(smollm2_path):
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=512, n_threads=2)) as eng:
        yield eng


def test_logits_are_an_owning_copy(engine):
    engine.complete("The sky is", GenerationParams(greedy=True, max_tokens=1))
    row = engine.context.logits()
    assert row.dtype == np.float32 and row.shape == (engine.model.vocab.n_tokens,) and row.flags.owndata
    before = row.copy()
    engine.complete("Fish swim in", GenerationParams(greedy=True, max_tokens=1, cache_prompt=False))
    assert np.array_equal(row, before)  # the next decode did not write into it
    assert not np.array_equal(engine.context.logits(), before)


def test_logprobs_are_the_raw_softmax(engine):
    # the logprobs describe the raw logits' distribution, whatever the sampler does after them
    result = engine.complete("The sky is", GenerationParams(greedy=True, max_tokens=1), logprobs=True,
                             top_logprobs=3)
    row = engine.context.logits().astype(np.float64)
    exact = row - row.max() - np.log(np.exp(row - row.max()).sum())
    (entry,) = result.logprobs
    assert entry.id == result.tokens[0] == int(np.argmax(row))
    assert [t.id for t in entry.top_logprobs] == list(np.argsort(-row)[:3])
    for top in entry.top_logprobs:
        assert abs(top.logprob - exact[top.id]) < 1e-3  # float32 normalizer (see engine/logprobs.py)
    assert entry.top_logprobs[0].logprob == entry.logprob
    assert bytes(entry.bytes).decode() == entry.token == engine.detokenize([entry.id])


def test_logprobs_off_by_default_and_top_logprobs_needs_them(engine):
    assert engine.complete("Hi", GREEDY).logprobs is None
    assert engine.complete("Hi", GREEDY, logprobs=True).logprobs[0].top_logprobs == ()
    with pytest.raises(LlamaInferenceException, match="requires logprobs"):
        engine.complete("Hi", GREEDY, top_logprobs=2)
    with pytest.raises(LlamaInferenceException, match="top_logprobs"):
        engine.complete("Hi", GREEDY, logprobs=True, top_logprobs=21)


def test_create_returns_openai_logprobs(engine):
    completion = engine.complete_chat([{"role": "user", "content": "Hi"}], params=GREEDY, logprobs=True,
                                          top_logprobs=2)
    content = completion.to_openai("id", "m", 0)["choices"][0]["logprobs"]["content"]
    assert len(content) == completion.usage.completion_tokens
    assert set(content[0]) == {"id", "token", "bytes", "logprob", "top_logprobs"}
    assert len(content[0]["top_logprobs"]) == 2


SAY_YES = "<|im_start|>user\nSay only the word yes.<|im_end|>\n<|im_start|>assistant\n"   # ends on its end token


def test_the_end_token_has_its_entry_on_the_final_chunk(engine):
    """llama-server lists the end token's logprob; ``complete()`` keeps one entry per generated token."""
    chunks = list(engine.generate(SAY_YES, GenerationParams(greedy=True, max_tokens=30, logprobs=True,
                                                            top_logprobs=1)))
    final = chunks[-1]
    assert final.finish_reason == "stop" and final.end_token is not None
    assert final.logprob is not None and final.logprob.id == final.end_token
    assert all(c.logprob is not None for c in chunks)
    result = engine.complete(SAY_YES, GenerationParams(greedy=True, max_tokens=30), logprobs=True)
    assert [e.id for e in result.logprobs] == result.tokens


def test_a_token_ending_inside_a_character_is_marked_incomplete(engine):
    """SmolLM2 spells U+1D538 in byte tokens: those before its last byte have no text and say so."""
    params = GenerationParams(greedy=True, max_tokens=8, grammar='root ::= "\U0001d538 ok"')
    chunks = list(engine.generate("Write a symbol:", params))
    split = [c for c in chunks if c.incomplete]
    assert split and all(c.text == "" and c.token is not None for c in split)
    assert "".join(c.text for c in chunks) == "\U0001d538 ok"
    assert not any(c.incomplete for c in chunks if c.text)


def test_processor_changes_sampling_in_place(engine):
    plain = engine.complete("The capital of France is", GREEDY)
    banned = plain.tokens[0]
    seen: list[np.ndarray] = []

    def ban(token_ids: np.ndarray, logits: np.ndarray) -> None:
        seen.append(token_ids.copy())
        logits[banned] = -np.inf

    params = GenerationParams(greedy=True, max_tokens=6, logits_processors=[ban])
    result = engine.complete("The capital of France is", params)
    assert banned not in result.tokens
    prompt = engine.tokenize("The capital of France is")
    assert list(seen[0]) == prompt and list(seen[-1]) == prompt + result.tokens[:-1]
    assert len(seen) == len(result.tokens)


def test_processor_may_return_new_logits(engine):
    target = engine.tokenize(" zebra", add_special=False)[0]

    def force(_ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
        out = np.full_like(logits, -1e9)
        out[target] = 0.0
        return out

    result = engine.complete("Hello", GenerationParams(max_tokens=3, seed=1, logits_processors=[force]))
    assert result.tokens == [target] * 3


def test_processor_errors_reach_the_caller_and_release_the_engine(engine):
    def broken(_ids: np.ndarray, _logits: np.ndarray) -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        engine.complete("Hello", GenerationParams(greedy=True, max_tokens=2, logits_processors=[broken]))
    assert engine.complete("Hello", GREEDY).tokens  # not left busy


def test_processor_on_the_chat_path(engine):
    messages = [{"role": "user", "content": "Say hello"}]
    with engine.create(messages, params=GREEDY) as stream:
        stream.completion()
        banned = stream.tokens[0]

    def ban(_ids: np.ndarray, logits: np.ndarray) -> None:
        logits[banned] = -np.inf

    with engine.create(messages, params=GenerationParams(greedy=True, max_tokens=6, logits_processors=[ban])) as s:
        s.completion()
        assert s.tokens and banned not in s.tokens
