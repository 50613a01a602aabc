"""LiteRT-LM (``.litertlm`` bundles) under llamact's engine: the runtime side.

What enters: a bundle's path, ``ChatRequest`` values, and ``GenerationParams``' fields as a
mapping. What leaves: what the bundle says about itself (``read_bundle``: the embedded template,
the model type, the output channels), the template each side renders with (``choose_template``,
with the filename-keyed registry of Gemma and Qwen families), the content-as-parts adapter
(``classify`` / ``adapted``), a request's route (``conversation_call``: the runtime's Conversation
API, or llamact's rendering) and the runtime's streamed text (``RuntimeStream``). The engine side,
``llamact.engine.litert_engine.LitertEngine``, puts these behind ``LlamaEngine``'s surface.

What is raised: ``LlamaUnsupportedException`` when the extra is not installed or its version is
not supported, and for what the runtime cannot do (GBNF grammars, a named or required tool
choice, logprobs, media, sampler fields it lacks); ``LlamaModelException`` for a file that is not a
readable bundle (wrong magic, unknown format version, truncated, corrupt metadata) or that the
runtime refuses; ``LlamaInferenceException`` for a runtime failure while generating.

Importing this package needs nothing beyond llamact: ``litert_lm`` is imported when a bundle is
loaded (``runtime.load_runtime``).
"""

from .bundle import BundleInfo, Channel, read_bundle, vocab_size
from .content_shape import PROBE, ContentShape, adapted, classify
from .registry import FAMILIES, LITERT_LM_QWEN3_CHAT_TEMPLATE, Family, family_for
from .requests import ConversationCall, conversation_call, refuse_unsupported
from .runtime import RuntimeEngine, load_runtime, quiet_runtime, runtime_version
from .sampling import RuntimeSampling, runtime_sampling
from .stream import RuntimeStream, conversation_text, session_text
from .template_choice import PASS_THROUGH, TemplateChoice, choose_template

__all__ = [
    "FAMILIES", "LITERT_LM_QWEN3_CHAT_TEMPLATE", "PASS_THROUGH", "PROBE", "BundleInfo", "Channel", "ContentShape",
    "ConversationCall", "Family",
    "RuntimeEngine", "RuntimeSampling", "RuntimeStream", "TemplateChoice", "adapted", "choose_template", "classify",
    "conversation_call", "conversation_text", "family_for", "load_runtime", "quiet_runtime", "read_bundle",
    "refuse_unsupported", "runtime_sampling", "runtime_version", "session_text", "vocab_size",
]
