"""A request on ``BatchScheduler``'s slots: what it asks for (its tokens, sampler, LoRA adapters and
slot), what it holds once it runs, the slot it runs in, and the stream its caller reads.

    request = Request(tokens, sampler, stops, params, adapters=..., want_slot=...)
    stream = SequenceStream(scheduler_cancel, request)   # what create() / generate() return (in a ChatStream)

Two requests may share a decode only when ``lora_key`` is the same (``adapter_key``: the adapters by
path, with their scales); a slot's cache remembers the key it was computed with.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..native.guided import GuidedSampler
from .decode import GenerationChunk, SequenceDecoder
from .logprobs import LogprobReader
from .media import MediaPrompt
from .params import GenerationParams
from .speculative import SequenceSpeculation

__all__ = ["AdapterKey", "AdapterSet", "Request", "Scales", "SequenceStream", "Slot", "adapter_key"]

_END = object()

Scales = Mapping[str | os.PathLike[str], float]   # a request's LoRA scales, by adapter path
AdapterSet = tuple[tuple[Any, float], ...]         # the (LoraAdapter, scale) pairs it decodes with, scale != 0
AdapterKey = tuple[tuple[str, float], ...]         # the same by path: what two requests compare


def adapter_key(adapters: AdapterSet) -> AdapterKey:
    return tuple(sorted((str(adapter.path), scale) for adapter, scale in adapters))


@dataclass(eq=False)
class Request:
    tokens: list[int]
    sampler: GuidedSampler
    stop_strings: tuple[str, ...]
    params: GenerationParams
    out: queue.Queue[Any] = field(default_factory=queue.Queue)
    listener: Callable[[Any], None] | None = None   # receives the items instead of ``out`` (see listen())
    lock: threading.Lock = field(default_factory=threading.Lock)
    cancelled: bool = False
    logprobs: LogprobReader | None = None    # with params.logprobs
    media: MediaPrompt | None = None         # the prompt's images and audio (``tokens`` are its keys)
    adapters: AdapterSet = ()                # the LoRA adapters it decodes with (none: the base model)
    want_slot: int = -1                      # the slot it asked for (llama-server's id_slot), -1: any
    lora_key: AdapterKey = field(init=False)  # ``adapters`` by path: the requests a decode may join
    # set when it holds a slot
    n_past: int = 0          # its tokens in the sequence's KV cache: the prompt so far, then the generated ones
    n_cached: int = 0        # prompt tokens found in the slot's cache (not evaluated)
    seq: int = -1            # its slot's id, once it holds one
    last: int = -1           # the last generated token, decoded by the next step
    decoder: SequenceDecoder | None = None   # its text, stop strings, limits, timings and logprobs
    spec: SequenceSpeculation | None = None  # its drafts, when the engine speculates (speculative/slots.py)

    def __post_init__(self) -> None:
        self.lora_key = adapter_key(self.adapters)

    @property
    def prompting(self) -> bool:
        return self.n_past < len(self.tokens)

    def text_end(self) -> int:
        """Where the prompt's text from ``n_past`` on ends: its next medium, or the prompt's end."""
        return self.media.next_media(self.n_past) if self.media is not None else len(self.tokens)

    def position(self, index: int) -> int:
        """The position of the key at ``index`` (M-RoPE media shift the text after them)."""
        return self.media.position(index) if self.media is not None else index

    def close(self) -> None:
        """Free what the request owns natively: its sampler and its media."""
        self.sampler.close()
        if self.media is not None:
            self.media.close()


@dataclass(eq=False)
class Slot:
    seq: int
    request: Request | None = None
    cache: list[int] = field(default_factory=list)   # the tokens sequence ``seq`` holds in the KV cache
    cache_key: AdapterKey = ()   # the adapters its cache was computed with
    t_used: float = 0.0
    t_stepped: float = 0.0       # its request's last decode: the adapter set waiting longest goes next
    busy: bool = False           # a slot action (a file) is running on it, off the lock: no request joins it





class SequenceStream:
    """One request's ``GenerationChunk`` values as the scheduler produces them (what ``ChatStream`` reads)."""

    END = _END

    def __init__(self, cancel: Callable[[Request], None], request: Request) -> None:
        self._cancel = cancel   # the scheduler's: the request leaves its queue or its slot
        self._request = request
        self._done = False

    @property
    def n_cached(self) -> int:
        """Prompt tokens found in the slot's KV cache (known once the request holds a slot)."""
        return self._request.n_cached

    @property
    def slot_id(self) -> int:
        """The slot the request runs in (-1 until it holds one)."""
        return self._request.seq

    @property
    def n_decoded(self) -> int:
        """Tokens generated so far (a server's ``/slots`` reads it while the request runs)."""
        decoder = self._request.decoder
        return decoder.n_generated if decoder is not None else 0

    @property
    def n_evaluated(self) -> int:
        """Prompt tokens evaluated so far (not found in the slot's cache)."""
        request = self._request
        return max(0, min(request.n_past, len(request.tokens)) - request.n_cached)

    def __iter__(self) -> SequenceStream:
        return self

    def __next__(self) -> GenerationChunk:
        if self._done:
            raise StopIteration
        item = self._request.out.get()
        if item is _END:
            self._done = True
            raise StopIteration
        if isinstance(item, BaseException):
            self._done = True
            raise item
        if item.stop_reason is not None:
            self._done = True
        return item

    def listen(self, listener: Callable[[Any], None]) -> None:
        """Receive the items on the scheduler's thread instead of iterating: ``listener(item)`` with
        each ``GenerationChunk``, an exception (the request failed) or ``SequenceStream.END`` (it was
        cancelled). Items made before the call are passed at once, in order. The listener must be
        quick and must not raise: the scheduler's thread waits for it."""
        request = self._request
        with request.lock:
            while True:
                try:
                    item = request.out.get_nowait()
                except queue.Empty:
                    break
                listener(item)
            request.listener = listener
        self._done = True   # iterating is over: the listener has the items

    def interrupt(self) -> None:
        """Stop the request from any thread (a consumer blocked in ``next()`` sees the stream end)."""
        self._cancel(self._request)

    def close(self) -> None:
        if not self._done:
            self._done = True
            self._cancel(self._request)
