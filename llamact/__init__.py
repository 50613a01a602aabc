"""llamact: GGUF models through a direct ctypes binding to a pinned llama.cpp.

The public API is what this module exports; everything else may change.
"""

from ._build import build_info
from .engine import (
    Device,
    GenerationChunk,
    GenerationParams,
    GenerationResult,
    LlamaEngine,
    ModelParams,
    StopReason,
    Timings,
    devices,
)
from .errors import (
    LlamaContextException,
    LlamaException,
    LlamaInferenceException,
    LlamaModelException,
    LlamaStateException,
    LlamaUnsupportedException,
)

__version__ = "0.1.0"

__all__ = [
    "build_info",
    "devices",
    "Device",
    "GenerationChunk",
    "GenerationParams",
    "GenerationResult",
    "LlamaEngine",
    "ModelParams",
    "StopReason",
    "Timings",
    "LlamaException",
    "LlamaModelException",
    "LlamaContextException",
    "LlamaInferenceException",
    "LlamaUnsupportedException",
    "LlamaStateException",
]
