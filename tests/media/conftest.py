"""Media test fixtures: random-weight projectors for the bundled models (``llamact.parity.projectors``:
no vision or audio model ships on the package registries), the vendored tree's own test image and
audio clip (tools/mtmd/test-1.jpeg, test-2.mp3), small images made in the test, and engines with a
projector (one thread, llama-server's batch sizes: the answers compare with llama-server's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from media_helpers import engine_params

from llamact import LlamaEngine
from llamact.parity.projectors import write_projector


@pytest.fixture(scope="session")
def projectors(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Projector files by name: "smollm2" (CLIP mlp, 576 wide), "smollm2_audio" (qwen2a), "gemma3"
    (gemma3, 640 wide), "gemma3_for_smollm2" (a gemma3 projector of the wrong width for SmolLM2)."""
    folder = tmp_path_factory.mktemp("projectors")
    return {
        "smollm2": write_projector(folder / "smollm2-mlp.gguf", 576, "mlp"),
        "smollm2_audio": write_projector(folder / "smollm2-qwen2a.gguf", 576, "qwen2a"),
        "gemma3": write_projector(folder / "gemma3.gguf", 640, "gemma3"),
        "gemma3_for_smollm2": write_projector(folder / "gemma3-640.gguf", 640, "gemma3", seed=1),
    }


@pytest.fixture(scope="session")
def mtmd_samples(repo_root: Path) -> dict[str, bytes]:
    """upstream's own test media: a JPEG photograph and an MP3 clip."""
    folder = repo_root / "vendor" / "llama.cpp" / "tools" / "mtmd"
    return {"jpeg": (folder / "test-1.jpeg").read_bytes(), "mp3": (folder / "test-2.mp3").read_bytes()}


@pytest.fixture(scope="module")
def vision_engine(smollm2_path: Path, projectors: dict[str, Path]) -> Iterator[LlamaEngine]:
    with LlamaEngine.load(smollm2_path, engine_params(projectors["smollm2"])) as engine:
        yield engine
