"""What llamact reports about a real model file agrees with the file itself and with upstream.

Two independent references:

* the file, read by the ``gguf`` package's ``GGUFReader`` (not by llama.cpp): metadata keys and
  values, chat template, special token ids, vocabulary, tensor element counts;
* upstream's ``llama-bench`` built from the same vendored tree: model description, size, params.

llama.cpp renders metadata values as text (src/llama-impl.cpp ``gguf_kv_to_str``): strings as is,
integers in decimal, floats with ``std::to_string`` (printf ``%f``), bools as ``true``/``false``;
array-valued keys are left out of the model's key/value map (src/llama-model.cpp
``load_hparams``). The tests below hold llamact to exactly that.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from llamact.native.model import Model

pytestmark = pytest.mark.model

_INT_TYPES = {
    gguf.GGUFValueType.UINT8, gguf.GGUFValueType.INT8, gguf.GGUFValueType.UINT16, gguf.GGUFValueType.INT16,
    gguf.GGUFValueType.UINT32, gguf.GGUFValueType.INT32, gguf.GGUFValueType.UINT64, gguf.GGUFValueType.INT64,
}
_FLOAT_TYPES = {gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.FLOAT64}


class _Reader(gguf.GGUFReader):
    """``GGUFReader`` over a plain ndarray view of its memory map instead of ``np.memmap``.

    The parsing code is the package's own and unchanged; only numpy's per-slice ``memmap``
    bookkeeping (most of the time on a 262k-token vocabulary) is avoided, which makes reading
    Gemma's file ~3x faster.
    """

    @property  # type: ignore[override]
    def data(self) -> np.ndarray:
        return self._plain

    @data.setter
    def data(self, value: np.ndarray) -> None:
        self._plain = value.view(np.ndarray)


@dataclass
class Loaded:
    path: Path
    model: Model
    reader: gguf.GGUFReader

    def field(self, key: str) -> gguf.ReaderField:
        field = self.reader.fields.get(key)
        assert field is not None, f"{key} is not in {self.path.name}"
        return field

    def scalar(self, key: str) -> Any:
        return self.field(key).contents()

    def has(self, key: str) -> bool:
        return key in self.reader.fields


@pytest.fixture(scope="module")
def loaded(model_path: Path) -> Iterator[Loaded]:
    reader = _Reader(str(model_path))
    model = Model(model_path)
    try:
        yield Loaded(model_path, model, reader)
    finally:
        model.close()


def _file_keys(reader: gguf.GGUFReader) -> dict[str, gguf.ReaderField]:
    """The file's own key/values: GGUFReader adds three ``GGUF.*`` header pseudo-fields."""
    return {k: f for k, f in reader.fields.items() if not k.startswith("GGUF.")}


def test_metadata_keys_are_the_files_non_array_keys(loaded: Loaded) -> None:
    md = loaded.model.metadata()
    file_keys = _file_keys(loaded.reader)
    assert md, "llama.cpp reported no metadata"
    # Everything llama.cpp reports is in the file ...
    assert sorted(set(md) - set(file_keys)) == []
    # ... and everything in the file is reported, except arrays (llama.cpp skips those).
    arrays = {k for k, f in file_keys.items() if f.types[0] == gguf.GGUFValueType.ARRAY}
    assert sorted(set(file_keys) - set(md)) == sorted(arrays)
    assert "tokenizer.ggml.tokens" in arrays
    # metadata_value(key) is the same lookup by name.
    for key, value in md.items():
        assert loaded.model.metadata_value(key) == value, key
    assert loaded.model.metadata_value("no.such.key") is None


def test_metadata_values_agree_with_the_file(loaded: Loaded) -> None:
    md = loaded.model.metadata()
    checked = {"string": 0, "int": 0, "float": 0, "bool": 0}
    for key, field in _file_keys(loaded.reader).items():
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            continue
        text = md[key]
        value = field.contents()
        if kind == gguf.GGUFValueType.STRING:
            assert text == value, key
            checked["string"] += 1
        elif kind == gguf.GGUFValueType.BOOL:
            assert text == ("true" if value else "false"), key
            checked["bool"] += 1
        elif kind in _INT_TYPES:
            assert int(text) == int(value), key
            assert text == str(int(value)), key
            checked["int"] += 1
        elif kind in _FLOAT_TYPES:
            # std::to_string: printf("%f") of the value widened to double, i.e. 6 decimals.
            assert abs(float(text) - float(value)) <= 5e-7 + 1e-12 * abs(float(value)), key
            assert text == f"{float(value):.6f}", key
            checked["float"] += 1
        else:  # pragma: no cover - no other scalar types exist
            pytest.fail(f"unexpected GGUF type {kind!r} for {key}")
    # Both files have strings, integers and bools; Gemma also has floats (rope base, norm eps).
    assert checked["string"] and checked["int"] and checked["bool"], checked
    if loaded.model.metadata()["general.architecture"] == "gemma3":
        assert checked["float"] >= 2, checked


def test_chat_template_is_the_files_string(loaded: Loaded) -> None:
    key = "tokenizer.chat_template"
    if loaded.has(key):
        expected = loaded.scalar(key)
        assert isinstance(expected, str) and len(expected) > 100
        assert loaded.model.template_source() == expected
        assert loaded.model.metadata()[key] == expected
    else:
        # Gemma 3 270M ships without a template: llama.cpp returns NULL (no name-based fallback
        # applies to this vocabulary) and llamact must say None, not "" or a guess.
        assert loaded.model.template_source() is None
        assert key not in loaded.model.metadata()
    # A named variant the file does not have.
    assert not loaded.has("tokenizer.chat_template.tool_use")
    assert loaded.model.template_source("tool_use") is None


def test_hyperparameters_agree_with_the_file(loaded: Loaded) -> None:
    model = loaded.model
    arch = loaded.scalar("general.architecture")
    assert model.metadata()["general.architecture"] == arch
    assert model.n_ctx_train == loaded.scalar(f"{arch}.context_length")
    assert model.n_embd == loaded.scalar(f"{arch}.embedding_length")
    assert model.n_layer == loaded.scalar(f"{arch}.block_count")
    assert model.has_decoder and not model.has_encoder
    # llama_model_n_params / llama_model_size count the tensors' elements / bytes.
    assert model.n_params == sum(int(t.n_elements) for t in loaded.reader.tensors)
    assert model.size_bytes == sum(int(t.n_bytes) for t in loaded.reader.tensors)
    # llama_model_desc is "<arch> <size class> <ftype>".
    assert model.description.startswith(f"{arch} ")


def test_vocabulary_agrees_with_the_file(loaded: Loaded) -> None:
    vocab = loaded.model.vocab
    tokens_field = loaded.field("tokenizer.ggml.tokens")
    file_tokens = [bytes(tokens_field.parts[i]).decode("utf-8") for i in tokens_field.data]
    assert vocab.n_tokens == len(file_tokens)
    mismatched = [i for i in range(vocab.n_tokens) if vocab.text(i) != file_tokens[i]]
    assert mismatched == [], f"{len(mismatched)} token texts differ, first ids {mismatched[:5]}"

    assert vocab.bos == loaded.scalar("tokenizer.ggml.bos_token_id")
    assert vocab.eos == loaded.scalar("tokenizer.ggml.eos_token_id")
    assert vocab.is_eog(vocab.eos)
    if loaded.has("tokenizer.ggml.add_bos_token"):
        assert vocab.add_bos == loaded.scalar("tokenizer.ggml.add_bos_token")
    if loaded.has("tokenizer.ggml.add_eos_token"):
        assert vocab.add_eos == loaded.scalar("tokenizer.ggml.add_eos_token")

    # The tokens the chat tests rely on are control tokens in the file and in llama.cpp.
    types_field = loaded.field("tokenizer.ggml.token_type")
    control = int(gguf.TokenType.CONTROL)
    for marker in ("<|im_start|>", "<|im_end|>", "<start_of_turn>", "<end_of_turn>"):
        if marker in file_tokens:
            tid = file_tokens.index(marker)
            assert int(types_field.parts[types_field.data[tid]][0]) == control, marker
            assert vocab.is_control(tid), marker


def test_description_size_and_params_match_llama_bench(loaded: Loaded, upstream_bin) -> None:
    """Upstream's llama-bench reports llama_model_desc / _size / _n_params from its own build."""
    proc = subprocess.run(
        [str(upstream_bin("llama-bench")), "-m", str(loaded.path), "-p", "0", "-n", "1", "-r", "1",
         "--no-warmup", "-o", "json"],
        capture_output=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    (row,) = json.loads(proc.stdout)
    assert loaded.model.description == row["model_type"]
    assert loaded.model.size_bytes == row["model_size"]
    assert loaded.model.n_params == row["model_n_params"]
