"""The server's routes, one module per family; each route only translates between HTTP and the engine.

* :mod:`.chat` -- ``/v1/chat/completions`` (and ``/chat/completions``)
* :mod:`.completions` -- ``/v1/completions`` (and ``/completions``): a raw prompt
* :mod:`.templates` -- ``/apply-template``, ``/template-details``, ``/tokenize``, ``/detokenize``
* :mod:`.admin` -- ``/health``, ``/v1/models``, ``/props``, ``/metrics``, the page at ``/``
* :mod:`.embeddings` -- ``/v1/embeddings``, ``/embeddings`` (``/embedding``), ``/rerank`` (and its aliases)

Bodies are read by ``server.protocol``, streams written by ``server.sse``; requests run on the
state's worker (``server.state``).
"""

from __future__ import annotations

from fastapi import APIRouter

from . import admin, chat, completions, embeddings, templates

__all__ = ["ROUTERS"]

ROUTERS: tuple[APIRouter, ...] = (admin.router, chat.router, completions.router, embeddings.router,
                                  templates.router)
