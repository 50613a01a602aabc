"""LoRA adapters: a small random adapter for SmolLM2 written with the gguf package.

Applying it changes the logits; scale 0, removal or clearing gives the base model's logits back
bit for bit; an adapter whose tensors do not fit the model raises LlamaModelException.
"""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from llamact.engine import GenerationParams, LlamaEngine, ModelParams
from llamact.errors import LlamaInferenceException, LlamaModelException

pytestmark = pytest.mark.model

RANK = 4


def write_lora(path, n_embd: int, arch: str = "llama", layers=(0, 1), seed: int = 0) -> None:
    """An adapter on attn_q of ``layers``: lora_a is (rank x n_embd) and lora_b (n_embd x rank) in
    numpy's order (ggml's ne reversed), random values large enough to move the logits."""
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(RANK))
    for layer in layers:
        writer.add_tensor(f"blk.{layer}.attn_q.weight.lora_a", rng.normal(0, 0.5, (RANK, n_embd)).astype(np.float32))
        writer.add_tensor(f"blk.{layer}.attn_q.weight.lora_b", rng.normal(0, 0.5, (n_embd, RANK)).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def engine(smollm2_path):
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=128, n_threads=2)) as eng:
        yield eng


def logits(engine: LlamaEngine) -> np.ndarray:
    engine.complete("The weather today is", GenerationParams(greedy=True, max_tokens=1))
    return engine.context.logits()


def test_apply_scale_remove_restore_bit_for_bit(engine, tmp_path):
    path = tmp_path / "lora.gguf"
    write_lora(path, engine.model.n_embd)
    base = logits(engine)
    engine.set_lora(path, 1.0)
    assert engine.loras == {path.resolve(): 1.0}
    changed = logits(engine)
    assert np.abs(changed - base).max() > 1e-2
    engine.set_lora(path, 0.0)
    assert np.array_equal(logits(engine), base)
    engine.set_lora(path, 1.0)
    assert np.array_equal(logits(engine), changed)  # the KV cache was emptied: no stale positions
    engine.remove_lora(path)
    assert np.array_equal(logits(engine), base)
    engine.set_lora(path, 0.5)
    engine.clear_loras()
    assert engine.loras == {} and np.array_equal(logits(engine), base)
    with pytest.raises(LlamaInferenceException, match="no LoRA adapter"):
        engine.remove_lora(path)


def test_model_params_loras(smollm2_path, engine, tmp_path):
    path = tmp_path / "lora.gguf"
    write_lora(path, engine.model.n_embd)
    engine.set_lora(path, 1.0)
    expected = logits(engine)
    engine.clear_loras()
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=128, n_threads=2, loras=[(path, 1.0)])) as other:
        assert np.array_equal(logits(other), expected)


def test_mismatched_adapters_raise(engine, tmp_path):
    wrong_shape = tmp_path / "shape.gguf"
    write_lora(wrong_shape, engine.model.n_embd + 64)
    wrong_arch = tmp_path / "arch.gguf"
    write_lora(wrong_arch, engine.model.n_embd, arch="gemma3")
    missing_layer = tmp_path / "layer.gguf"
    write_lora(missing_layer, engine.model.n_embd, layers=(999,))
    base = logits(engine)
    for path, reason in ((wrong_shape, "shape"), (wrong_arch, "arch"), (missing_layer, "does not exist")):
        with pytest.raises(LlamaModelException, match=reason):
            engine.set_lora(path, 1.0)
    not_gguf = tmp_path / "text.gguf"
    not_gguf.write_text("hello")
    with pytest.raises(LlamaModelException, match="not a GGUF"):
        engine.set_lora(not_gguf)
    assert engine.loras == {} and np.array_equal(logits(engine), base)
