"""Client for ``llamact-oracle``, the C++ program that answers with upstream llama.cpp's own code.

The oracle (tests/oracle/oracle.cpp) reads one JSON request per line on stdin and writes one JSON
answer per line on stdout. :class:`OracleClient` starts it once, sends requests, waits for each
answer with a timeout, and restarts the process on the next request if it died. Upstream's
errors come back as :class:`OracleError` values (they are data for parity, not failures of the
oracle); a dead, hung or garbled oracle raises :class:`OracleProcessError` naming the request.

Answers are deterministic (the oracle fixes the clock), so they are cached on disk under
``$LLAMACT_CACHE/oracle-cache`` (default ``~/.cache/llamact/oracle-cache``), keyed by the sha256 of
the pin commit, the content hash of the oracle binary and its libraries, the size and mtime of any
model file
the request names, and the request as compact JSON *in its own key order* (object order is
significant: a template iterating an object sees it).
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import queue
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .binary_identity import upstream_binary_identity

DEFAULT_TIMEOUT_S = 120.0
ORACLE_NAME = "llamact-oracle"


@dataclass(frozen=True)
class OracleError:
    """An error answer: upstream (or the oracle's request checking) refused the request.

    ``kind`` is ``bad_request``, ``unknown_op``, ``json_parse``, ``json_error``,
    ``invalid_argument``, ``runtime_error``, ``exception`` or ``unknown``.
    """

    kind: str
    message: str
    op: str = ""


class OracleProcessError(RuntimeError):
    """The oracle could not answer: not found, died, timed out, or wrote something unreadable."""


class OracleRequestError(RuntimeError):
    """Raised by :meth:`OracleClient.call` when the answer is an :class:`OracleError`."""

    def __init__(self, error: OracleError) -> None:
        super().__init__(f"oracle {error.op or 'request'} failed ({error.kind}): {error.message}")
        self.error = error


def find_oracle(path: str | os.PathLike[str] | None = None) -> Path:
    """The oracle binary: ``path``, else ``$LLAMACT_ORACLE``, else ``llamact/_bin/llamact-oracle``
    (or ``$LLAMACT_BIN_DIR/llamact-oracle``) next to the installed package."""
    candidates: list[Path] = []
    if path is not None:
        candidates.append(Path(path))
    elif os.environ.get("LLAMACT_ORACLE"):
        candidates.append(Path(os.environ["LLAMACT_ORACLE"]))
    else:
        if os.environ.get("LLAMACT_BIN_DIR"):
            candidates.append(Path(os.environ["LLAMACT_BIN_DIR"]) / ORACLE_NAME)
        candidates.append(Path(__file__).resolve().parent.parent / "_bin" / ORACLE_NAME)
    for candidate in candidates:
        candidate = candidate.expanduser()
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate.resolve()
    raise OracleProcessError(
        f"{ORACLE_NAME} not found (looked at {', '.join(str(c) for c in candidates)}): install llamact with "
        "-DLLAMACT_BUILD_ORACLE=ON (the default; scripts/test.sh does), or set LLAMACT_ORACLE to its path"
    )


def default_cache_dir() -> Path:
    base = os.environ.get("LLAMACT_CACHE")
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "llamact"
    return root / "oracle-cache"


def _file_identity(path: Path) -> list[Any]:
    """Name, size and mtime: cheap, for model files named by requests."""
    st = path.stat()
    return [path.name, st.st_size, st.st_mtime_ns]


def _pin_commit() -> str:
    try:
        from .._build import build_info

        return str(build_info()["llama_cpp"]["commit"])
    except Exception:  # not built: the binary identity still keys the cache
        return ""


def _canonical(request: dict[str, Any]) -> str:
    return json.dumps(request, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class OracleClient:
    """One oracle process, used by one thread at a time (calls are serialised by a lock).

    ``cache``: True for the default directory, a path for another, False/None for no cache.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        cache: bool | str | os.PathLike[str] | None = True,
        env: dict[str, str] | None = None,
    ) -> None:
        self.binary = find_oracle(path)
        self.timeout = timeout
        self._env = env
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[bytes | None] | None = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self._next_id = 0
        self.restarts = 0
        if cache is True:
            self.cache_dir: Path | None = default_cache_dir()
        elif cache:
            self.cache_dir = Path(cache)
        else:
            self.cache_dir = None
        self._cache_salt = _canonical({"pin": _pin_commit(), "oracle": upstream_binary_identity(self.binary)})

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> OracleClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the process (it exits on end of input; killed if it does not within 5 s)."""
        with self._lock:
            self._stop()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _start(self) -> None:
        env = dict(os.environ if self._env is None else self._env)
        proc = subprocess.Popen(
            [str(self.binary)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        lines: queue.Queue[bytes | None] = queue.Queue()
        assert proc.stdout is not None and proc.stderr is not None
        threading.Thread(target=self._pump_stdout, args=(proc.stdout, lines), daemon=True).start()
        threading.Thread(target=self._pump_stderr, args=(proc.stderr,), daemon=True).start()
        self._proc, self._lines = proc, lines

    @staticmethod
    def _pump_stdout(stream: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
        for line in iter(stream.readline, b""):
            lines.put(line)
        lines.put(None)  # end of output: the process exited

    def _pump_stderr(self, stream: IO[bytes]) -> None:
        for line in iter(stream.readline, b""):
            self._stderr_tail.append(line.decode("utf-8", "replace").rstrip("\n"))

    def _stop(self) -> None:
        proc, self._proc, self._lines = self._proc, None, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()

    # -- requests ----------------------------------------------------------------------------

    def request(self, op: str, /, **fields: Any) -> Any:
        """Send ``{"op": op, **fields}``; the result, or an :class:`OracleError` for an error answer."""
        req: dict[str, Any] = {"op": op, **fields}
        key = self._cache_key(req)
        if key is not None:
            cached = self._cache_get(key)
            if cached is not None:
                return self._unwrap(op, cached)
        with self._lock:
            answer = self._exchange(_canonical(req), op)
        if key is not None:
            self._cache_put(key, answer)
        return self._unwrap(op, answer)

    def call(self, op: str, /, **fields: Any) -> Any:
        """Like :meth:`request`, but an error answer raises :class:`OracleRequestError`."""
        result = self.request(op, **fields)
        if isinstance(result, OracleError):
            raise OracleRequestError(result)
        return result

    def batch(self, requests: list[dict[str, Any]]) -> list[Any]:
        """Many requests (``{"op": ..., **fields}`` each) in one exchange, answered in order: each a
        result or an :class:`OracleError`, as :meth:`request` gives them. Not cached (for the fuzzer,
        whose inputs do not repeat)."""
        if not requests:
            return []
        with self._lock:
            answer = self._exchange(_canonical({"op": "batch", "requests": requests}), "batch")
        results = self._unwrap("batch", answer)
        if isinstance(results, OracleError):
            raise OracleRequestError(results)
        if not isinstance(results, list) or len(results) != len(requests):
            raise OracleProcessError(f"oracle batch: {len(requests)} requests, answer {str(results)[:200]}")
        return [self._unwrap(str(r.get("op", "")), a) for r, a in zip(requests, results, strict=True)]

    def send_line(self, line: str) -> dict[str, Any]:
        """Send one raw line (no cache, no id check) and return the answer object, for testing
        the protocol itself (e.g. malformed JSON)."""
        if "\n" in line:
            raise ValueError("a request is one line")
        with self._lock:
            return self._exchange(line, "raw line", check_id=False)

    def _exchange(self, line: str, op: str, check_id: bool = True) -> dict[str, Any]:
        if self._proc is None or self._proc.poll() is not None:
            if self._proc is not None:
                self.restarts += 1
            self._stop()
            self._start()
        assert self._proc is not None and self._proc.stdin is not None and self._lines is not None
        req_id = None
        if check_id:
            self._next_id += 1
            req_id = self._next_id
            obj = json.loads(line)
            obj["id"] = req_id
            line = _canonical(obj)
        what = f"oracle request {op!r} (id {req_id})" if check_id else f"oracle {op}"
        try:
            self._proc.stdin.write(line.encode("utf-8") + b"\n")
            self._proc.stdin.flush()
        except OSError as exc:
            self._stop()
            raise OracleProcessError(f"{what}: the oracle is not accepting input ({exc}){self._tail()}") from exc
        try:
            raw = self._lines.get(timeout=self.timeout)
        except queue.Empty:
            self._kill()
            raise OracleProcessError(f"{what}: no answer within {self.timeout:g} s; the oracle was killed") from None
        if raw is None:
            code = self._proc.wait()
            self._proc, self._lines = None, None
            raise OracleProcessError(f"{what}: the oracle exited (status {code}) without answering{self._tail()}")
        try:
            answer = json.loads(raw)
        except ValueError as exc:
            self._kill()
            raise OracleProcessError(f"{what}: unreadable answer {raw[:200]!r}") from exc
        if not isinstance(answer, dict) or (check_id and answer.get("id") != req_id):
            self._kill()
            raise OracleProcessError(f"{what}: answer does not match the request: {raw[:200]!r}")
        return answer

    def _kill(self) -> None:
        proc, self._proc, self._lines = self._proc, None, None
        if proc is not None:
            proc.kill()
            proc.wait()

    def _tail(self) -> str:
        return ("; its stderr ended with:\n" + "\n".join(self._stderr_tail)) if self._stderr_tail else ""

    @staticmethod
    def _unwrap(op: str, answer: dict[str, Any]) -> Any:
        if answer.get("ok"):
            return answer.get("result")
        err = answer.get("error") or {}
        return OracleError(str(err.get("kind", "unknown")), str(err.get("message", "")), op)

    # -- cache -------------------------------------------------------------------------------

    def _cache_key(self, req: dict[str, Any]) -> str | None:
        if self.cache_dir is None:
            return None
        extra: list[Any] = []
        model = req.get("model")
        if isinstance(model, str):
            try:
                extra = _file_identity(Path(model))
            except OSError:
                return None  # a missing model is not worth caching
        text = self._cache_salt + "\n" + _canonical({"model_file": extra}) + "\n" + _canonical(req)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def _cache_path(self, key: str) -> Path:
        assert self.cache_dir is not None
        return self.cache_dir / key[:2] / f"{key}.json"

    def _cache_get(self, key: str) -> dict[str, Any] | None:
        try:
            answer = json.loads(self._cache_path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return answer if isinstance(answer, dict) else None

    def _cache_put(self, key: str, answer: dict[str, Any]) -> None:
        path = self._cache_path(key)
        stored = {k: v for k, v in answer.items() if k != "id"}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(stored, fh, ensure_ascii=False)
            os.replace(tmp, path)
        except OSError:
            pass  # a cache that cannot be written is only slower

    # -- operations --------------------------------------------------------------------------

    def version(self) -> Any:
        return self.request("version")

    def jinja_render(self, template: str, context: dict[str, Any] | None = None, *, now: int | None = None) -> Any:
        return self.request("jinja_render", template=template, context=context or {}, **_now(now))

    def caps(self, template: str) -> Any:
        return self.request("caps", template=template)

    def chat_apply(self, template: str, inputs: dict[str, Any], *, bos_token: str = "", eos_token: str = "",
                   add_bos: bool = False, add_eos: bool = False, now: int | None = None) -> Any:
        return self.request("chat_apply", template=template, bos_token=bos_token, eos_token=eos_token,
                            add_bos=add_bos, add_eos=add_eos, inputs=inputs, **_now(now))

    def chat_parse(self, parser: Any, text: str, *, format: str, generation_prompt: str = "",
                   reasoning_format: str = "none", is_partial: bool = False) -> Any:
        return self.request("chat_parse", parser=parser, format=format, generation_prompt=generation_prompt,
                            reasoning_format=reasoning_format, text=text, is_partial=is_partial)

    def msg_diffs(self, previous: dict[str, Any], new: dict[str, Any]) -> Any:
        return self.request("msg_diffs", previous=previous, new=new)

    def json_schema_to_grammar(self, schema: Any, force_gbnf: bool = False) -> Any:
        return self.request("json_schema_to_grammar", schema=schema, force_gbnf=force_gbnf)

    def peg_grammar(self, parser: Any, lazy: bool = False) -> Any:
        return self.request("peg_grammar", parser=parser, lazy=lazy)

    def tokenize(self, model: str | os.PathLike[str], text: str, add_special: bool = True,
                 parse_special: bool = False) -> Any:
        return self.request("tokenize", model=str(model), text=text, add_special=add_special,
                            parse_special=parse_special)

    def generate_greedy(self, model: str | os.PathLike[str], prompt: str, n_predict: int, **options: Any) -> Any:
        return self.request("generate_greedy", model=str(model), prompt=prompt, n_predict=n_predict, **options)


def _now(now: int | None) -> dict[str, Any]:
    return {} if now is None else {"now": int(now)}
