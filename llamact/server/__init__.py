"""``llamact serve``: an OpenAI-compatible HTTP server over one model (``pip install llamact[server]``).

    serve(settings)            run until interrupted (uvicorn on settings.host:settings.port)
    create_app(settings)       the ASGI application, for embedding or tests

See ``app`` for the routes and ``worker`` for how requests share the engine.
"""

from __future__ import annotations

from .app import create_app
from .settings import ServerSettings, load_settings

__all__ = ["ServerSettings", "create_app", "load_settings", "serve"]


def serve(settings: ServerSettings) -> None:
    import uvicorn

    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level="warning",
                timeout_graceful_shutdown=5)
