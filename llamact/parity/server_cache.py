"""An on-disk cache of llama-server's answers to server_e2e cases.

The scoreboard's server_e2e row and tests/parity ask llama-server the same 46 cases; each full pass
takes minutes on a small machine. An answer is a function of the request and of what answers it
(greedy, ``cache_prompt: false``, one slot: shown by the determinism test, which never reads this
cache), so it is kept under ``$LLAMACT_CACHE/server-cache`` (default ``~/.cache/llamact``), keyed by
the sha256 of: the llama-server executable and the shared libraries beside it, the model file's
name/size/mtime, the template file's bytes, the server's configuration and the case's requests. Any
rebuild that changes the server, any model or template change, any change to a case asks afresh.

A cached record keeps the clock its template saw (``template_now``), so llamact renders the same
dated prompt whatever day the answer is read.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

from ..json_types import Json
from .binary_identity import upstream_binary_identity
from .chat_answer import ChatAnswer
from .llama_server import ServerConfig
from .server_cases import E2ECase


def default_cache_dir() -> Path:
    base = os.environ.get("LLAMACT_CACHE")
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "llamact"
    return root / "server-cache"


class ServerAnswerCache:
    """Records (``ServerRecord.to_json(with_raw=True)``) by case, for one llama-server build."""

    def __init__(self, executable: Path, directory: Path | None = None) -> None:
        self.directory = directory if directory is not None else default_cache_dir()
        self._salt = upstream_binary_identity(executable)

    def key(self, case: E2ECase, config: ServerConfig) -> str:
        model = config.model.stat()
        parts: Json = {
            "server": self._salt,
            "model": [config.model.name, model.st_size, model.st_mtime_ns],
            "config": {k: str(v) for k, v in asdict(config).items() if k not in ("model", "chat_template_file")},
            "case": asdict(case),
            "requests": [case.request_body(stream=True), case.request_body(stream=False)],
        }
        if config.chat_template_file is not None:
            parts["template"] = hashlib.sha256(config.chat_template_file.read_bytes()).hexdigest()
        text = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> Json | None:
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or "case_id" not in data:
            return None
        if data.get("answer") is not None:
            try:   # a record that no longer loads (the answer's fields changed) is a miss
                ChatAnswer.from_json(data["answer"])
            except (TypeError, ValueError):
                return None
        return data

    def put(self, key: str, record: Json) -> None:
        if record.get("error") is not None:
            return   # errors (a refused request) are cheap to ask again and may be transient
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(record, fh, ensure_ascii=False)
            os.replace(tmp, path)
        except OSError:
            pass   # a cache that cannot be written is only slower
