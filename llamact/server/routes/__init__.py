"""The server's routes, one module per family; each route only translates between HTTP and the engine.

* :mod:`.chat` -- ``/v1/chat/completions`` (and ``/chat/completions``)
* :mod:`.completions` -- ``/v1/completions``: raw prompts in OpenAI's shape
* :mod:`.native` -- ``/completion``, ``/completions``, ``/infill``: raw prompts in llama-server's own shape
  (:mod:`.raw_run` runs the prompts of both)
* :mod:`.templates` -- ``/apply-template``, ``/template-details``, ``/tokenize``, ``/detokenize``
* :mod:`.admin` -- ``/health``, ``/v1/models``, ``/props``, ``/metrics``, the page at ``/``

Bodies are read by ``server.protocol``, streams written by ``server.sse``; requests run on the
state's worker (``server.state``).
"""

from __future__ import annotations

from fastapi import APIRouter

from . import admin, chat, completions, native, templates

__all__ = ["ROUTERS"]

ROUTERS: tuple[APIRouter, ...] = (admin.router, chat.router, completions.router, native.router, templates.router)
