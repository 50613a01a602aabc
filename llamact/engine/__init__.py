"""The engine: models, contexts and the generation loop behind ``LlamaEngine``."""

from .aio import AsyncChatStream
from .async_engine import AsyncLlamaEngine
from .backends import Device, devices
from .engine import GenerationStream, LlamaEngine
from .generator import GenerationChunk, GenerationResult, StopReason, Timings
from .litert_engine import LitertEngine
from .params import GenerationParams, ModelParams
from .speculative import SpeculativeParams
from .tokenizer import Tokenizer

__all__ = [
    "AsyncChatStream",
    "AsyncLlamaEngine",
    "LlamaEngine",
    "LitertEngine",
    "GenerationStream",
    "GenerationChunk",
    "GenerationResult",
    "StopReason",
    "Timings",
    "GenerationParams",
    "ModelParams",
    "SpeculativeParams",
    "Tokenizer",
    "Device",
    "devices",
]
