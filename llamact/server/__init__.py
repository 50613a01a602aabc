"""``llamact serve``: an OpenAI-compatible HTTP server over one model or several
(``pip install llamact[server]``).

    serve(settings | catalogue)    run until interrupted (uvicorn on settings.host:settings.port, TLS if given)
    create_app(settings | catalogue)   the ASGI application, for embedding or tests
    read_catalogue(flags, config_file) -> Catalogue   the server's settings and its models

What enters: the settings table (``settings.ServerSettings``: flags over ``LLAMACT_*`` over a JSON
config), router mode's catalogue (``catalogue``). What leaves: HTTP answers in llama-server's and
OpenAI's shapes, and the log (``logs``). Raised: a model that fails to load outside router mode stops
the server with its ``LlamaModelException``; bad settings are ``LlamaException`` / ``ValueError``.
See ``app`` for the middleware and routes, ``router`` for several models, ``worker`` for how
requests share an engine.
"""

from __future__ import annotations

from .app import create_app
from .catalogue import Catalogue, read_catalogue
from .settings import ServerSettings, load_settings

__all__ = ["Catalogue", "ServerSettings", "create_app", "load_settings", "read_catalogue", "serve"]


def serve(settings: ServerSettings | Catalogue) -> None:
    """Run until SIGTERM / SIGINT (``shutdown``: a bounded drain); outside router mode a model that
    fails to load stops the server and raises its LlamaException."""
    import os
    import sys

    import uvicorn

    from ..errors import LlamaModelException
    from .logs import ServerLog
    from .shutdown import DrainingServer
    from .transport import request_timeout_protocol

    server_settings = settings.settings if isinstance(settings, Catalogue) else settings
    log = ServerLog(server_settings.log_format)
    app = create_app(settings, server_log=log)
    models = app.state.llamact
    tls = server_settings.ssl_cert_file is not None
    config = uvicorn.Config(app, host=server_settings.host, port=server_settings.port, log_level="warning",
                            http=request_timeout_protocol(server_settings.timeout),
                            ssl_certfile=str(server_settings.ssl_cert_file) if tls else None,
                            ssl_keyfile=str(server_settings.ssl_key_file) if tls else None)
    server = DrainingServer(config, models, drain=server_settings.shutdown_timeout, log=log,
                            prefix=server_settings.api_prefix)
    log.server_starting(models)

    def stop() -> None:   # the one model cannot load: no server to keep up
        server.should_exit = True

    models.on_load_error = stop
    server.run()
    if models.abandoned:   # a worker thread is stuck in native code: exiting normally would wait for it
        sys.stderr.write("llamact: a request was still running in native code; exiting without freeing it\n")
        sys.stderr.flush()
        os._exit(1)
    log.info("stopped", event="stopped")
    if not models.routing and models.only.error is not None:
        raise LlamaModelException(models.only.error)
