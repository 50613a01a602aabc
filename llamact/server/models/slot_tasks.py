"""What the server remembers of the last request each slot ran, for ``GET /slots`` (``slots.wire``).

    tasks = SlotTasks()
    tasks.begin(stream, params, stream_mode=True, chat=result, ...)   # in a route, once the stream exists
    tasks.last(slot_id) -> TaskRecord | None                         # its task id and its params' JSON

A request's params are written once, when it starts (``wire.task_params``: llama-server's
``task_params::to_json``); the slot it ran in is asked of its stream when ``/slots`` is read (a
batched stream knows once it holds one).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...engine.params import GenerationParams
from ...json_types import Json
from ..wire.task_params import task_params_json

__all__ = ["SlotTasks", "TaskRecord"]


@dataclass
class TaskRecord:
    """One request as ``/slots`` reports it: its task id, its parameters, and the stream that tells
    which slot it ran in (a batched stream knows once it holds one; the engine has one slot, 0)."""

    id_task: int
    params: Json
    stream: Any = field(repr=False)
    n_prompt: int = 0   # its prompt's tokens

    @property
    def _generation(self) -> Any:
        return getattr(self.stream, "generation", self.stream)   # a ChatStream's SequenceStream

    @property
    def slot_id(self) -> int:
        return int(getattr(self._generation, "slot_id", 0))

    def progress(self) -> tuple[int, int, int]:
        """(tokens generated, prompt tokens evaluated, prompt tokens found in the cache) so far."""
        generation = self._generation
        n_cached = int(getattr(generation, "n_cached", 0))
        evaluated = getattr(generation, "n_evaluated", None)
        return (int(getattr(generation, "n_decoded", 0)),
                int(evaluated) if evaluated is not None else max(0, self.n_prompt - n_cached), n_cached)


class SlotTasks:
    """The last request each slot ran (see the module docstring); used from the event loop and the
    workers' threads."""

    def __init__(self, keep: int = 256) -> None:
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._records: list[TaskRecord] = []   # newest last; a slot's is the newest that ran in it
        self._keep = keep
        self.speculative_types = "none"   # the server's speculative decoding (set at load), as a request reports it

    def begin(self, stream: Any, params: GenerationParams, *, stream_mode: bool, reasoning_format: str,
              chat: Any = None, lora: Sequence[tuple[int, float]] = (), n_prompt: int = 0) -> None:
        """Remember a request that starts on ``stream`` (``chat``: its ChatTemplateResult; None for
        a raw completion, llama-server's "Content-only" format; ``n_prompt``: its prompt's tokens)."""
        record = TaskRecord(next(self._ids), task_params_json(
            params, n_predict=params.max_tokens, stream=stream_mode,
            n_probs=params.top_logprobs if params.logprobs else 0, reasoning_format=reasoning_format, lora=lora,
            chat_format=chat.format if chat is not None else "Content-only",
            generation_prompt=chat.generation_prompt if chat is not None else "",
            speculative_types=self.speculative_types), stream, n_prompt)
        with self._lock:
            self._records.append(record)
            del self._records[:-self._keep]

    def last(self, slot_id: int) -> TaskRecord | None:
        with self._lock:
            for record in reversed(self._records):
                if record.slot_id == slot_id:
                    return record
        return None
