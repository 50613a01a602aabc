"""The engine: models, contexts and the generation loop behind ``LlamaEngine``."""

from .aio import AsyncChatStream
from .async_engine import AsyncLlamaEngine
from .backend import ChatBackend, TokenStream
from .backends import Device, devices
from .batched import BatchScheduler
from .engine import LlamaEngine
from .generator import GenerationChunk, GenerationResult, StopReason, Timings
from .litert_engine import LitertEngine
from .params import GenerationParams, ModelParams
from .speculative import SpeculativeParams
from .streams import GenerationStream
from .tokenizer import Tokenizer

# the runtimes keep the contract (checked by mypy here; tests/test_architecture.py checks it too)
_CHAT_BACKENDS: tuple[type[ChatBackend], ...] = (LlamaEngine, BatchScheduler, LitertEngine)

__all__ = [
    "AsyncChatStream",
    "AsyncLlamaEngine",
    "BatchScheduler",
    "ChatBackend",
    "TokenStream",
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
