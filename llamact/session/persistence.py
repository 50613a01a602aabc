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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.engine import LlamaEngine
from ..engine.params import GenerationParams
from ..errors import LlamaStateException

if TYPE_CHECKING:
    from .session import ChatSession

__all__ = ["load_session", "save_session"]

FORMAT = "llamact.session/1"
SESSION_FILE = "session.json"
STATE_FILE = "kv.state"


def _model_identity(engine: LlamaEngine) -> dict[str, Any]:
    path = engine.model.path
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


def save_session(session: ChatSession, path: str | os.PathLike[str]) -> Path:
    """Write ``session`` and the engine's KV cache into the directory ``path`` (created; an existing
    saved session there is replaced). Returns the directory."""
    from .session import TemplateTimeChatSession

    data: dict[str, Any] = {
        "format": FORMAT,
        "class": "TemplateTimeChatSession" if isinstance(session, TemplateTimeChatSession) else "ChatSession",
        "model": _model_identity(session.engine),
        "system_prompt": session.system_prompt,
        "max_context_tokens": session.max_context_tokens,
        "params": _params_to_json(session.params),
        "request_options": session.request_options,
        "history": session.history,
        "template_now": session._clock(),
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
    session.engine.save_state(directory / STATE_FILE)
    tmp = directory / (SESSION_FILE + ".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, directory / SESSION_FILE)
    return directory


def load_session(engine: LlamaEngine, path: str | os.PathLike[str]) -> ChatSession:
    """The session saved in ``path``, on ``engine`` (which must hold the same model), with the KV
    cache restored. A failure leaves the engine's cache empty (the engine's own guarantee)."""
    from .session import ChatSession, TemplateTimeChatSession

    directory = Path(path)
    try:
        data = json.loads((directory / SESSION_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
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
        options = dict(data["request_options"])
        history = [dict(m) for m in data["history"]]
        session: ChatSession
        if data["class"] == "TemplateTimeChatSession":
            session = TemplateTimeChatSession(engine, data["system_prompt"], template_now=data["template_now"],
                                              max_context_tokens=data["max_context_tokens"], params=params,
                                              **options)
        else:
            session = ChatSession(engine, data["system_prompt"], max_context_tokens=data["max_context_tokens"],
                                  params=params, **options)
    except (KeyError, TypeError, ValueError) as exc:
        raise LlamaStateException(f"{directory / SESSION_FILE} is damaged: {exc!r}", {"path": str(directory)}) from exc
    engine.load_state(directory / STATE_FILE)
    session.history = history
    return session
