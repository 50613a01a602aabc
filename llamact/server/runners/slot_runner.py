"""Requests on a ``BatchScheduler``'s slots, handed to asyncio without a thread per request.

    runner = SlotRunner(scheduler)
    job = runner.submit(lambda scheduler: scheduler.create(...), finish=lambda stream: ...)
    async for item in job: ...            # the same ``Job`` (``runners.job``) as ``EngineWorker`` gives

Each request is prepared on a small thread pool (rendering the template and tokenizing are not
free, and must not block the event loop), then listens to its slot: the scheduler's thread turns
each generated piece into chat chunks (``ChatStream.push``: the stream parser and the deltas) right
after its step, as llama-server's main loop does, and the chunks of a whole step reach the event
loop in one call. On a machine whose cores all decode, this is what keeps Python's work out of the
way of the decode: no thread per request waking per token, no work of theirs competing with ggml's
threads in the middle of a decode. ``job.cancel()`` interrupts the request at once, queued or on a
slot.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ...engine.batched import BatchScheduler, SequenceStream
from ...engine.chat_completion import ChatStream
from ...errors import LlamaStateException
from .job import END, ERROR, ITEM, Job, JobEvent

__all__ = ["SlotRunner"]

LOCKSTEP_WAIT_S = 0.05   # the longest a decode waits for the event loop to write the previous step's events


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):   # not Linux
        return os.cpu_count() or 1


class SlotRunner:
    """``EngineWorker``'s interface over a ``BatchScheduler`` (see the module docstring)."""

    def __init__(self, scheduler: BatchScheduler, *, prepare_threads: int = 2) -> None:
        self.backend = scheduler
        self._prepare = ThreadPoolExecutor(max_workers=prepare_threads, thread_name_prefix="llamact-prepare")
        self._lock = threading.Lock()
        self._outbox: list[tuple[Job, JobEvent, Any]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.n_waiting = 0      # submitted, not yet prepared (the scheduler counts its own queue)
        self.n_preparing = 0    # being prepared: the template, the tokens, the sampler (DRY's set-up, ...)
        self.n_cancelled = 0    # jobs that ended because they were cancelled (a client went away)
        self.open_jobs: weakref.WeakSet[Job] = weakref.WeakSet()   # what a shutdown must end
        self._cores = usable_cores()
        scheduler.add_step_listener(self._flush)

    @property
    def n_running(self) -> int:
        """Requests in progress: on a slot, or being prepared for one (what ``/metrics`` shows as
        processing: a request whose set-up takes long is work, not idleness)."""
        return self.backend.n_active + self.n_preparing

    def submit(self, start: Callable[[Any], Any], finish: Callable[[Any], Any] | None = None) -> Job:
        """Run ``start(scheduler)`` (a ``ChatStream`` or ``SequenceStream`` of the scheduler) on the
        preparing pool; the job yields what the stream yields, then ends with ``finish(stream)``."""
        self._loop = asyncio.get_running_loop()
        job = Job(self._loop, self._abort)
        self.open_jobs.add(job)
        with self._lock:
            self.n_waiting += 1
        self._prepare.submit(self._start, job, start, finish)
        return job

    def _start(self, job: Job, start: Callable[[Any], Any], finish: Callable[[Any], Any] | None) -> None:
        with self._lock:
            self.n_waiting -= 1
            if job.cancelled.is_set():
                self.n_cancelled += 1
                return
            self.n_preparing += 1
        try:
            stream = start(self.backend)
        except BaseException as exc:   # delivered to the request
            self._post(job, ERROR, exc)
            self._flush()
            return
        finally:
            with self._lock:
                self.n_preparing -= 1
        chat = stream if isinstance(stream, ChatStream) else None
        generation = chat.generation if chat is not None else stream
        assert isinstance(generation, SequenceStream)   # the scheduler's streams are its slots'

        def listener(item: Any) -> None:   # on the scheduler's thread
            if item is SequenceStream.END:
                with self._lock:
                    self.n_cancelled += 1
                self._post(job, END, None)
                return
            if isinstance(item, BaseException):
                self._post(job, ERROR, item)
                return
            try:
                outs = chat.push(item) if chat is not None else (item,)
                if job.wants_items:   # (a reply not streamed reads only the end)
                    for out in outs:
                        self._post(job, ITEM, out)
                if item.stop_reason is not None:
                    self._post(job, END, finish(stream) if finish is not None else None)
            except BaseException as exc:   # the parser's error ends the request (as iterating would)
                self._post(job, ERROR, exc)
                generation.interrupt()

        job.stream = stream
        generation.listen(listener)
        if job.cancelled.is_set():
            generation.interrupt()
        self._flush()

    def _abort(self, job: Job) -> None:
        stream = job.stream
        if stream is not None:
            stream.interrupt()

    def _post(self, job: Job, event: JobEvent, value: Any) -> None:
        with self._lock:
            self._outbox.append((job, event, value))

    def _flush(self) -> None:
        with self._lock:
            items, self._outbox = self._outbox, []
        if not items or self._loop is None:
            return
        written = threading.Event()
        try:
            self._loop.call_soon_threadsafe(_dispatch, self._loop, items, written)
        except RuntimeError:   # the event loop is closed: the server is shutting down
            return
        if threading.current_thread() is self.backend.thread and self._lockstep():
            # the next decode starts once the event loop has written this step's events (or after
            # LOCKSTEP_WAIT_S): its Python work then runs between decodes, not across one
            written.wait(LOCKSTEP_WAIT_S)

    def _lockstep(self) -> bool:
        """Whether the decode's threads take every core: then the event loop's work would stall
        ggml's barriers mid-decode, and runs between decodes instead. With a core to spare it runs
        beside the next decode, and costs a token nothing."""
        try:
            return self.backend.n_threads >= self._cores
        except LlamaStateException:   # a closed context: its last events, in lockstep
            return True

    def close(self) -> None:
        self._prepare.shutdown(wait=True, cancel_futures=True)


def _dispatch(loop: asyncio.AbstractEventLoop, items: list[tuple[Job, JobEvent, Any]],
              written: threading.Event) -> None:
    for job, event, value in items:
        job.push(event, value)
    # the requests' tasks woken above run before this (FIFO): each writes its events, then waits again
    loop.call_soon(written.set)
