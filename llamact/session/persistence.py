"""A conversation saved to disk with its KV cache: ``ChatSession.save`` / ``ChatSession.load``.

    session.save("chat.session")                       # a directory: session.json + kv.state
    session = ChatSession.load(engine, "chat.session")   # history and KV cache back

The session's plain data (class, system prompt, history, options, generation parameters, template
clock) goes to ``session.json``; the engine's KV cache with the tokens it holds goes to
``kv.state`` (``LlamaEngine.save_state``). Loading restores both, so the next request's prompt --
which starts with what the cache holds, the previous prompt and reply -- evaluates only the new
turn instead of the whole history.

What is refused, with LlamaStateException and nothing half-loaded: a directory that is not a saved
session, a session of another model (its file name and size are recorded), a KV state the context
cannot take (another model, a smaller context, a truncated file: the engine's checks), and, when
saving, options that are not plain JSON data (Python tools, logits processors).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..engine.engine import LlamaEngine
from ..engine.litert_engine import LitertEngine
from ..engine.params import GenerationParams
from ..engine.sampling import check_params
from ..errors import LlamaInferenceException, LlamaRequestException, LlamaStateException

__all__ = ["SavedSession", "load_session", "save_session"]

T = TypeVar("T")

FORMAT = "llamact.session/1"
SESSION_FILE = "session.json"
STATE_FILE = "kv.state"


def _model_identity(engine: LlamaEngine | LitertEngine) -> dict[str, Any]:
    path = engine.model_path
    return {"file": path.name, "size": path.stat().st_size}


def _params_to_json(params: GenerationParams) -> dict[str, Any]:
    if params.logits_processors:
        raise LlamaStateException("a session with logits_processors cannot be saved (they are Python code); "
                                  "pass them again per request instead")
    data = {f.name: getattr(params, f.name) for f in dataclasses.fields(params) if f.name != "logits_processors"}
    data["stop"] = list(params.stop)
    data["logit_bias"] = [[int(k), float(v)] for k, v in dict(params.logit_bias).items()]
    return data


def _params_from_json(data: dict[str, Any]) -> GenerationParams:
    known = {f.name for f in dataclasses.fields(GenerationParams)}
    values = {k: v for k, v in data.items() if k in known}
    values["logit_bias"] = {int(k): float(v) for k, v in values.get("logit_bias", [])}
    return GenerationParams(**values)


@dataclass(frozen=True)
class SavedSession:
    """What a saved session holds besides the KV cache: its kind (the session class's name), system
    prompt, context limit, generation parameters, request options, history and template clock."""

    kind: str
    system_prompt: str | None
    max_context_tokens: int | None
    params: GenerationParams
    request_options: Mapping[str, Any]
    history: list[dict[str, Any]]
    template_now: float | None


def save_session(engine: LlamaEngine | LitertEngine, record: SavedSession, path: str | os.PathLike[str]) -> Path:
    """Write ``record`` and ``engine``'s KV cache into the directory ``path`` (created; an existing
    saved session there is replaced). Returns the directory."""
    data: dict[str, Any] = {
        "format": FORMAT,
        "class": record.kind,
        "model": _model_identity(engine),
        "system_prompt": record.system_prompt,
        "max_context_tokens": record.max_context_tokens,
        "params": _params_to_json(record.params),
        "request_options": dict(record.request_options),
        "history": record.history,
        "template_now": record.template_now,
    }
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise LlamaStateException(f"the session holds data that is not plain JSON and cannot be saved: {exc} "
                                  "(tools given as Python functions are passed per request, not stored)") from exc
    directory = Path(path)
    if directory.exists() and not (directory / SESSION_FILE).is_file() and any(directory.iterdir()):
        raise LlamaStateException(f"{directory} exists and is not a saved session: choose another path",
                                  {"path": str(directory)})
    directory.mkdir(parents=True, exist_ok=True)
    engine.save_state(directory / STATE_FILE)
    tmp = directory / (SESSION_FILE + ".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, directory / SESSION_FILE)
    return directory


def load_session(engine: LlamaEngine | LitertEngine, path: str | os.PathLike[str],
                 build: Callable[[SavedSession], T]) -> T:
    """The session saved in ``path``, on ``engine`` (which must hold the same model): its record
    turned into a session by ``build``, then the KV cache restored. A failure leaves the engine's
    cache empty (the engine's own guarantee); a record ``build`` cannot take is a damaged file."""
    directory = Path(path)
    try:
        data = json.loads((directory / SESSION_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:   # (a file nested 100,000 deep: RecursionError)
        raise LlamaStateException(f"{directory} is not a saved session ({SESSION_FILE}: {exc})",
                                  {"path": str(directory)}) from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise LlamaStateException(f"{directory / SESSION_FILE} is not a {FORMAT} file", {"path": str(directory)})
    if data.get("model") != _model_identity(engine):
        raise LlamaStateException(
            f"the session was saved with model {data.get('model')}, this engine holds {_model_identity(engine)}: "
            "load it on an engine of the same model file", {"path": str(directory)})
    try:
        params = _params_from_json(data["params"])
        # checked now, as the next request would: a bad value must fail the load, not the next send
        check_params(params, engine.n_vocab)
        record = SavedSession(str(data["class"]), data["system_prompt"], data["max_context_tokens"],
                              params, dict(data["request_options"]),
                              [dict(m) for m in data["history"]], data["template_now"])
        session = build(record)
    except (KeyError, TypeError, ValueError, LlamaRequestException, LlamaInferenceException) as exc:
        raise LlamaStateException(f"{directory / SESSION_FILE} is damaged: {exc!r}", {"path": str(directory)}) from exc
    engine.load_state(directory / STATE_FILE)
    return session
