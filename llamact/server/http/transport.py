"""The HTTP connection's bounds: a client has ``--timeout`` seconds to send a whole request, and a
client that stops reading an answer is dropped after ``--timeout`` seconds of a full write buffer.

    uvicorn.Config(app, http=request_timeout_protocol(600.0), ...)
    sock = listening_socket(host, port)     # bound before any model loads: a busy port is said first

uvicorn bounds only the idle time after a response (``timeout_keep_alive``, 5 s as llama-server's
keep-alive); a connection that sends nothing, half its headers, or a body byte by byte would stay
open for ever. This protocol (uvicorn's h11 one) starts a clock when a connection opens and after
each response, stops it once the request's last body byte has arrived, and closes the connection
when it runs out first; the route reading the body then sees the client gone. llama-server's
``--timeout`` (cpp-httplib) bounds each socket read instead, so a client trickling bytes stays; here
the whole request counts. Writing is bounded as cpp-httplib bounds it: a long stream is never cut
while its client reads, but one whose socket stays full (``pause_writing`` without a
``resume_writing``) for ``--timeout`` seconds is aborted, and the stream's job is cancelled as for
any client that goes away -- before, such a client held its slot until it disconnected. Both are
``abort()``: ``close()`` would wait for a write buffer that never drains.
"""

from __future__ import annotations

import errno
import socket
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from ...errors import LlamaException

__all__ = ["listening_socket", "request_timeout_protocol"]


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound now (uvicorn would bind it after its start-up, so after the model
    had begun loading): an address in use or not available is a ``LlamaException`` saying what to do."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except OSError as exc:
        raise LlamaException(f"cannot listen on {host}:{port}: {exc} (--host)") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as uvicorn: a port in TIME_WAIT is free
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        hint = (" -- another process is listening there (another llamact serve?): stop it, or choose another "
                "port with --port" if exc.errno == errno.EADDRINUSE else " (--host, --port)")
        raise LlamaException(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}") from None
    sock.set_inheritable(True)
    return sock


def request_timeout_protocol(timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the two bounds (see the module docstring)."""

    class RequestTimeoutProtocol(H11Protocol):
        _request_clock: Any = None
        _write_clock: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._start_clock()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_clock()
            if self._write_clock is not None:
                self._write_clock.cancel()
            super().connection_lost(exc)

        def pause_writing(self) -> None:
            super().pause_writing()
            if self._write_clock is None:
                self._write_clock = self.loop.call_later(timeout, self._out_of_time)

        def resume_writing(self) -> None:
            super().resume_writing()
            if self._write_clock is not None:
                self._write_clock.cancel()
                self._write_clock = None

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state is not h11.IDLE and self.conn.their_state is not h11.SEND_BODY:
                self._stop_clock()   # the request has all arrived (or the connection is ending)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.conn.their_state is h11.IDLE:   # the next request's clock
                self._start_clock()

        def _start_clock(self) -> None:
            self._stop_clock()
            self._request_clock = self.loop.call_later(timeout, self._out_of_time)

        def _stop_clock(self) -> None:
            if self._request_clock is not None:
                self._request_clock.cancel()
                self._request_clock = None

        def _out_of_time(self) -> None:
            self._request_clock = self._write_clock = None
            self.transport.abort()

    return RequestTimeoutProtocol
