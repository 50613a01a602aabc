"""Native memory is freed when the last reference goes, not at the next cyclic collection.

A reference cycle through an owning object (Model <-> Vocab, a Batch whose free function closes
over it) leaves gigabytes of weights or buffers alive until the cyclic collector happens to run.
These tests disable the collector: only reference counting may free.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.model

FREES = ("llama_model_free", "llama_free", "llama_sampler_free", "llama_batch_free")


@pytest.fixture
def frees(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of libllama's free functions called during the test (they still free), with the
    cyclic collector off."""
    from llamact.native._library import native

    lib = native().llama
    calls: list[str] = []
    for name in FREES:
        original = getattr(lib, name)

        def wrapper(arg: Any, _original: Any = original, _name: str = name) -> Any:
            calls.append(_name)
            return _original(arg)

        monkeypatch.setattr(lib, name, wrapper)
    gc.collect()
    gc.disable()
    try:
        yield calls
    finally:
        gc.enable()
        gc.collect()


def test_dropping_an_engine_frees_its_model_at_once(smollm2_path: Path, frees: list[str]) -> None:
    from llamact import GenerationParams, LlamaEngine, ModelParams

    engine = LlamaEngine.load(smollm2_path, ModelParams(n_ctx=128, n_threads=2))
    result = engine.complete("Hello", GenerationParams(greedy=True, max_tokens=2))
    assert len(result.tokens) == 2 and engine.model.vocab.n_tokens > 0
    assert frees == ["llama_sampler_free"]
    del engine
    assert sorted(frees) == ["llama_free", "llama_model_free", "llama_sampler_free"]
    assert frees[-1] == "llama_model_free"


def test_a_model_lives_while_its_vocab_is_held(smollm2_path: Path, frees: list[str]) -> None:
    from llamact.native.model import Model

    model = Model(smollm2_path)
    vocab = model.vocab
    assert model.vocab is vocab  # one vocabulary object while it is held
    del model
    assert frees == []
    assert vocab.tokenize("hello", add_special=False)  # still usable: it keeps its model
    del vocab
    assert frees == ["llama_model_free"]


def test_dropping_a_batch_or_context_frees_it_at_once(smollm2_path: Path, frees: list[str]) -> None:
    from llamact.native.context import Batch, Context, ContextOptions
    from llamact.native.model import Model
    from llamact.native.sampler import Greedy, SamplerChain

    with Model(smollm2_path) as model:
        ctx = Context(model, ContextOptions(n_ctx=64, n_threads=2))
        batch = Batch(ctx, 8)
        batch.set_sequence([1, 2], 0)
        ctx.decode(batch)
        assert len(ctx.logits()) == model.vocab.n_tokens
        del batch
        assert frees == ["llama_batch_free"]
        chain = SamplerChain(model, [Greedy()])
        del chain
        del ctx
        assert sorted(frees) == ["llama_batch_free", "llama_free", "llama_sampler_free"]
    assert frees[-1] == "llama_model_free"
