"""The LiteRT-LM runtime (PyPI ``litert-lm-api``), opened with typed errors.

    rt = load_runtime()                      -> the ``litert_lm`` module, its version checked
    engine = RuntimeEngine.open(path, threads=4, max_num_tokens=2048)
    engine.tokenize(text) / engine.detokenize(ids) / engine.start_token / engine.stop_tokens
    engine.conversation(...) / engine.session(...) / engine.render(template, messages, extra)

``litert-lm-api`` is an optional extra (``pip install llamact[litert]``): importing this module
does not need it, ``load_runtime()`` does. The runtime's own Python wrapper drives its C library
through ctypes; this module is the one place llamact touches it, and it turns the wrapper's
``RuntimeError`` / ``ValueError`` into llamact's exceptions.

Raises ``LlamaUnsupportedException`` when the extra is not installed or its version is not one
llamact was built against (``SUPPORTED``: the content-shape adapter, the conversation options and
the streaming behaviour were measured on 0.18), and ``LlamaModelException`` when the runtime
refuses a bundle.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ...errors import LlamaInferenceException, LlamaModelException, LlamaUnsupportedException

__all__ = ["DISTRIBUTION", "SUPPORTED", "RuntimeEngine", "load_runtime", "quiet_runtime", "runtime_version"]

DISTRIBUTION = "litert-lm-api"
SUPPORTED = ((0, 18), (0, 19))     # [lowest, highest) major.minor this backend was measured on
_INSTALL = "pip install 'llamact[litert]'"
_log_lock = threading.Lock()


def runtime_version() -> str | None:
    """The installed ``litert-lm-api`` version, None when it is not installed."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def _release(version: str) -> tuple[int, int]:
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return (-1, -1)


def load_runtime() -> ModuleType:
    """The ``litert_lm`` module, after checking it is installed in a supported version."""
    version = runtime_version()
    if version is None:
        raise LlamaUnsupportedException(
            f"a .litertlm model needs the LiteRT-LM runtime, which is not installed: {_INSTALL} "
            f"(the {DISTRIBUTION} package, Linux x86_64 / macOS / Windows wheels)", {"runtime": DISTRIBUTION})
    low, high = SUPPORTED
    if not low <= _release(version) < high:
        raise LlamaUnsupportedException(
            f"{DISTRIBUTION} {version} is installed; llamact's LiteRT-LM backend supports "
            f"{low[0]}.{low[1]}.x: {_INSTALL} installs it (pip install '{DISTRIBUTION}>={low[0]}.{low[1]},"
            f"<{high[0]}.{high[1]}')", {"runtime": DISTRIBUTION, "version": version})
    try:
        module = importlib.import_module("litert_lm")
    except (ImportError, OSError) as exc:   # the wheel's shared library failed to load
        raise LlamaUnsupportedException(f"the LiteRT-LM runtime ({DISTRIBUTION} {version}) does not load here: "
                                        f"{exc}", {"runtime": DISTRIBUTION, "version": version}) from exc
    return module


@contextlib.contextmanager
def quiet_runtime(lt: ModuleType) -> Iterator[None]:
    """The runtime's C++ logs go to stderr; while llamact probes a template on purpose (a failing
    render is an answer there), only fatal ones are printed."""
    with _log_lock:
        lt.set_min_log_severity(lt.LogSeverity.FATAL)
        try:
            yield
        finally:
            lt.set_min_log_severity(lt.LogSeverity.ERROR)


def _kernel_cache() -> str:
    folder = Path(os.environ.get("LLAMACT_CACHE") or Path.home() / ".cache" / "llamact") / "litert-xnnpack"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return ":nocache"   # the runtime's word for no cache
    return str(folder)


class RuntimeEngine:
    """One loaded bundle in the runtime (``litert_lm.Engine``) and what llamact asks of it."""

    def __init__(self, lt: ModuleType, engine: Any, path: Path, max_num_tokens: int) -> None:
        self.lt = lt
        self._engine = engine
        self.path = path
        self.max_num_tokens = max_num_tokens
        self.start_token: int | None = engine.bos_token_id
        self.stop_tokens: tuple[tuple[int, ...], ...] = tuple(tuple(s) for s in engine.eos_token_ids)

    @classmethod
    def open(cls, path: Path, *, threads: int | None, max_num_tokens: int) -> RuntimeEngine:
        """Load ``path`` on the CPU. The runtime's compiled-kernel cache goes to llamact's cache folder
        (``LLAMACT_CACHE``/litert-xnnpack), not beside the model file where the runtime would put it."""
        lt = load_runtime()
        lt.set_min_log_severity(lt.LogSeverity.ERROR)
        try:
            engine = lt.Engine(str(path), backend=lt.Backend.CPU(thread_count=threads), max_num_tokens=max_num_tokens,
                               cache_dir=_kernel_cache())
        except (RuntimeError, ValueError) as exc:
            raise LlamaModelException(
                f"the LiteRT-LM runtime could not load {path.name} ({exc}); check that it is a LiteRT-LM bundle for "
                f"this runtime version ({runtime_version()}) and CPU, and that max_num_tokens ({max_num_tokens}) "
                "is one its export allows", {"path": str(path)}) from exc
        return cls(lt, engine, path, max_num_tokens)

    def close(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()

    @property
    def closed(self) -> bool:
        return self._engine is None

    def tokenize(self, text: str) -> list[int]:
        try:
            return list(self._engine.tokenize(text))
        except RuntimeError as exc:
            raise LlamaInferenceException(f"the LiteRT-LM tokenizer failed: {exc}") from exc

    def detokenize(self, tokens: Sequence[int]) -> str:
        if not tokens:
            return ""
        try:
            return str(self._engine.detokenize(list(tokens)))
        except RuntimeError as exc:
            raise LlamaInferenceException(f"the LiteRT-LM tokenizer failed: {exc}") from exc

    def conversation(self, *, template: str | None, messages: Sequence[Mapping[str, Any]] = (),
                     tools: Sequence[Mapping[str, Any]] = (), extra_context: Mapping[str, Any] | None = None,
                     sampler: Mapping[str, Any] | None = None, max_output_tokens: int | None = None,
                     enable_thinking: bool | None = None, thinking_budget: int = -1,
                     constrained: bool = False) -> Any:
        """A ``litert_lm.Conversation`` with this preface (the runtime renders with ``template``;
        None: the bundle's own)."""
        lt = self.lt
        thinking = None
        if enable_thinking is not None:
            thinking = lt.ThinkingConfig(enable_thinking=enable_thinking, thinking_token_budget=thinking_budget)
        try:
            return self._engine.create_conversation(
                messages=[dict(m) for m in messages] or None,
                tools=[_declared_tool(lt, t) for t in tools] or None,
                automatic_tool_calling=False,
                extra_context=dict(extra_context or {}) or None,
                sampler_config=lt.SamplerConfig(**sampler) if sampler is not None else None,
                max_output_tokens=max_output_tokens,
                chat_template=template,
                thinking_config=thinking,
                constrained_decoding_config=lt.ConstrainedDecodingConfig(
                    enable=True, provider=lt.LiteRtLmConstraintProviderType.LL_GUIDANCE) if constrained else None,
            )
        except (RuntimeError, ValueError) as exc:
            raise LlamaInferenceException(f"the LiteRT-LM runtime could not start a conversation: {exc}") from exc

    def session(self, *, sampler: Mapping[str, Any] | None, max_output_tokens: int | None) -> Any:
        """A ``litert_lm.Session`` that takes text as it is (no prompt template): llamact's rendering."""
        lt = self.lt
        try:
            return self._engine.create_session(
                apply_prompt_template=False, max_output_tokens=max_output_tokens,
                sampler_config=lt.SamplerConfig(**sampler) if sampler is not None else None)
        except (RuntimeError, ValueError) as exc:
            raise LlamaInferenceException(f"the LiteRT-LM runtime could not start a session: {exc}") from exc

    def render(self, template: str | None, messages: Sequence[Mapping[str, Any]],
               extra_context: Mapping[str, Any] | None = None, quiet: bool = False,
               tools: Sequence[Mapping[str, Any]] = ()) -> str:
        """What the runtime's own template engine makes of ``messages`` (``render_message_to_string``:
        the preface and the last message, with the generation prompt); "" when its render fails."""
        if not messages:
            return ""
        with quiet_runtime(self.lt) if quiet else contextlib.nullcontext():
            conversation = self.conversation(template=template, messages=messages[:-1], extra_context=extra_context,
                                             tools=tools)
            try:
                return str(conversation.render_message_to_string(dict(messages[-1])))
            finally:
                conversation.close()


@functools.cache
def _declared_tool_class(lt: ModuleType) -> type:
    """A tool the runtime declares to the template but never runs (automatic tool calling is off:
    llamact parses the calls and the caller runs them): ``litert_lm.Tool``, subclassed once the
    runtime is loaded (it may be absent when this module is imported)."""

    class DeclaredTool(lt.Tool):  # type: ignore[name-defined]
        def __init__(self, description: Mapping[str, Any]) -> None:
            self._description = dict(description)

        def get_tool_description(self) -> dict[str, Any]:
            return self._description

        def execute(self, param: Mapping[str, Any]) -> Any:
            raise LlamaInferenceException("llamact runs no tool inside the LiteRT-LM runtime")

    return DeclaredTool


def _declared_tool(lt: ModuleType, description: Mapping[str, Any]) -> Any:
    return _declared_tool_class(lt)(description)
