"""llamact: GGUF models through a direct ctypes binding to a pinned llama.cpp.

The public API is what this module exports; everything else may change.
"""

from ._build import build_info
from .backends.litert.registry import LITERT_LM_QWEN3_CHAT_TEMPLATE
from .chat.deltas import ToolCallDelta
from .chat.media import MEDIA_MARKER, audio_part, image_part
from .chat.messages import ChatMessage, ToolCall
from .chat.oai import ChatTool
from .chat.request import ChatRequest
from .compat import Llama, LlamaGrammar
from .engine import (
    AsyncChatStream,
    AsyncLlamaEngine,
    ChatBackend,
    Device,
    GenerationChunk,
    GenerationParams,
    GenerationResult,
    LitertEngine,
    LlamaEngine,
    ModelParams,
    SpeculativeParams,
    StopReason,
    Timings,
    Tokenizer,
    devices,
)
from .engine.chat_completion import ChatStream
from .engine.chat_types import ChatChunk, ChatCompletion, ChatTimings, Usage
from .engine.structured import parse_structured_json
from .errors import (
    ErrorKind,
    LlamaContextException,
    LlamaException,
    LlamaInferenceException,
    LlamaMediaException,
    LlamaModelException,
    LlamaRequestException,
    LlamaStateException,
    LlamaTemplateException,
    LlamaUnsupportedException,
)
from .session import ChatSession, SessionStream, TemplateTimeChatSession
from .session.tool_functions import Tool
from .session.tools import ToolCallRequest, ToolLoopResult

__version__ = "0.1.0"

__all__ = [
    "build_info",
    "Llama",
    "LlamaGrammar",
    "devices",
    "Device",
    "GenerationChunk",
    "GenerationParams",
    "GenerationResult",
    "LlamaEngine",
    "LitertEngine",
    "ChatBackend",
    "ModelParams",
    "SpeculativeParams",
    "ChatRequest",
    "ChatMessage",
    "ChatTool",
    "ToolCall",
    "ChatStream",
    "ChatChunk",
    "ChatCompletion",
    "ChatTimings",
    "Usage",
    "ToolCallDelta",
    "StopReason",
    "Timings",
    "Tokenizer",
    "AsyncChatStream",
    "AsyncLlamaEngine",
    "ChatSession",
    "TemplateTimeChatSession",
    "SessionStream",
    "Tool",
    "ToolCallRequest",
    "ToolLoopResult",
    "parse_structured_json",
    "ErrorKind",
    "LlamaException",
    "LlamaModelException",
    "LlamaContextException",
    "LlamaInferenceException",
    "LlamaUnsupportedException",
    "LlamaStateException",
    "LlamaRequestException",
    "LlamaTemplateException",
    "LlamaMediaException",
    "image_part",
    "audio_part",
    "MEDIA_MARKER",
    "LITERT_LM_QWEN3_CHAT_TEMPLATE",
]
