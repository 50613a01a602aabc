"""engine.embed(): shapes, pooling overrides against the per-token output, batching, errors (SmolLM2)."""

from __future__ import annotations

import numpy as np
import pytest

from llamact.engine import GenerationParams, LlamaEngine, ModelParams
from llamact.errors import LlamaContextException, LlamaInferenceException, LlamaRequestException

pytestmark = pytest.mark.model

TEXTS = ["The cat sat on the mat.", "hello", "Embeddings map text to vectors."]


@pytest.fixture(scope="module")
def engine(smollm2_path):
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=256, n_threads=2)) as eng:
        yield eng


def test_pooled_rows_agree_with_the_per_token_states(engine):
    per_token = engine.embed_tokens(TEXTS, normalize=False)
    assert [rows.shape[0] for rows in per_token] == [len(engine.tokenize(t)) for t in TEXTS]
    mean = engine.embed(TEXTS, normalize=False, pooling="mean")
    last = engine.embed(TEXTS, normalize=False, pooling="last")
    assert mean.dtype == np.float32 and mean.shape == (3, engine.model.n_embd)
    np.testing.assert_allclose(mean, np.stack([r.mean(axis=0) for r in per_token]), atol=1e-4)
    np.testing.assert_allclose(last, np.stack([r[-1] for r in per_token]), atol=1e-4)


def test_batched_equals_one_at_a_time_and_normalized(engine):
    together = engine.embed(TEXTS, pooling="mean")
    alone = np.concatenate([engine.embed(t, pooling="mean") for t in TEXTS])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-6)


def test_generation_still_works_between_embeddings(engine):
    before = engine.complete("The sky is", GenerationParams(greedy=True, max_tokens=4, cache_prompt=False))
    engine.embed(TEXTS, pooling="mean")
    after = engine.complete("The sky is", GenerationParams(greedy=True, max_tokens=4, cache_prompt=False))
    assert after.tokens == before.tokens


def test_bad_input(engine):
    with pytest.raises(LlamaInferenceException, match="pooling"):
        engine.embed(TEXTS, pooling="max")
    with pytest.raises(LlamaContextException, match="more than the embedding context"):
        engine.embed(["word " * 400], pooling="mean")
    with pytest.raises(LlamaInferenceException, match="strings"):
        engine.embed([b"bytes"], pooling="mean")  # type: ignore[list-item]


def test_token_lists_are_embedded_as_they_are(engine):
    tokens = engine.tokenize(TEXTS[0])
    np.testing.assert_array_equal(engine.embed([tokens], pooling="mean"), engine.embed([TEXTS[0]], pooling="mean"))
    with pytest.raises(LlamaInferenceException):
        engine.embed([[engine.n_vocab]], pooling="mean")
    with pytest.raises(LlamaInferenceException):
        engine.embed([3.5], pooling="mean")


def test_embed_is_one_row_per_text_whatever_the_model_pools(engine):
    """SmolLM2's GGUF names no pooling: embed() still gives one 2-D array (mean-pooled), the
    per-token matrices are embed_tokens()', and asking embed() for pooling none says where they are."""
    rows = engine.embed(TEXTS, normalize=False)
    assert isinstance(rows, np.ndarray) and rows.shape == (len(TEXTS), engine.n_embd)
    np.testing.assert_allclose(rows, engine.embed(TEXTS, normalize=False, pooling="mean"), atol=1e-5)
    with pytest.raises(LlamaRequestException, match="embed_tokens"):
        engine.embed(TEXTS, pooling="none")


def test_the_pooling_embed_applies(engine):
    assert engine.embedding_pooling() == "none"   # SmolLM2's GGUF names none: llama.cpp's default
    assert engine.embedding_pooling("mean") == "mean"
    with pytest.raises(LlamaInferenceException):
        engine.embedding_pooling("max")


def test_rank_pooling_reads_one_score_per_text(engine):
    """Rank pooling gives the classifier's n_cls_out values (1 here, SmolLM2 has no head: its first
    token's first hidden value, as llama-server's /rerank reads it), not n_embd read past them."""
    scores = np.concatenate([engine.embed([text], normalize=False, pooling="rank") for text in ("a b", "a c")])
    per_token = engine.embed_tokens(["a b"], normalize=False)[0]
    assert scores.shape == (2, 1)
    np.testing.assert_allclose(scores[:, 0], per_token[0, 0], atol=1e-4)
    assert engine.rerank_tokens("a", "b") == engine.tokenize("a", add_special=False) + \
        engine.tokenize("b", add_special=False)
