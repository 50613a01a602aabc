"""Several models behind one server, loaded on demand: which are loaded, which requests hold them, and
which one gives way when ``--models-max`` are loaded.

    router = ModelRouter(catalogue, log)
    state = await router.lease(entry)       # waits for the model (loading it, maybe unloading another)
    ...; router.release(entry)              # the request ended (its stream too)
    await router.load(entry); await router.unload(entry); router.listing()

Each ``ModelEntry`` keeps its own ``ServerState`` (engine, slots, template, metrics) while loaded. The
rules, all on the event loop's thread under one ``asyncio.Condition``:

* a request leases a loaded model at once; one for a model not loaded loads it when there is room
  (fewer than ``--models-max`` loaded, loading or unloading; 0: no limit), and waits otherwise;
* room is made by unloading the least recently used idle model; a model with a request in flight is
  never unloaded: when every loaded model is busy, the least recently used one is marked *draining*
  -- its running requests finish, new ones for it wait (and load it again later) -- so a model in
  steady use cannot keep the others out for ever;
* a model that just loaded for waiting requests is not unloaded before they lease it;
* loading and unloading run on threads (``ServerState.load`` / ``close``), never on the event loop.

One model (``-m``) is the router's degenerate case: one entry, loaded at start in the background, never
unloaded; until it is loaded its requests are answered 503 (``models.dispatch``) rather than held.
Raised by ``lease``: ``RequestError`` 503 for a model that failed to load, 400 for one not loaded with
``--no-models-autoload``. Status changes are published to ``/models/sse`` listeners (``subscribe``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from ..config.options import MODEL, rows
from ..config.settings import ServerSettings
from ..http.errors import RequestError
from .catalogue import Catalogue, ModelSpec
from .state import ServerState

__all__ = ["ModelEntry", "ModelRouter"]

UNLOADED, LOADING, LOADED, UNLOADING = "unloaded", "loading", "loaded", "unloading"


class ModelEntry:
    """One model of the catalogue and what the router knows of it."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.name = spec.name
        # the log's name for it: router mode's entry name, else the alias or file name (not a path)
        self.label = spec.settings.model_label() if spec.source == "cli" else spec.name
        self.state: ServerState | None = None
        self.status = UNLOADED
        self.in_flight = 0          # requests holding it (streams included)
        self.waiting = 0            # requests waiting for it to load
        self.draining = False       # chosen to give way: no new request until it has unloaded
        self.last_used = 0.0
        self.failures = 0
        self.error: str | None = None   # the last failed load's reason

    @property
    def settings(self) -> ServerSettings:
        return self.spec.settings

    def args(self) -> list[str]:
        """The per-model settings that differ from the defaults, as flags (``/models``' ``status.args``)."""
        out: list[str] = []
        defaults = ServerSettings.model_fields
        for name, row in rows(ServerSettings).items():
            value = getattr(self.settings, name)
            if row.scope != MODEL or value == defaults[name].default or name == "api_key":
                continue
            text = ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
            out += [row.long_flag, text]
        return out


class ModelRouter:
    """See the module docstring."""

    def __init__(self, catalogue: Catalogue, log: Any) -> None:
        self.settings = catalogue.settings
        self.routing = catalogue.router          # True: router mode (requests name their model)
        self.log = log
        self.entries = {spec.name: ModelEntry(spec) for spec in catalogue.models}
        self._names = {name: entry for entry in self.entries.values() for name in (entry.name, *entry.spec.aliases)}
        self._changed = asyncio.Condition()
        self._listeners: set[asyncio.Queue[dict[str, Any] | None]] = set()
        self.started = time.time()
        self.stopping = False
        self.on_load_error: Any = None   # outside router mode, `llamact serve` stops when its model fails
        self.on_ready: Any = None        # ... and says where it listens once its model has loaded

    # -- finding ------------------------------------------------------------------------------------
    def find(self, name: str) -> ModelEntry | None:
        return self._names.get(name)

    @property
    def only(self) -> ModelEntry:
        """The one model outside router mode."""
        return next(iter(self.entries.values()))

    def loaded(self) -> list[ModelEntry]:
        return [e for e in self.entries.values() if e.status == LOADED and e.state is not None]

    # -- leases -------------------------------------------------------------------------------------
    async def lease(self, entry: ModelEntry, autoload: bool = True) -> ServerState:
        """The entry's state, held until ``release(entry)`` (see the module docstring)."""
        async with self._changed:
            failures = entry.failures
            entry.waiting += 1
            try:
                while True:
                    if entry.status == LOADED and not entry.draining and entry.state is not None:
                        entry.in_flight += 1
                        entry.last_used = time.monotonic()
                        return entry.state
                    if entry.failures > failures:
                        raise RequestError(f"model '{entry.label}' failed to load: {entry.error}", status=503)
                    if self.stopping:
                        raise RequestError("the server is shutting down", status=503)
                    if entry.status == UNLOADED and not entry.draining:
                        if not autoload:
                            raise RequestError("model is not loaded")
                        if self._has_room():
                            self._start(entry, LOADING, self._load(entry))
                        else:
                            self._make_room(entry)
                    await self._changed.wait()
            finally:
                entry.waiting -= 1

    def release(self, entry: ModelEntry) -> None:
        entry.in_flight -= 1
        entry.last_used = time.monotonic()
        self._notify()

    def _has_room(self) -> bool:
        limit = self.settings.models_max
        held = sum(1 for e in self.entries.values() if e.status != UNLOADED)
        return limit <= 0 or held < limit

    def _make_room(self, wanted: ModelEntry) -> None:
        """Unload the least recently used idle model, or mark the least recently used busy one draining
        when none is idle (one eviction at a time: none while another model unloads or drains)."""
        drained = [e for e in self.loaded() if e.draining and e.in_flight == 0]
        if drained:   # a draining model whose last request has ended
            self._start(drained[0], UNLOADING, self._unload(drained[0]))
            return
        if any(e.status == UNLOADING or (e.draining and e.status == LOADED) for e in self.entries.values()):
            return
        candidates = [e for e in self.loaded() if e is not wanted and not (e.waiting and not e.draining)]
        if not candidates:
            return
        idle = [e for e in candidates if e.in_flight == 0]
        victim = min(idle or candidates, key=lambda e: e.last_used)
        if idle:
            self.log.info(f"model {victim.label}: unloading (least recently used) to load {wanted.label} "
                          f"(--models-max {self.settings.models_max})", model=victim.name, event="evict")
            self._start(victim, UNLOADING, self._unload(victim))
        else:
            self.log.info(f"model {victim.label}: draining (its {victim.in_flight} requests finish first) to "
                          f"load {wanted.label}", model=victim.name, event="drain")
            victim.draining = True

    # -- loading and unloading ----------------------------------------------------------------------
    def _start(self, entry: ModelEntry, status: str, work: Any) -> None:
        entry.status = status
        self._publish(entry)
        asyncio.ensure_future(work)

    async def _load(self, entry: ModelEntry) -> None:
        state = ServerState(entry.settings, entry.name)
        state.log = self.log
        began = time.monotonic()
        await asyncio.to_thread(state.load)
        async with self._changed:
            if state.loaded:
                entry.state, entry.status, entry.error = state, LOADED, None
                entry.last_used = time.monotonic()
                others = sum(e.state.engine.params.n_threads or 4 for e in self.loaded() if e is not entry
                             and e.state is not None)
                self.log.model_loaded(state, time.monotonic() - began, entry.spec.aliases, others)
                if not self.routing and self.on_ready is not None:
                    self.on_ready()
            else:
                entry.status, entry.error = UNLOADED, state.load_error
                entry.failures += 1
                self.log.error(f"model {entry.label}: loading failed: {state.load_error}", model=entry.name,
                               event="load_failed")
                if not self.routing and self.on_load_error is not None:
                    self.on_load_error()
            self._publish(entry)
            self._changed.notify_all()

    async def _unload(self, entry: ModelEntry) -> None:
        state, entry.state = entry.state, None
        if state is not None:
            await asyncio.to_thread(state.close)
        async with self._changed:
            entry.status, entry.draining = UNLOADED, False
            self.log.info(f"model {entry.label}: unloaded", model=entry.name, event="unloaded")
            self._publish(entry)
            self._changed.notify_all()

    def start_loading(self, entry: ModelEntry) -> None:
        """Begin loading ``entry`` (at start-up); waiters and ``load`` see it finish."""
        if entry.status == UNLOADED:
            self._start(entry, LOADING, self._load(entry))

    async def load(self, entry: ModelEntry) -> None:
        """``POST /models/load``: loaded (making room as a request would) before it answers."""
        if entry.status in (LOADED, LOADING) and not entry.draining:
            raise RequestError("model is already running")
        await self.lease(entry)
        self.release(entry)

    async def unload(self, entry: ModelEntry) -> None:
        """``POST /models/unload``: the model's running requests finish first, new ones wait."""
        async with self._changed:
            if entry.status not in (LOADED, LOADING):
                raise RequestError("model is not running")
            entry.draining = True
            self._changed.notify_all()
            while not (entry.status == LOADED and entry.in_flight == 0) and entry.status != UNLOADED:
                await self._changed.wait()
            if entry.status == LOADED:
                self._start(entry, UNLOADING, self._unload(entry))
            while entry.status != UNLOADED:
                await self._changed.wait()

    def _notify(self) -> None:
        async def wake() -> None:
            async with self._changed:
                self._changed.notify_all()
        asyncio.ensure_future(wake())

    # -- what the routes show -----------------------------------------------------------------------
    def listing(self) -> list[dict[str, Any]]:
        """Router mode's ``/v1/models`` and ``/models`` entries, in llama-server's router shape."""
        out = []
        for entry in self.entries.values():
            args = entry.args()
            pairs = zip(args[::2], args[1::2], strict=True)
            preset = "".join(f"{flag.lstrip('-')} = {value}\n" for flag, value in pairs)
            status: dict[str, Any] = {"value": entry.status, "args": args, "preset": f"[{entry.name}]\n{preset}\n"}
            if entry.error is not None and entry.status == UNLOADED:
                status.update(failed=True, error=entry.error)
            info: dict[str, Any] = {
                "id": entry.name, "aliases": list(entry.spec.aliases), "tags": [], "object": "model",
                "owned_by": "llamacpp", "created": int(self.started), "status": status,
                "architecture": {"input_modalities": ["text"], "output_modalities": ["text"]},
                "source": entry.spec.source, "can_remove": False,
            }
            if entry.state is not None and entry.status == LOADED:
                info["meta"] = model_meta(entry.state)
                info["in_flight"] = entry.in_flight
            out.append(info)
        return out

    def subscribe(self) -> AsyncIterator[dict[str, Any]]:
        """``/models/sse``: each status change from now on, as ``{"model", "event", "data"}``."""
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize=256)
        self._listeners.add(queue)

        async def events() -> AsyncIterator[dict[str, Any]]:
            try:
                while not self.stopping:
                    event = await queue.get()
                    if event is None:   # the server is stopping
                        return
                    yield event
            finally:
                self._listeners.discard(queue)
        return events()

    def _publish(self, entry: ModelEntry) -> None:
        event = {"model": entry.name, "event": "model_status", "data": {"status": entry.status}}
        for queue in list(self._listeners):
            if not queue.full():
                queue.put_nowait(event)

    # -- the end ------------------------------------------------------------------------------------
    def end_requests(self) -> None:
        """Every loaded model's open requests ended (the shutdown's drain is over)."""
        self.stopping = True
        for queue in list(self._listeners):
            if not queue.full():
                queue.put_nowait(None)
        for entry in self.loaded():
            assert entry.state is not None
            entry.state.end_requests()

    def close(self, timeout: float) -> bool:
        """Every model closed, each waiting at most ``timeout`` (False: one is left stuck in native code)."""
        self.stopping = True
        held = [e for e in self.entries.values() if e.state is not None]
        states = [e.state for e in held if e.state is not None]
        results = [True] * len(states)

        def close(i: int, state: ServerState) -> None:
            results[i] = state.close(timeout=timeout)
        threads = [threading.Thread(target=close, args=(i, s), daemon=True) for i, s in enumerate(states)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout + 1.0)
        for entry, ok in zip(held, results, strict=True):
            self.log.info(f"model {entry.label}: closed" if ok else f"model {entry.label}: left unfreed (a request "
                          "is still in native code)", model=entry.name, event="closed")
        return all(results)

    @property
    def abandoned(self) -> bool:
        return any(e.state is not None and e.state.abandoned for e in self.entries.values())


def model_meta(state: ServerState) -> dict[str, Any]:
    engine = state.engine
    return {"n_vocab": engine.n_vocab, "n_ctx": engine.n_ctx}
