"""What was compiled: the llama.cpp pin and the ggml backends (from the build's _build_info.json)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from .errors import LlamaUnsupportedException

_INFO = Path(__file__).resolve().parent / "_build_info.json"


@lru_cache(maxsize=1)
def build_info() -> dict[str, Any]:
    """``{"llama_cpp": {"tag", "commit", "build"}, "backends": [...], "build_type", "compiler", ...}``."""
    try:
        info: dict[str, Any] = json.loads(_INFO.read_text())
    except FileNotFoundError as exc:
        raise LlamaUnsupportedException(
            "llamact was not built (no _build_info.json): install it with pip so CMake builds llama.cpp"
        ) from exc
    return info
