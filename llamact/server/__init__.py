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
    """Run until interrupted; a model that fails to load stops the server and raises its LlamaException."""
    import uvicorn

    from ..errors import LlamaModelException

    app = create_app(settings)
    server = uvicorn.Server(uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning",
                                           timeout_graceful_shutdown=5))
    state = app.state.llamact

    def stop() -> None:   # a model that cannot load: no server to keep up
        server.should_exit = True

    state.on_load_error = stop
    server.run()
    error = state.load_error
    if error is not None:
        raise LlamaModelException(error)
