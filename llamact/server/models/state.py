"""What the server holds for one model while it is loaded: ``ServerState`` -- the engine, the worker that
runs requests on it, the request defaults, and what ``/props`` and ``/metrics`` report.

    state = ServerState(settings, name); state.load(); ...; state.close()
    state_of(request) -> ServerState          in a route: the model the request was given (``models.dispatch``)

``load()`` runs once per loading (``models.model_router``: at start-up in the background with one model, on
demand in router mode); with ``--parallel N`` > 1 requests run on a ``BatchScheduler``'s N slots
through a ``SlotRunner``, else one at a time on the engine through an ``EngineWorker``. It also asks
the template once whether it can carry tools (``tools_supported``: a request with one tool gets a
tool-call grammar), which the chat route's tool policy reads (``serving/tool_policy.py``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import Request

from ...chat import ChatTemplates, supports_enable_thinking
from ...engine import ChatBackend, LitertEngine, LlamaEngine
from ...engine.batched import BatchScheduler
from ...engine.chat_calls import takes_tools
from ...errors import LlamaException
from ...grammar.limits import set_default_limits
from ..config.settings import ServerSettings
from ..http.errors import RequestError
from ..runners.slot_runner import SlotRunner
from ..runners.worker import EngineWorker
from ..wire.fields import Vocabulary
from ..wire.request import RequestDefaults
from ..wire.task_params import f32
from .metrics import Metrics
from .slot_tasks import SlotTasks

log = logging.getLogger("llamact.server")

__all__ = ["STATE_KEY", "ServerState", "state_of"]

STATE_KEY = "llamact.state"   # the request scope's entry holding its model's ServerState
class ServerState:
    """See the module docstring."""

    def __init__(self, settings: ServerSettings, name: str | None = None) -> None:
        self.settings = settings
        self._engine: LlamaEngine | LitertEngine | None = None
        self.scheduler: BatchScheduler | None = None
        self._worker: EngineWorker | SlotRunner | None = None
        self.load_error: str | None = None
        self.abandoned = False     # close() left a worker running (stuck): the process must not wait for it
        self.on_load_error: Callable[[], None] | None = None   # `llamact serve` stops the server
        self.defaults = RequestDefaults()
        self.metrics = Metrics()
        self.slot_tasks = SlotTasks()   # the last request of each slot, for GET /slots
        # the LoRA adapters (--lora, --lora-scaled) as [path, scale], by id: /lora-adapters
        self.loras: list[list[Any]] = [[str(path), f32(scale)] for path, scale in settings.loras()]
        # the name answers carry: the router's entry, else the first --alias, else the model as given
        self.model_name = name or settings.model_name()
        # the name the log and error messages say: the router's entry, else settings.model_label()
        self.label = settings.model_label() if self.model_name == settings.model_name() else self.model_name
        self.model_file: Path | None = None   # the file loaded (an hf:// address resolved)
        self.tools_supported = True           # the template gives tools a call format (load() asks)
        self.template_family: str | None = None   # the template's family for /props (load() asks; None: it fails)
        self.warned_tools = False             # the log has said that it does not
        self.log: Any = None                  # the server's log (http.logs), for warnings about requests

    @property
    def loaded(self) -> bool:
        return self._engine is not None

    @property
    def engine(self) -> LlamaEngine | LitertEngine:
        """The engine (the guard answers 503 until it is loaded, so routes always find it)."""
        assert self._engine is not None
        return self._engine

    @property
    def worker(self) -> EngineWorker | SlotRunner:
        assert self._worker is not None
        return self._worker

    def load(self) -> None:
        try:
            self.model_file = self.settings.model_path()
            engine = LlamaEngine.load(self.model_file, self.settings.model_params())
            templates = engine.templates()
            caps = templates.default.caps
            reasoning = self.settings.reasoning
            self.defaults = RequestDefaults(
                model_name=self.model_name, n_predict=self.settings.n_predict,
                reasoning_format=self.settings.reasoning_format,
                enable_thinking=reasoning == "on" or (reasoning == "auto" and _template_thinks(templates)),
                parallel_tool_calls=caps.supports_parallel_tool_calls, lenient_schemas=self.settings.lenient_schemas,
                upstream_compat=self.settings.upstream_compat,
                vocabulary=Vocabulary(engine.n_vocab, lambda: engine.eog_tokens,
                                      lambda text: engine.tokenize(text, add_special=False, parse_special=False)),
                n_parallel=self.settings.parallel, sampling=self.settings.sampling_defaults(),
                template_kwargs=dict(self.settings.chat_template_kwargs),
                allow_image=engine.supports_vision, allow_audio=engine.supports_audio,
                speculative_types=(engine.speculator.params.types_name() if engine.speculator else "none"),
                max_dry_breakers=self.settings.max_dry_breakers,
            )
            self.slot_tasks.speculative_types = self.defaults.speculative_types
            self.tools_supported = takes_tools(engine)
            self.template_family = _template_family(engine)
            set_default_limits(self.settings.grammar_limits())   # every grammar of this process
            if self.settings.parallel > 1:
                assert isinstance(engine, LlamaEngine)   # (a LiteRT-LM model refuses n_seq_max > 1 at load)
                # the scheduler's thread makes the chunks of every slot and hands them to the event loop
                self.scheduler = BatchScheduler(engine, cache_ram_mib=self.settings.cache_ram)
                self._worker = SlotRunner(self.scheduler)
            else:
                self._worker = EngineWorker(engine, abort=engine.cancel)
            self._engine = engine
        except Exception as exc:   # reported by /health; `llamact serve` then stops (exit_on_load_error)
            log.debug("loading the model failed: %s", exc, exc_info=True)   # the server log says it once
            self.load_error = str(exc)
            if self.on_load_error is not None:
                self.on_load_error()

    def end_requests(self) -> None:
        """End every request still open (the shutdown's drain is over): a stream with an error event,
        a reply not streamed with a 503."""
        if self._worker is None:
            return
        error = RequestError("the server is shutting down; the request was stopped", status=503)
        for job in list(self._worker.open_jobs):
            job.end(error)

    def close(self, timeout: float | None = None) -> bool:
        """Stop the workers, then free the engine; False when that took longer than ``timeout``. The
        work runs on a thread of its own, in order, so that a worker stuck in a native call leaves the
        engine unfreed (never freed under it) and the caller can still leave."""
        closer = threading.Thread(target=self._close, name="llamact-close", daemon=True)
        closer.start()
        closer.join(timeout)
        self.abandoned = closer.is_alive()
        return not self.abandoned

    def _close(self) -> None:
        if self._worker is not None:
            self._worker.close()
        if self.scheduler is not None:
            self.scheduler.close()
        if self._engine is not None:
            self._engine.close()


def _template_thinks(templates: ChatTemplates) -> bool:
    """llama-server's default ``enable_thinking``: on only where the template thinks and the switch
    works (``common_chat_templates_support_enable_thinking``, asked once at load). Elsewhere a
    template reading the variable itself (Apertus' "Deliberation: enabled") would think unasked."""
    try:
        return supports_enable_thinking(templates)
    except LlamaException as exc:   # upstream refuses to start; here the requests report the template
        log.warning("the chat template fails on a one-message conversation (%s); thinking is off by default", exc)
        return False


def _template_family(engine: ChatBackend) -> str | None:
    """The template's family as ``/props`` reports it, asked once at load (rendering on the event
    loop, as /props did, froze every route for as long as a slow template took); None when the
    template fails on a one-message conversation."""
    try:
        return engine.chat_template([{"role": "user", "content": "Hello"}]).family
    except LlamaException:
        return None


def state_of(request: Request) -> ServerState:
    """The model a request was given (``models.dispatch`` puts it in the request's scope)."""
    state: ServerState = request.scope[STATE_KEY]
    return state
