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
    """Run until SIGTERM / SIGINT (``shutdown``: a bounded drain); a model that fails to load stops the
    server and raises its LlamaException."""
    import os
    import sys

    import uvicorn

    from ..errors import LlamaModelException
    from .shutdown import DrainingServer
    from .transport import request_timeout_protocol

    app = create_app(settings)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning",
                            http=request_timeout_protocol(settings.timeout))
    state = app.state.llamact
    server = DrainingServer(config, state, drain=settings.shutdown_timeout)

    def stop() -> None:   # a model that cannot load: no server to keep up
        server.should_exit = True

    state.on_load_error = stop
    server.run()
    if state.abandoned:   # a worker thread is stuck in native code: exiting normally would wait for it
        sys.stderr.write("llamact: a request was still running in native code; exiting without freeing it\n")
        sys.stderr.flush()
        os._exit(1)
    error = state.load_error
    if error is not None:
        raise LlamaModelException(error)
