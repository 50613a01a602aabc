"""A chat request made ready to generate: what ``LlamaEngine.prepare_chat`` returns.

    chat = engine.prepare_chat(request, params)
    chat.result, chat.parser, chat.tokens, chat.params, chat.sampling

What enters: a ``ChatRequest`` and its ``GenerationParams``. What it holds: the template's result
for the request, the stream parser for the reply, the prompt's tokens, the effective generation
settings (the request's logprob options applied) and the native sampler llama-server would build
(``chat_sampling``), and the prompt's media (``engine.media``) when it has images or audio. The
single-sequence loop (``create()``) and the batched slots both generate
from one, so a chat request is prepared the same way whichever runs it. The sampler is owned by
whoever generates; ``close()`` frees it when nothing will.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..chat.request import ChatRequest
from ..chat.result import ChatTemplateResult
from ..chat.streaming import ChatStreamParser
from .chat_sampling import ChatSampling
from .media import MediaPrompt
from .params import GenerationParams

__all__ = ["PreparedChat"]


@dataclass(frozen=True)
class PreparedChat:
    request: ChatRequest
    result: ChatTemplateResult
    parser: ChatStreamParser
    tokens: list[int]
    params: GenerationParams
    sampling: ChatSampling
    media: MediaPrompt | None = None   # the prompt's images and audio (``tokens`` are then its keys)

    def close(self) -> None:
        """Free the sampler and the media (when the request will not be generated)."""
        self.sampling.close()
        if self.media is not None:
            self.media.close()
