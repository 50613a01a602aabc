"""Device placement and attention/KV options of ModelParams reach llama.cpp, and bad values are
typed errors (llama.cpp asserts, or reads past arrays, on several of them).

On a CPU-only build the GPU options cannot move anything; what is checked there is that each is
accepted or refused as documented and that the ones with an effect on CPU (flash attention, KV
cache types) have it. scripts/check_backend.sh runs the model tests on a GPU build.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import llamact
from llamact import (
    GenerationParams,
    LlamaContextException,
    LlamaEngine,
    LlamaModelException,
    ModelParams,
)

pytestmark = pytest.mark.model

PROMPT = "The capital of France is"
GREEDY = GenerationParams(max_tokens=8, greedy=True)


def _load(path: Path, **kwargs: object) -> LlamaEngine:
    return LlamaEngine.load(path, ModelParams(n_ctx=256, **kwargs))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def reference(smollm2_path: Path) -> dict[str, list[int]]:
    """Greedy tokens with every layer offloaded (the default) and with none: the same on a
    CPU-only build; on a GPU build (scripts/check_backend.sh) each placement is compared with
    the run on the same devices, since kernels of different backends may break near-ties apart."""
    tokens = {}
    for where, kwargs in (("offloaded", {}), ("cpu", {"n_gpu_layers": 0})):
        with _load(smollm2_path, **kwargs) as engine:
            tokens[where] = engine.complete(PROMPT, GREEDY).tokens
    return tokens


def test_devices_lists_the_cpu_with_its_memory() -> None:
    found = llamact.devices()
    cpu = [d for d in found if d.type == "cpu"]
    assert cpu, found
    assert cpu[0].name and cpu[0].backend
    assert 0 < cpu[0].memory_free <= cpu[0].memory_total


def test_version_lists_backends_and_devices(capsys: pytest.CaptureFixture[str]) -> None:
    from llamact.cli import main

    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert "backends: " in out
    for dev in llamact.devices():
        assert f"device {dev.name} ({dev.type}, {dev.backend})" in out


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"devices": ["NoSuchGPU0"]}, "unknown device 'NoSuchGPU0'"),
        ({"devices": ["CPU"]}, "is the CPU"),
        ({"tensor_split": [1.0] * 17}, "tensor_split must hold"),
        ({"tensor_split": [-1.0]}, "tensor_split must hold"),
        ({"tensor_split": [0.0]}, "tensor_split must hold"),
        ({"tensor_split": []}, "tensor_split must hold"),
        ({"split_mode": "diagonal"}, "split_mode must be one of"),
        ({"n_gpu_layers": -2}, "n_gpu_layers must be an integer"),
        ({"main_gpu": -1}, "main_gpu must be an integer"),
        ({"rpc_servers": ["no-port"]}, "'host:port'"),
        ({"rpc_servers": ["127.0.0.1:99999"]}, "port in 1..65535"),
    ],
)
def test_bad_placement_is_a_model_error(smollm2_path: Path, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(LlamaModelException, match=message):
        _load(smollm2_path, **kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"type_k": "q9_9"}, "type_k must be one of"),
        ({"type_v": "F16"}, "type_v must be one of"),
        ({"type_v": "q8_0", "flash_attn": False}, "needs flash attention"),
    ],
)
def test_bad_kv_cache_type_is_a_context_error(smollm2_path: Path, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(LlamaContextException, match=message):
        _load(smollm2_path, **kwargs)


@pytest.mark.parametrize(
    "kwargs, where",
    [
        ({"n_gpu_layers": 99}, "offloaded"),
        ({"devices": [], "tensor_split": [1.0]}, "cpu"),  # no device to offload to: the CPU runs all
        ({"split_mode": "none", "main_gpu": 0}, "offloaded"),
    ],
)
def test_accepted_placements_keep_the_output(smollm2_path: Path, reference: dict[str, list[int]],
                                             kwargs: dict[str, object], where: str) -> None:
    with _load(smollm2_path, **kwargs) as engine:
        assert engine.complete(PROMPT, GREEDY).tokens == reference[where]


# Row split needs each offload device's split buffer type; at the pin only the SYCL and Hexagon
# ("HTP") registries offer one (ggml_backend_reg_get_proc_address "ggml_backend_split_buffer_type"),
# and llama.cpp refuses the model on any other device (Vulkan, CUDA at this pin, RPC).
ROW_SPLIT_BACKENDS = {"SYCL", "HTP"}


def test_row_split_runs_or_is_refused_by_the_devices(smollm2_path: Path, request: pytest.FixtureRequest) -> None:
    found = llamact.devices()
    # the devices llama.cpp offloads to by default: the GPUs, else the integrated GPUs
    offload = [d for d in found if d.type == "gpu"] or [d for d in found if d.type == "igpu"]
    if all(d.backend in ROW_SPLIT_BACKENDS for d in offload):  # a CPU-only build: nothing to split
        with _load(smollm2_path, split_mode="row") as engine:
            assert engine.complete(PROMPT, GREEDY).tokens == request.getfixturevalue("reference")["offloaded"]
    else:
        with pytest.raises(LlamaModelException, match=r"device \S+ does not support split buffers"):
            _load(smollm2_path, split_mode="row")


def _prompt_logits(engine: LlamaEngine) -> list[float]:
    engine.complete(PROMPT, GenerationParams(max_tokens=1, greedy=True))
    # The context's last logits are those of the one generated token's step: the prompt's end.
    return list(engine.context.logits(-1))


def test_flash_attn_switches_the_attention_kernel(smollm2_path: Path) -> None:
    with _load(smollm2_path, flash_attn=True) as on, _load(smollm2_path, flash_attn=False) as off:
        logits_on, logits_off = _prompt_logits(on), _prompt_logits(off)
    # A different kernel: not bitwise the same numbers, yet the same model (same top token).
    assert logits_on != logits_off
    assert max(range(len(logits_on)), key=logits_on.__getitem__) == max(
        range(len(logits_off)), key=logits_off.__getitem__
    )


def test_quantized_kv_cache_is_smaller_and_still_generates(smollm2_path: Path,
                                                           reference: dict[str, list[int]]) -> None:
    sizes = {}
    for kind in ("f16", "q8_0"):
        with _load(smollm2_path, flash_attn=True, type_k=kind, type_v=kind) as engine:
            tokens = engine.complete(PROMPT, GREEDY).tokens
            sizes[kind] = len(engine.context.state_bytes())
            if kind == "f16":
                assert tokens == reference["offloaded"]
            else:  # a lossy cache may drift later, not at once
                assert tokens[:1] == reference["offloaded"][:1]
    # q8_0 stores 34 bytes per 32 values against f16's 64: the saved KV cache shrinks accordingly.
    assert sizes["q8_0"] < 0.6 * sizes["f16"], sizes
