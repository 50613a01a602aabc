"""The contract every runtime keeps: ``ChatBackend`` (what a chat call means) and ``TokenStream``
(what a running generation is), so the session, the server and user code take any runtime alike.

    def serve(backend: ChatBackend) -> None:
        with backend.create(messages, tools=tools, temperature=0) as stream:   # a ChatStream
            for chunk in stream: ...

The runtimes are siblings that implement this contract, none a subclass of another:

- ``LlamaEngine`` (``engine.py``): a GGUF model through llama.cpp, one generation at a time;
- ``BatchScheduler`` (``batched.py``): one ``LlamaEngine``'s context as N slots, requests at once;
- ``LitertEngine`` (``litert_engine.py``): a ``.litertlm`` bundle through the LiteRT-LM runtime.

They share code through small helpers (``chat_calls``, ``streams``, ``ChatStream``), never by
inheritance, so none carries methods it must refuse. What only llama.cpp has (embeddings, LoRA,
KV-cache state and slot files, logits, speculative decoding) is ``LlamaEngine``'s alone; code that
needs it checks ``isinstance(engine, LlamaEngine)``. ``LlamaEngine.load`` is the loader: it picks
the runtime by the file's suffix (``loader.RUNTIMES``), so ``LlamaEngine.load("m.litertlm")`` gives a
``LitertEngine``, which is not an instance of ``LlamaEngine``.

``ChatBackend`` is a static type (mypy), not a runtime check: test for a concrete runtime with
``isinstance(engine, (LlamaEngine, LitertEngine))``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..chat.request import ChatRequest
from ..chat.result import ChatTemplateResult
from ..chat.templates import ChatTemplates
from .chat_completion import ChatStream
from .params import GenerationParams
from .streams import TokenStream

__all__ = ["ChatBackend", "TokenStream"]


class ChatBackend(Protocol):
    """A runtime that answers chat requests. ``cancel()`` and ``close()`` may be called from any
    thread; once closed, a call that needs the model raises ``LlamaStateException``.

    - ``create(messages, *, params=None, **options)``: stream the reply to a chat request -- a
      ``ChatRequest``, or its messages with the request's options as keywords; ``GenerationParams``
      fields as keywords are a shortcut for ``params``. The prompt, grammar and parser come from
      ``templates()``; the stream (``ChatStream``) gives ``ChatChunk`` values, the last with the
      finish reason, usage and timings. Bad requests raise before any token is generated.
    - ``generate(prompt, params=None)``: a raw completion of ``prompt`` (text, tokenized with special
      tokens parsed, or token ids), no template applied: a ``TokenStream``.
    - ``templates(custom_template=None)``: the template set requests are rendered with (sources,
      caps): ``custom_template`` when given, else the runtime's override or the model's own.
    - ``chat_template(messages, **options)``: what the template makes of a request (prompt, format,
      grammar, parser, ...), nothing generated.
    - ``tokenize(text, add_special, parse_special, limit)``: the model's token ids for ``text``;
      more than ``limit`` raise ``LlamaTokenLimitException``.
    - ``prompt_length(request)``: the positions the request's prompt takes in the context (what a
      session fits a history into).
    - ``cancel()``: stop what is generating now (its stream ends with ``StopReason.CANCELLED``);
      idle, nothing. ``close()``: cancel, then free the runtime; idempotent.
    - ``model_name``: the model file's name; ``n_ctx``: the positions one request (prompt and
      reply) may take; ``n_threads``: the threads a one-token step uses now.
    """

    @property
    def model_name(self) -> str: ...

    @property
    def n_ctx(self) -> int: ...

    @property
    def n_threads(self) -> int: ...

    def create(self, messages: Any, *, params: GenerationParams | None = None, **options: Any) -> ChatStream: ...

    def generate(self, prompt: str | Sequence[int], params: GenerationParams | None = None) -> TokenStream: ...

    def templates(self, custom_template: str | None = None) -> ChatTemplates: ...

    def chat_template(self, messages: Any, **options: Any) -> ChatTemplateResult: ...

    def tokenize(self, text: str | bytes, add_special: bool = True, parse_special: bool = True,
                 limit: int | None = None) -> list[int]: ...

    def prompt_length(self, request: ChatRequest) -> int: ...

    def cancel(self) -> None: ...

    def close(self) -> None: ...
