"""The network edge: API keys, the public routes, the path prefix, CORS. (TLS is uvicorn's, given
``--ssl-key-file`` / ``--ssl-cert-file`` by ``serve``.)

    keys = api_keys(settings)                         # --api-key (repeated, comma-separated) + --api-key-file
    KeyGuard(app, keys); Prefix(app, "/llama"); cors_middleware(settings)   # ASGI middleware

* **Keys.** A request carries one as ``Authorization: Bearer KEY`` (or the bare key) or ``X-Api-Key:
  KEY`` (Anthropic's header), as llama-server reads them; it is compared with every key in constant
  time (``hmac.compare_digest``, all keys compared whatever matches), so the answer's timing says
  nothing of how much of a key was right. A request without a valid key gets llama-server's 401.
* **Public routes** when keys are set: ``/health``, ``/v1/health`` and the page at ``/`` (it asks for
  the key itself) -- llama-server's policy (its ``get_public_endpoints``: health and the web UI's
  assets). Everything else needs a key: ``/v1/models``, ``/props``, ``/metrics``, ``/slots`` too, as
  upstream. With ``--api-prefix`` the public routes are public under the prefix (llama-server compares
  the full path and so asks a key for ``/prefix/health``).
* **Prefix.** ``--api-prefix /llama`` serves every route under ``/llama`` (``/llama/v1/models``, the
  page at ``/llama/``); other paths are 404.
* **HEAD** is answered as GET without the body (llama-server's library does so for every GET route).
* **CORS.** None by default: a page on another origin cannot call the server (llama-server's default
  is every origin, with credentials: the warning it prints since its PR 25655). ``--cors-origins``
  lists the origins allowed (``https://app.example``), ``*`` allows any (without credentials: keys
  travel in headers, not cookies), ``localhost`` any port of this machine (llama-server's value).
  Preflights (``OPTIONS``) are answered before the key is checked, as browsers send them without it.

Raised: ``LlamaException`` for a key file that cannot be read.
"""

from __future__ import annotations

import hmac
from typing import Any

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware

from ...errors import LlamaRequestException
from ..config.settings import ServerSettings, read_text_file
from .errors import error_response

__all__ = ["PUBLIC_PATHS", "HeadAsGet", "KeyGuard", "Prefix", "api_keys", "cors_middleware", "key_matches"]

PUBLIC_PATHS = frozenset({"/health", "/v1/health", "/"})
_LOCALHOST = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]+)?"


def api_keys(settings: ServerSettings) -> tuple[str, ...]:
    """``--api-key`` values, then the key file's lines (blank lines and ``#`` comments left out)."""
    keys = list(settings.api_key)
    if settings.api_key_file is not None:
        text = read_text_file(settings.api_key_file, "API key")
        keys += [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if any(not key for key in keys):
        raise LlamaRequestException("an API key is empty")
    return tuple(keys)


def key_matches(given: str, keys: tuple[str, ...]) -> bool:
    """Whether ``given`` is one of ``keys``, every key compared in constant time."""
    given_bytes = given.encode("utf-8", "surrogateescape")
    found = False
    for key in keys:
        found |= hmac.compare_digest(given_bytes, key.encode("utf-8"))
    return found


class KeyGuard:
    """ASGI middleware: the API key on every path but the public ones (see the module docstring)."""

    def __init__(self, app: Any, keys: tuple[str, ...]) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.keys and scope["path"] not in PUBLIC_PATHS:
            headers = Headers(scope=scope)
            given = headers.get("authorization") or headers.get("x-api-key") or ""
            if given.startswith("Bearer "):
                given = given[len("Bearer "):]
            if not key_matches(given, self.keys):
                await error_response("Invalid API Key", "authentication_error", 401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Prefix:
    """ASGI middleware: the routes under ``prefix`` (the part removed from ``path``, kept in
    ``root_path``); anything else 404, ``prefix`` itself redirected to ``prefix/`` (the page)."""

    def __init__(self, app: Any, prefix: str) -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self.prefix:
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path == self.prefix:
            from starlette.responses import RedirectResponse

            await RedirectResponse(self.prefix + "/")(scope, receive, send)
            return
        if not path.startswith(self.prefix + "/"):
            await error_response("File Not Found", "not_found_error", 404)(scope, receive, send)
            return
        scope = dict(scope, path=path[len(self.prefix):], root_path=scope.get("root_path", "") + self.prefix)
        await self.app(scope, receive, send)


class HeadAsGet:
    """ASGI middleware: ``HEAD`` answered as ``GET`` without its body, as llama-server's HTTP library
    does for every GET route (uptime checks and load balancers probe ``/`` and ``/health`` so)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Any) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app(dict(scope, method="GET"), receive, headers_only)


def cors_middleware(settings: ServerSettings) -> tuple[type, dict[str, Any]] | None:
    """Starlette's CORS middleware and its options for ``--cors-origins`` (None: no CORS headers at all)."""
    origins = list(settings.cors_origins)
    if not origins:
        return None
    regex = _LOCALHOST if "localhost" in origins else None
    listed = [o for o in origins if o != "localhost"]
    return CORSMiddleware, dict(allow_origins=listed, allow_origin_regex=regex, allow_credentials=False,
                                allow_methods=["GET", "POST", "DELETE", "OPTIONS"], allow_headers=["*"],
                                expose_headers=["X-Llamact-Warning"], max_age=600)
