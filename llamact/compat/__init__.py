"""llama-cpp-python's high-level API on llamact: the migration path.

    from llama_cpp import Llama            # before
    from llamact.compat import Llama       # after: the same calls, the same dict shapes

``Llama`` (``llama.py``) takes llama-cpp-python's constructor options and has its methods:
``create_completion`` / ``__call__``, ``create_chat_completion`` (and ``_openai_v1``),
``create_embedding`` / ``embed``, ``tokenize`` / ``detokenize``, ``save_state`` / ``load_state``,
``reset``, ``n_ctx()``, ``metadata``, ``from_pretrained``. ``LlamaGrammar``, ``LogitsProcessorList``,
``StoppingCriteriaList`` and ``LlamaState`` are its companions. What is refused, and why, is in
``options.py`` and the README's migration section; ``llama.engine`` is llamact's own engine.
"""

from __future__ import annotations

from .grammar import JSON_GBNF, LlamaGrammar
from .llama import Llama
from .processors import LlamaState, LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

__all__ = ["JSON_GBNF", "Llama", "LlamaGrammar", "LlamaState", "LogitsProcessor", "LogitsProcessorList",
           "StoppingCriteria", "StoppingCriteriaList"]
