"""Blocking generation streams run on worker threads, their items handed to asyncio.

    worker = EngineWorker(backend, max_workers=1, abort=engine.cancel)
    job = worker.submit(lambda backend: backend.create(...), finish=lambda stream: ...)
    async for item in job: ...            # each item the stream yields, then finish(stream)'s value
    job.cancel()                          # from the event loop: the generation stops at its next token

(``Job``: ``runners.job``.)
``backend`` is a ``LlamaEngine`` (one generation at a time: ``max_workers=1``, requests are served in
arrival order and the others wait in the executor's queue) or a ``BatchScheduler`` (several threads,
each blocked on its request's stream while the scheduler batches them). The stream is made on the
worker thread (rendering the template and tokenizing are not free), so a request's errors arrive
through the job like its items. A job cancelled while it waits never starts; one cancelled while it
runs is closed at its next item: ``abort()`` (the engine's ``cancel``: its decode in progress
returns) is called when this job is the only one running, and a scheduler's stream is interrupted
(queued or on a slot, its thread stops waiting for the next item).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .job import END, ERROR, ITEM, Job, JobEvent

__all__ = ["EngineWorker"]


class EngineWorker:
    """The engine's single slot (see the module docstring)."""

    def __init__(self, backend: Any, *, max_workers: int = 1, abort: Callable[[], None] | None = None) -> None:
        self.backend = backend
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="llamact-request")
        self._abort_hook = abort if max_workers == 1 else None   # aborts every generation: only with one
        self._lock = threading.Lock()
        self._running: set[Job] = set()
        self.n_waiting = 0          # jobs submitted and not started (the /metrics deferred count)
        self.n_cancelled = 0        # jobs that ended because they were cancelled (a client went away)
        self.open_jobs: weakref.WeakSet[Job] = weakref.WeakSet()   # what a shutdown must end

    @property
    def n_running(self) -> int:
        return len(self._running)

    def submit(self, start: Callable[[Any], Any], finish: Callable[[Any], Any] | None = None) -> Job:
        """Run ``start(engine)`` (a stream: an iterator with ``close()``) on the worker; the job yields
        its items, then ends with ``finish(stream)`` as ``job.result``."""
        job = Job(asyncio.get_running_loop(), self._abort)
        self.open_jobs.add(job)
        with self._lock:
            self.n_waiting += 1
        self._executor.submit(self._run, job, start, finish)
        return job

    def _run(self, job: Job, start: Callable[[Any], Any], finish: Callable[[Any], Any] | None) -> None:
        with self._lock:
            self.n_waiting -= 1
            if job.cancelled.is_set():
                self.n_cancelled += 1
                return
            self._running.add(job)
        outcome: tuple[JobEvent, Any] | None = None   # delivered once the job no longer counts as running
        try:
            stream = start(self.backend)
            job.stream = stream
            if job.cancelled.is_set():   # cancelled while the stream was being made
                self._interrupt(stream)
            try:
                for item in stream:
                    if job.cancelled.is_set():
                        break
                    job.post(ITEM, item)
                if job.cancelled.is_set():
                    with self._lock:
                        self.n_cancelled += 1
                else:
                    outcome = (END, finish(stream) if finish is not None else None)
            finally:
                stream.close()
        except BaseException as exc:   # delivered to the request; the worker thread goes on
            outcome = (ERROR, exc)
        finally:
            with self._lock:
                self._running.discard(job)
        if outcome is not None:   # after the discard: a client that has its answer sees the slot free
            job.post(*outcome)

    def _abort(self, job: Job) -> None:
        with self._lock:
            if job not in self._running:
                return
            if self._abort_hook is not None:
                self._abort_hook()
            elif job.stream is not None:
                self._interrupt(job.stream)

    @staticmethod
    def _interrupt(stream: Any) -> None:
        """A batched request stops at once (queued or on a slot), its thread's ``next()`` returns."""
        interrupt = getattr(stream, "interrupt", None)
        if interrupt is not None:
            interrupt()

    def close(self) -> None:
        """Stop taking jobs, cancel those running, wait for the threads."""
        with self._lock:
            for job in self._running:
                job.cancelled.set()
            if self._running and self._abort_hook is not None:
                self._abort_hook()
        self._executor.shutdown(wait=True, cancel_futures=True)
