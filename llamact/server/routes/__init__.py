"""The server's routes, one module per family; each route only translates between HTTP and the engine.

* :mod:`.chat` -- ``/v1/chat/completions`` (and ``/chat/completions``)
* :mod:`.completions` -- ``/v1/completions``: raw prompts in OpenAI's shape
* :mod:`.native` -- ``/completion``, ``/completions``, ``/infill``: raw prompts in llama-server's own shape
  (:mod:`.raw_run` runs the prompts of both)
* :mod:`.responses` -- ``/v1/responses`` (and ``/responses``): OpenAI's Responses API on the chat path
* :mod:`.input_tokens` -- ``/v1/responses/input_tokens``, ``/v1/chat/completions/input_tokens`` (and
  the paths without ``/v1``): the rendered prompt's token count
* :mod:`.messages` -- ``/v1/messages`` and ``/v1/messages/count_tokens``: Anthropic's Messages API
* :mod:`.templates` -- ``/apply-template``, ``/template-details``, ``/tokenize``, ``/detokenize``
* :mod:`.admin` -- ``/health``, ``/v1/models``, ``/props``, ``/metrics``, the page at ``/``
* :mod:`.models` -- router mode's ``POST /models/load``, ``/models/unload``, ``GET /models/sse``
* :mod:`.embeddings` -- ``/v1/embeddings``, ``/embeddings`` (``/embedding``), ``/rerank`` (and its aliases)
* :mod:`.lora` -- ``GET /lora-adapters``, ``POST /lora-adapters`` (the adapters' scales)
* :mod:`.slots` -- ``GET /slots``, ``POST /slots/{id}?action=save|restore|erase``
* :mod:`.disabled` -- llama-server's routes for features this server lacks, refused as upstream refuses them

Bodies are read by ``server.protocol``, streams written by ``server.sse``; requests run on the
worker of the model ``server.dispatch`` gave them (``state_of(request)``).
"""

from __future__ import annotations

from fastapi import APIRouter

from . import (
    admin,
    chat,
    completions,
    disabled,
    embeddings,
    input_tokens,
    lora,
    messages,
    models,
    native,
    responses,
    slots,
    templates,
)

__all__ = ["ROUTERS"]

ROUTERS: tuple[APIRouter, ...] = (
    admin.router,
    models.router,
    chat.router,
    completions.router,
    native.router,
    responses.router,
    input_tokens.router,
    messages.router,
    embeddings.router,
    templates.router,
    slots.router,
    lora.router,
    disabled.router,
)
