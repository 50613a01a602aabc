"""fork() after llama.cpp has computed on several CPU threads: the child would wait forever.

    forks.mark(n_threads)              # a computation runs on n threads (OpenMP's thread team starts)
    forks.refuse(n_threads, what)      # before making a context or projector with n threads
    forks.watch(handle, n_threads)     # a handle the child must not use when it computes on threads

ggml's CPU backend runs a graph on several threads through OpenMP. After ``fork()`` (the default
start method of ``multiprocessing`` on Linux, and what a pre-forking server does) the child has only
the forking thread, but libgomp still believes its team exists: the first computation on several
threads waits for threads that are not there, forever. A child of a process that never computed on
several threads (it loaded a model, say, and forked its workers before any generation) is fine, and
so is any computation on one thread.

So this module remembers whether the process has computed on several threads, and in a child forked
after that, every context and projector made before the fork with several threads is closed with
``FORK_ERROR`` in place of "closed" (``NativeHandle.poison``), and a new one with several threads is
refused: a typed error where there was a hang. Nothing is checked per token.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

from ..errors import LlamaStateException

__all__ = ["fork_error", "mark", "refuse", "watch"]

_state = {"team": False, "hazard": False}   # computed on several threads; forked after that
_watched: weakref.WeakSet[Any] = weakref.WeakSet()


def fork_error(what: str = "this model") -> LlamaStateException:
    return LlamaStateException(
        f"{what} cannot compute in this process: it was forked (multiprocessing's 'fork' start method, the "
        "default on Linux) after llama.cpp had computed on several CPU threads, and OpenMP's threads do not "
        "exist in a forked child (a computation would wait for them forever). Start worker processes with "
        "multiprocessing.get_context('spawn') (or 'forkserver') and load the model in each, or fork before "
        "the first generation, or give the child's own contexts one thread (n_threads=1, n_threads_batch=1)",
        {"pid": os.getpid()})


def mark(n_threads: int) -> None:
    """A computation is about to run on ``n_threads`` threads."""
    if n_threads > 1:
        _state["team"] = True


def refuse(n_threads: int, what: str) -> None:
    """Refuse to make ``what`` with ``n_threads`` threads in a child forked after the team started."""
    if _state["hazard"] and n_threads > 1:
        raise fork_error(what)


def watch(handle: Any, n_threads: int) -> None:
    """Poison ``handle`` in a child forked after the team started, if it computes on several threads."""
    if n_threads > 1:
        _watched.add(handle)


def _after_fork_in_child() -> None:
    if not _state["team"]:
        return
    _state["hazard"] = True
    for handle in list(_watched):
        handle.poison(fork_error(f"this {handle._kind}"))


os.register_at_fork(after_in_child=_after_fork_in_child)
