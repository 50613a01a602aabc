"""The engine: models, contexts and the generation loop behind ``LlamaEngine``."""

from .backends import Device, devices
from .engine import GenerationStream, LlamaEngine
from .generator import GenerationChunk, GenerationResult, StopReason, Timings
from .params import GenerationParams, ModelParams

__all__ = [
    "LlamaEngine",
    "GenerationStream",
    "GenerationChunk",
    "GenerationResult",
    "StopReason",
    "Timings",
    "GenerationParams",
    "ModelParams",
    "Device",
    "devices",
]
