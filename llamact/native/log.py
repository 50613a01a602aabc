"""Routing llama.cpp / ggml log output into Python's ``logging``.

Native code logs through one callback (``llama_log_set``). Lines go to the ``llamact.native``
logger at the matching level; ``GGML_LOG_LEVEL_CONT`` pieces continue the previous line. The
most recent warning and error lines are also kept, with the thread that logged them, so an
exception raised after a failed native call can quote the reason upstream gave (e.g. why a GGUF
file was rejected) and not a reason another thread's call logged meanwhile.
"""

from __future__ import annotations

import collections
import logging
import threading

from . import llama_h

logger = logging.getLogger("llamact.native")
# Native chatter ("pooling_type is [-1], but [1] was specified", ...) stays out of a terminal whose
# program configured no logging (Python's last-resort handler prints warnings to stderr); a program
# that configures logging (``logging.basicConfig()``, a handler on "llamact") sees every line.
logger.addHandler(logging.NullHandler())

_LEVELS = {
    llama_h.GgmlLogLevel.DEBUG: logging.DEBUG,
    llama_h.GgmlLogLevel.INFO: logging.INFO,
    llama_h.GgmlLogLevel.WARN: logging.WARNING,
    llama_h.GgmlLogLevel.ERROR: logging.ERROR,
}

_recent: collections.deque[tuple[int, int, str]] = collections.deque(maxlen=64)  # (count, thread, line)
_counter = 0
_pending_level = logging.INFO
_pending = ""
_lock = threading.Lock()


def _emit(level: int, line: str) -> None:
    global _counter
    if level >= logging.WARNING:
        _counter += 1
        _recent.append((_counter, threading.get_ident(), line))
    if logger.isEnabledFor(level):
        logger.log(level, "%s", line)


def _on_log(level: int, text: bytes | None, _user: object) -> None:
    global _pending, _pending_level
    if not text:
        return
    piece = text.decode("utf-8", errors="replace")
    with _lock:
        if level != llama_h.GgmlLogLevel.CONT:
            if _pending:
                _emit(_pending_level, _pending)
                _pending = ""
            _pending_level = _LEVELS.get(level, logging.INFO)  # type: ignore[call-overload]
        _pending += piece
        while "\n" in _pending:
            line, _pending = _pending.split("\n", 1)
            if line:
                _emit(_pending_level, line)


#: the router as a native log callback (``_library.native()`` installs it when it loads the library);
#: kept referenced for the life of the process: native code holds the pointer.
LOG_CALLBACK = llama_h.ggml_log_callback(_on_log)


def mark() -> int:
    """A position in the warning/error stream; pass it to :func:`problems_since`."""
    return _counter


def problems_since(position: int) -> list[str]:
    """Warning and error lines native code logged after ``position``: those logged by the calling
    thread (where llama.cpp reports why a call failed), or all of them if it logged none (a
    backend may log from a thread of its own)."""
    me = threading.get_ident()
    with _lock:
        since = [(thread, line) for count, thread, line in _recent if count > position]
        if _pending and _pending_level >= logging.WARNING:
            since.append((me, _pending))
    mine = [line for thread, line in since if thread == me]
    return mine or [line for _, line in since]
