"""``llamact serve``: an OpenAI-compatible HTTP server over one model or several
(``pip install llamact[server]``).

    serve(settings | catalogue)    run until interrupted (uvicorn on settings.host:settings.port, TLS if given)
    create_app(settings | catalogue)   the ASGI application, for embedding or tests
    read_catalogue(flags, config_file) -> Catalogue   the server's settings and its models

What enters: the settings table (``config.settings.ServerSettings``: flags over ``LLAMACT_*`` over a
JSON config), router mode's catalogue (``models.catalogue``). What leaves: HTTP answers in
llama-server's and OpenAI's shapes, and the log (``http.logs``). Raised: a model that fails to load
outside router mode stops the server with its ``LlamaModelException``; bad settings are
``LlamaException`` / ``ValueError``.

The folders, lowest first (each imports only from those before it, ``tests/test_architecture.py``):
``config`` (the settings table), ``runners`` (requests on an engine's threads or a scheduler's
slots), ``http`` (the edge: bodies, errors, SSE, transport, keys, logs), ``wire`` (what every
family's body shares), ``models`` (the model lifecycle: catalogue, router, dispatch, state),
``serving`` (the chat path and the raw path), then one folder per API family -- ``chat``,
``completions``, ``native``, ``responses``, ``messages``, ``embeddings``, ``templates``, ``slots``,
``admin`` -- each with ``routes.py`` and ``wire.py`` (and ``stream.py`` where it writes its own
events); ``app`` (the ASGI app) and ``shutdown`` (the process's stop) on top.
"""

from __future__ import annotations

from .app import create_app
from .config.settings import ServerSettings, load_settings
from .models.catalogue import Catalogue, read_catalogue

__all__ = ["Catalogue", "ServerSettings", "create_app", "load_settings", "read_catalogue", "serve"]


def serve(settings: ServerSettings | Catalogue) -> None:
    """Run until SIGTERM / SIGINT (``shutdown``: a bounded drain); outside router mode a model that
    fails to load stops the server and raises its LlamaException (the log has said it). The socket
    is bound first: an address in use raises ``LlamaException`` before any model loads."""
    import os
    import sys

    import uvicorn

    from ..errors import LlamaModelException
    from .http.logs import ServerLog
    from .http.transport import listening_socket, request_timeout_protocol
    from .shutdown import DrainingServer

    server_settings = settings.settings if isinstance(settings, Catalogue) else settings
    # bound before anything loads: a busy port is a LlamaException now, not a bare error after the load
    sock = listening_socket(server_settings.host, server_settings.port)
    log = ServerLog(server_settings.log_format)
    app = create_app(settings, server_log=log)
    models = app.state.llamact
    tls = server_settings.ssl_cert_file is not None
    # asyncio's loop, as measured: uvicorn would take uvloop wherever it is installed (llamact[ray] brings it)
    config = uvicorn.Config(app, host=server_settings.host, port=server_settings.port, log_level="warning",
                            loop="asyncio", http=request_timeout_protocol(server_settings.timeout),
                            ssl_certfile=str(server_settings.ssl_cert_file) if tls else None,
                            ssl_keyfile=str(server_settings.ssl_key_file) if tls else None)
    server = DrainingServer(config, models, drain=server_settings.shutdown_timeout, log=log,
                            prefix=server_settings.api_prefix)
    log.server_starting(models)

    def stop() -> None:   # the one model cannot load: no server to keep up
        server.should_exit = True

    models.on_load_error = stop
    server.run(sockets=[sock])
    if models.abandoned:   # a worker thread is stuck in native code: exiting normally would wait for it
        sys.stderr.write("llamact: a request was still running in native code; exiting without freeing it\n")
        sys.stderr.flush()
        os._exit(1)
    if not models.routing and models.only.error is not None:   # the log has said why, once
        raise LlamaModelException(models.only.error)
    log.info("stopped", event="stopped")
