"""Which runtime reads a model file: one table, by the file's suffix (``LlamaEngine.load`` asks it).

    load = runtime_for("model.litertlm")     # LitertEngine.load; None: a GGUF, llama.cpp's own

What enters: a path. What leaves: the loader of the runtime that reads it, or None for llama.cpp
(any other suffix: llama.cpp checks the GGUF magic and names what it found). A new runtime is one
row here and one sibling class implementing ``backend.ChatBackend``; nothing walks subclasses.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from .litert_engine import LitertEngine

__all__ = ["RUNTIMES", "runtime_for"]

# suffix (lower case) -> the runtime's loader, which takes LlamaEngine.load's arguments
RUNTIMES: dict[str, Callable[..., LitertEngine]] = {
    ".litertlm": LitertEngine.load,   # LiteRT-LM bundles (llamact[litert])
}


def runtime_for(path: str | os.PathLike[str]) -> Callable[..., LitertEngine] | None:
    """The loader of the runtime other than llama.cpp that reads ``path``, by its suffix; None for a GGUF."""
    return RUNTIMES.get(Path(path).suffix.lower())
