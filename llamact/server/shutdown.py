"""``llamact serve``'s stop: a bounded drain on SIGTERM / SIGINT, an immediate exit on a second one.

    server = DrainingServer(config, models, drain=settings.shutdown_timeout, log=log); server.run()

Once listening it logs each bound address, the real port included (``--port 0``) -- outside router
mode once its model has loaded (a model that fails to load is the one line said). On the first
signal the server stops listening and running requests get ``drain`` seconds to finish
(llama-server's shutdown has no drain: it stops its queue); then those left are ended
(``ModelRouter.end_requests``: a stream gets an error event, a reply not streamed a 503), their
connections close and the engines are closed (``app``'s lifespan). A second signal exits at once. A
watchdog thread, started by the first signal, exits the process if all that has not ended within
``drain + EXIT_MARGIN_S`` -- a native call that never returns cannot keep the process alive.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from types import FrameType
from typing import Any

import uvicorn

from .app import CLOSE_WAIT_S
from .http.logs import ServerLog
from .models.model_router import ModelRouter

__all__ = ["EXIT_MARGIN_S", "DrainingServer"]

WRITE_GRACE_S = 1.0                           # for the ended requests' last events to reach their clients
EXIT_MARGIN_S = WRITE_GRACE_S + CLOSE_WAIT_S + 2.0   # the watchdog's allowance beyond the drain


def _leave(message: str, code: int) -> None:
    sys.stderr.write(f"llamact: {message}\n")
    sys.stderr.flush()
    os._exit(code)


class DrainingServer(uvicorn.Server):
    """uvicorn's server with the stop described in the module docstring."""

    def __init__(self, config: uvicorn.Config, models: ModelRouter, *, drain: float, log: ServerLog,
                 prefix: str = "") -> None:
        config.timeout_graceful_shutdown = int(drain + WRITE_GRACE_S + 0.999)
        super().__init__(config)
        self.models = models
        self.drain = drain
        self.log = log
        self.prefix = prefix
        self.urls: list[str] = []

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        scheme = "https" if self.config.is_ssl else "http"
        for server in self.servers:
            for sock in server.sockets:
                host, port = sock.getsockname()[:2]
                self.urls.append(f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}")
        if self.models.routing or self.models.only.status == "loaded":
            self.log.listening(self.urls, self.prefix)
        else:   # said when the model is ready: a load that fails then is the last word
            self.models.on_ready = lambda: self.log.listening(self.urls, self.prefix)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # not uvicorn's: it records the signal to raise it again once the server has stopped
        if self.should_exit:
            _leave(f"signal {sig} again: exiting now", 128 + sig)
        self.should_exit = True
        self.log.info(f"stopping (signal {sig}); running requests get {self.drain:g} s (signal again to exit now)",
                      event="stopping", signal=sig)
        threading.Thread(target=self._watchdog, name="llamact-watchdog", daemon=True).start()

    def _watchdog(self) -> None:
        time.sleep(self.drain + EXIT_MARGIN_S)
        _leave(f"the server did not stop within {self.drain + EXIT_MARGIN_S:g} s: exiting", 1)

    async def shutdown(self, sockets: Any = None) -> None:
        loop = asyncio.get_running_loop()
        timer = loop.call_later(self.drain, self.models.end_requests)
        try:
            await super().shutdown(sockets)
        finally:
            timer.cancel()

