"""What ``llamact serve`` says while it runs: start lines, one access line per request, warnings that
matter, shutdown lines -- as text (``llamact: ...``) or, with ``--log-format json``, one JSON object a
line (``{"time", "level", "event", "message", ...fields}``), on stderr.

    log = ServerLog(settings.log_format)          # log.info(message, event=..., **fields)
    AccessLog(app, log, log_prompts=False)        # ASGI middleware: the access line when a response ends
    note_usage(n_prompt, n_completion, n_cached)  # a route's token counts, for its request's line

The access line holds the method, the path, the status, the model, the prompt / completion / cached
tokens (those the route recorded: generation routes), the seconds from the request's arrival to its
response's end (a stream's last event), and the client's address; for an error answer (4xx, 5xx)
its cause, the error's message; never a prompt or message unless ``--log-prompts``. ``/health``
probes are not logged (llama-server leaves them out too).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from contextvars import ContextVar
from typing import Any

__all__ = ["BODY_KEY", "MODEL_KEY", "AccessLog", "ServerLog", "note_usage"]

MODEL_KEY = "llamact.model"   # the request scope's entry naming its model (models.dispatch)
BODY_KEY = "llamact.body"     # its parsed JSON body, once read (http/body.py)
_USAGE: ContextVar[dict[str, int] | None] = ContextVar("llamact_usage", default=None)
_QUIET_PATHS = frozenset({"/health", "/v1/health"})
_PROMPT_FIELDS = ("messages", "prompt", "input", "system", "content", "input_prefix", "input_suffix")
_ERROR_BODY_MAX = 16384   # the most of an error answer read for its message (error bodies are small)


def error_cause(body: bytes) -> str | None:
    """The message of an error answer's JSON (``{"error": {"message": ...}}``), else None."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return None
    message = error.get("message") if isinstance(error, dict) else error
    return message if isinstance(message, str) and message else None


def note_usage(n_prompt: int, n_completion: int, n_cached: int) -> None:
    """Add a generation's token counts to the access line of the request running it (none outside one)."""
    usage = _USAGE.get()
    if usage is not None:
        usage["prompt_tokens"] += n_prompt
        usage["completion_tokens"] += n_completion
        usage["cached_tokens"] += n_cached


class _Text(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        prefix = "llamact: " if record.levelno < logging.WARNING else f"llamact: {record.levelname.lower()}: "
        return prefix + record.getMessage()


class _Json(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", {})
        line = {"time": round(record.created, 3), "level": record.levelname.lower(),
                "event": fields.pop("event", "log"), "message": record.getMessage(), **fields}
        return json.dumps(line, ensure_ascii=False, default=str)


class ServerLog:
    """The server's log (see the module docstring): its own logger, so the library's logging settings
    neither hide nor duplicate it."""

    def __init__(self, log_format: str = "text", stream: Any = None) -> None:
        self.logger = logging.getLogger("llamact.serve")
        self.logger.setLevel(logging.INFO)
        self.logger.propagate = False
        for handler in list(self.logger.handlers):
            self.logger.removeHandler(handler)
        handler = logging.StreamHandler(stream or sys.stderr)
        handler.setFormatter(_Json() if log_format == "json" else _Text())
        self.logger.addHandler(handler)

    def _emit(self, level: int, message: str, fields: dict[str, Any]) -> None:
        self.logger.log(level, message, extra={"fields": fields})

    def info(self, message: str, **fields: Any) -> None:
        self._emit(logging.INFO, message, fields)

    def warning(self, message: str, **fields: Any) -> None:
        self._emit(logging.WARNING, message, {"event": "warning", **fields})

    def error(self, message: str, **fields: Any) -> None:
        self._emit(logging.ERROR, message, {"event": "error", **fields})

    # -- the lines that have a shape of their own ------------------------------------------------------
    def server_starting(self, models: Any) -> None:
        """What the server will serve, and the warnings its settings deserve."""
        settings = models.settings
        if models.routing:
            limit = settings.models_max or "no limit"
            self.info(f"router mode: {len(models.entries)} model(s), at most {limit} loaded at once",
                      event="router", models=len(models.entries), models_max=settings.models_max)
            for entry in models.entries.values():
                also = f" (also {', '.join(entry.spec.aliases)})" if entry.spec.aliases else ""
                start = ", loaded at start" if entry.spec.load_on_startup else ""
                self.info(f"  model {entry.name}{also}: {entry.settings.model} [{entry.spec.source}]{start}",
                          event="router_model", model=entry.name, path=entry.settings.model,
                          source=entry.spec.source, aliases=list(entry.spec.aliases))
        else:
            entry = models.only
            self.info(f"model {entry.label}: loading {entry.settings.model or 'the bundled SmolLM2'}",
                      event="model_loading", model=entry.name)
        keys = bool(settings.api_key or settings.api_key_file)
        if not keys and settings.host not in ("127.0.0.1", "localhost", "::1"):
            self.warning(f"no API key and listening on {settings.host}: anyone who reaches it can use it "
                         "(--api-key, --api-key-file)", host=settings.host)
        if "*" in settings.cors_origins and not keys:
            self.warning("CORS allows every origin and no API key is set: any web page can use this server",
                         cors_origins=list(settings.cors_origins))

    def listening(self, urls: list[str], prefix: str) -> None:
        for url in urls:
            self.info(f"listening on {url}{prefix}/", event="listening", url=url + prefix)

    def model_loaded(self, state: Any, seconds: float, aliases: tuple[str, ...] = (), other_threads: int = 0) -> None:
        """The model's lines once loaded: file and context, slots, template, backends, threads
        (``other_threads``: those of the models already loaded, which decode on the same cores)."""
        from ..._build import build_info

        engine, settings = state.engine, state.settings
        name = state.label
        params = engine.params
        threads = params.n_threads or min(4, os.cpu_count() or 1)
        named = f" (also {', '.join(aliases)})" if aliases else ""
        self.info(f"model {name}{named}: {state.model_file} loaded in {seconds:.1f} s", event="model_loaded",
                  model=name, path=str(state.model_file), aliases=list(aliases), seconds=round(seconds, 3))
        self.info(f"model {name}: context {engine.n_ctx} tokens, {settings.parallel} slot(s) of {engine.n_ctx_seq}, "
                  f"batch {engine.n_batch}, {threads} thread(s)", event="model_context", model=name,
                  n_ctx=engine.n_ctx, slots=settings.parallel, n_ctx_slot=engine.n_ctx_seq, threads=threads)
        result = engine.chat_template([{"role": "user", "content": "Hello"}])
        source = f"file {settings.chat_template_file}" if settings.chat_template_file else "the model's"
        tools = "tool calls" if state.tools_supported else "no tool calls"
        self.info(f"model {name}: template {source}, family {result.family}, format {result.format}, {tools}",
                  event="model_template", model=name, family=result.family, format=result.format,
                  tools=state.tools_supported)
        backends = [str(b) for b in build_info()["backends"]]
        offloads = [b for b in backends if b not in ("cpu", "rpc")] or params.rpc_servers
        layers = "all layers" if params.n_gpu_layers < 0 else f"{params.n_gpu_layers} layers"
        placement = (f"offload {layers}" + (f" to {', '.join(params.devices)}" if params.devices else "")
                     if offloads and params.n_gpu_layers != 0 else "on the CPU")
        self.info(f"model {name}: backends {', '.join(backends)}; {placement}",
                  event="model_backends", model=name, backends=backends, n_gpu_layers=params.n_gpu_layers,
                  devices=list(params.devices or ()))
        self.check_threads(threads, name, other_threads)

    def check_threads(self, threads: int, name: str, other_threads: int = 0) -> None:
        """Warn when llama.cpp gets more threads than the process has cores (its thread pool spins),
        counting those of the other models loaded."""
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        total = threads + other_threads
        if total > cores:
            others = f" (and the other models loaded {other_threads})" if other_threads else ""
            self.warning(f"model {name}: {threads} threads{others} on {cores} core(s); llama.cpp's threads spin "
                         "while they wait, so more threads than cores makes decoding much slower (--threads)",
                         model=name, threads=threads, other_threads=other_threads, cores=cores)


class AccessLog:
    """ASGI middleware writing each request's access line once its response has ended."""

    def __init__(self, app: Any, log: ServerLog, log_prompts: bool = False) -> None:
        self.app = app
        self.log = log
        self.log_prompts = log_prompts

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in _QUIET_PATHS:
            await self.app(scope, receive, send)
            return
        began = time.monotonic()
        usage = {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0}
        token = _USAGE.set(usage)
        status = [0]
        error_body = bytearray()

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            elif status[0] >= 400 and message["type"] == "http.response.body" and len(error_body) < _ERROR_BODY_MAX:
                error_body.extend(message.get("body", b"")[:_ERROR_BODY_MAX])
            await send(message)
        try:
            await self.app(scope, receive, sending)
        finally:
            _USAGE.reset(token)
            cause = error_cause(bytes(error_body)) if error_body else None
            cause = cause if cause is None or len(cause) <= 400 else cause[:400] + "..."
            self._line(scope, status[0], usage, time.monotonic() - began, cause)

    def _line(self, scope: Any, status: int, usage: dict[str, int], seconds: float, cause: str | None = None) -> None:
        client = scope.get("client")
        address = f"{client[0]}:{client[1]}" if client else "-"
        path = scope.get("root_path", "") + scope["path"]
        model = scope.get(MODEL_KEY)
        fields: dict[str, Any] = {"event": "request", "method": scope["method"], "path": path, "status": status,
                                  "model": model, **usage, "seconds": round(seconds, 3), "client": address}
        text = (f'{address} "{scope["method"]} {path}" {status} {seconds:.3f}s'
                + (f" model={model}" if model else "")
                + (" prompt={prompt_tokens} completion={completion_tokens} cached={cached_tokens}".format(**usage)
                   if any(usage.values()) else "")
                + (f": {cause}" if cause else ""))
        if cause:
            fields["error"] = cause
        if self.log_prompts:
            body = scope.get(BODY_KEY)
            shown = {k: body[k] for k in _PROMPT_FIELDS if k in body} if isinstance(body, dict) else None
            if shown:
                fields["prompt"] = shown
                text += " prompt_text=" + json.dumps(shown, ensure_ascii=False)
        self.log.info(text, **fields)
