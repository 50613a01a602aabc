"""A request on a runner, as the event loop sees it: an async iterator of what its stream yields,
fed across threads through a queue of typed events.

    job = runner.submit(start, finish)     # EngineWorker or SlotRunner: a Job
    async for item in job: ...             # each JobEvent.ITEM's value; JobEvent.END ends it (job.result),
                                           # JobEvent.ERROR raises its exception here
    job.cancel()                           # the runner stops it (abort(job))
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from enum import Enum
from typing import Any

__all__ = ["END", "ERROR", "ITEM", "Delivery", "Job", "JobEvent"]


class JobEvent(Enum):
    """What a job's queue delivers: an item of its stream, its end (with ``finish(stream)``'s value),
    or its error (the exception, raised to the reader)."""

    ITEM = "item"
    END = "end"
    ERROR = "error"


Delivery = tuple[JobEvent, Any]   # an event and its value, as the queue holds them
# the members under plain names, for the per-token path: Python 3.11 reads an Enum member through its
# class at about fifteen times a global's cost (measured here: 0.76 us against 0.05 us)
ITEM, END, ERROR = JobEvent.ITEM, JobEvent.END, JobEvent.ERROR


class Job:
    """One request on a worker: an async iterator of what its stream yields, then its final value.
    The worker delivers with ``post`` (any thread) or ``push`` (the event loop's thread); ``cancel()``
    (the event loop) asks the worker to stop it through ``abort(job)``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, abort: Callable[[Job], None]) -> None:
        self._loop = loop
        self._abort = abort
        self._queue: asyncio.Queue[Delivery] = asyncio.Queue()
        self.cancelled = threading.Event()
        self.result: Any = None     # finish(stream)'s value, once the stream ended
        self.stream: Any = None     # the running stream, once started
        self.finished = False       # its end or error has been read
        # False: nobody reads the items (a reply not streamed), so a worker that hands items over
        # per decode step (SlotRunner) keeps them, and each token costs the event loop nothing
        self.wants_items = True

    def push(self, event: JobEvent, value: Any) -> None:
        """Deliver ``value`` as ``event``, on the event loop's thread."""
        self._queue.put_nowait((event, value))

    def post(self, event: JobEvent, value: Any) -> None:
        """Deliver ``value`` as ``event`` from any thread."""
        try:
            self._loop.call_soon_threadsafe(self.push, event, value)
        except RuntimeError:   # the event loop is closed: the server is shutting down
            self.cancelled.set()

    def cancel(self) -> None:
        self.cancelled.set()
        self._abort(self)

    def end(self, error: BaseException) -> None:
        """Stop the job and end its reader with ``error`` (the server is shutting down)."""
        if not self.finished:
            self.cancel()
            self.push(ERROR, error)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._items()

    async def _items(self) -> AsyncIterator[Any]:
        while True:
            event, value = await self._queue.get()
            if event is ITEM:
                yield value
                continue
            self.finished = True
            if event is END:
                self.result = value
                return
            raise value
