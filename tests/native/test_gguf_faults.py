"""Damaged GGUF files: a representative subset of scripts/soak.py's faults section.

Each file is loaded (and, if it loads, used for a short generation) in a child process with a
deadline: every one must raise LlamaModelException naming the file; none may crash the process
or hang. The soak runs the full set (truncations at every header and key/value field, bit flips
and absurd values in counts, lengths, types, dimensions and offsets).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import gguf_faults
import pytest

pytestmark = [pytest.mark.model, pytest.mark.slow]

SUBSET = [
    # cut inside the header, the key/values, the tensor infos and the data
    "truncated-after-magic",
    "truncated-inside-version",
    "truncated-inside-n_kv",
    "truncated-inside-kv0.key_length",
    "truncated-at-kv0(general.architecture).type",
    "truncated-inside-kv24(tokenizer.ggml.tokens).count",
    "truncated-at-kv24(tokenizer.ggml.tokens)[49151].length",
    "truncated-inside-tensor0.dim1",
    "truncated-at-tensor271.offset",
    "truncated-at-data",
    "truncated-one-byte-short",
    # versions, counts and lengths
    "set-zero-version",
    "set-max-version",
    "flip-bit63-n_tensors",
    "set-2^31-n_tensors",
    "flip-bit32-n_kv",
    "set-max-n_kv",
    "set-2^63-kv24(tokenizer.ggml.tokens).count",
    "flip-bit47-kv24(tokenizer.ggml.tokens)[0].length",
    # types, dimensions and offsets
    "flip-bit7-kv0(general.architecture).type",
    "set-2^31-tensor0.type",
    "set-zero-tensor0.dim0",
    "flip-bit62-tensor0.dim0",
    "set-2^32-1-tensor271.n_dims",
    "flip-bit0-tensor271.offset",
    "set-max-tensor271.offset",
    # the last tensor (output_norm.weight, f32) retyped: still within the file, so llama.cpp loads
    # it, and ggml's CPU kernels used to abort the process at the first decode
    "flip-bit0-tensor271.type",
    "flip-bit1-tensor271.type",
]


@pytest.fixture(scope="module")
def outcomes(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[str, str]]]:
    layout = gguf_faults.read_layout(smollm2_path)
    everything = [*gguf_faults.truncations(layout, tensors_sampled=10**6)]
    everything += [fault for field in layout.fields for fault in gguf_faults.mutations(field)]
    faults = {f.name: f for f in everything}
    missing = [name for name in SUBSET if name not in faults]
    assert not missing, f"the fault generator no longer makes {missing}"
    workdir = tmp_path_factory.mktemp("gguf-faults")
    with gguf_faults.FaultRunner(smollm2_path, workdir, timeout=120) as runner:
        yield {name: runner.run(faults[name]) for name in SUBSET}


@pytest.mark.parametrize("name", SUBSET)
def test_damaged_gguf_is_a_model_exception(outcomes: dict[str, tuple[str, str]], name: str) -> None:
    kind, message = outcomes[name]
    assert kind not in ("CRASHED", "HUNG"), f"{name}: {kind}: {message}"
    assert kind == "LlamaModelException", (name, kind, message)
    assert ".gguf" in message and ("corrupt" in message or "damaged" in message), message


def test_retyped_norm_weight_names_the_tensor(outcomes: dict[str, tuple[str, str]]) -> None:
    kind, message = outcomes["flip-bit0-tensor271.type"]
    assert kind == "LlamaModelException"
    assert "'output_norm.weight'" in message and "f16" in message and "f32" in message
