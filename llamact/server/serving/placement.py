"""Where a request runs on its model's runner: with which LoRA scales, in which slot.

    options = placement(backend, state.loras, scales, id_slot)   # on the worker, before its stream is made
    stream = backend.create(request, params=params, **options)   # or backend.generate(ids, params, **options)

The engine (one slot) runs one request at a time: the request's scales are applied to it now, in
turn with the requests (``serving.lora.ensure_scales``), and any ``id_slot`` names its one slot.
The scheduler's slots take both per request (``BatchScheduler.create(loras=, slot=)``): a request
decodes with its own adapters -- a step decodes only the slots whose adapters agree, as llama-server
batches them -- and waits for the slot it asked for, as llama-server defers it. Before issue 46 the
scales were applied to the shared context when the slots were idle and the request joined later:
another request's change could land in between, and 3 answers of 12 were the other scale's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...engine.batched import BatchScheduler
from ..wire.request import slot_of
from .lora import ensure_scales

__all__ = ["placement"]


def placement(backend: Any, loras: Sequence[Sequence[Any]], scales: Sequence[float], id_slot: int = -1
              ) -> dict[str, Any]:
    """The keywords for ``backend``'s ``create`` / ``generate`` (see the module docstring)."""
    if not isinstance(backend, BatchScheduler):
        ensure_scales(backend, loras, scales)
        return {}
    options: dict[str, Any] = {"slot": -1 if id_slot == -1 else slot_of(id_slot, backend.n_slots)}
    if loras:
        options["loras"] = {str(path): scale for (path, _default), scale in zip(loras, scales, strict=True)}
    return options
