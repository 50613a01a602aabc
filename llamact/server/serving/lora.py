"""Which LoRA scales a request runs with, and making the context apply them before it starts.

    call, lora = await json_body(request, with_lora(read_chat), defaults)   # the body's "lora" field
    scales = request_scales(state.loras, lora)     # per request, or the server's (POST /lora-adapters)
    options = placement(backend, state.loras, scales, id_slot)   # serving.placement: on the worker

llama-server's rules (``params_from_json_cmpl`` / ``construct_lora_list``): a request's ``lora`` is
an array of ``{"id", "scale"}`` (anything else: 400); adapters it leaves out get scale 0; an empty
or absent list takes the server's current scales. On the engine (one slot) a request whose scales
differ from the applied ones changes them, in turn with requests, and its prompt is evaluated afresh
(the KV cache was computed with other weights, as llama-server clears a slot's cache on a LoRA
change). With ``--parallel N`` each request carries its scales to its slot (``serving.placement``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...engine import LlamaEngine
from ..http.errors import RequestError

__all__ = ["ensure_scales", "parse_lora_field", "parse_lora_request", "request_scales", "with_lora"]

LORA_SHAPE = "Field 'lora': Error: 'lora' must be an array of objects with 'id' and 'scale' fields"


def parse_lora_request(body: Sequence[Any]) -> dict[int, float]:
    """id -> scale, a later entry winning (``parse_lora_request``: json_value's defaults, id -1 and
    scale 0, for a missing or mistyped field)."""
    out: dict[int, float] = {}
    for entry in body:
        entry = entry if isinstance(entry, dict) else {}
        raw_id, raw_scale = entry.get("id", -1), entry.get("scale", 0.0)
        lora_id = raw_id if isinstance(raw_id, int) and not isinstance(raw_id, bool) else -1
        scale = float(raw_scale) if isinstance(raw_scale, (int, float)) and not isinstance(raw_scale, bool) else 0.0
        out[lora_id] = scale
    return out


def parse_lora_field(body: Any) -> dict[int, float]:
    """A body's ``lora`` field (empty: none given)."""
    if not isinstance(body, dict) or "lora" not in body:
        return {}
    if not isinstance(body["lora"], list):
        raise RequestError(LORA_SHAPE)
    return parse_lora_request(body["lora"])


def with_lora(read: Callable[..., Any]) -> Callable[..., tuple[Any, dict[int, float]]]:
    """A body reader that also returns the body's ``lora`` field (empty: none given)."""
    def reader(body: Any, *args: Any) -> tuple[Any, dict[int, float]]:
        call = read(body, *args)
        return call, parse_lora_field(body)
    return reader


def request_scales(loras: Sequence[Sequence[Any]], config: dict[int, float]) -> list[float]:
    """The scale of each adapter for a request with ``config`` (``construct_lora_list``)."""
    if not config:
        return [float(scale) for _path, scale in loras]
    return [config.get(i, 0.0) for i in range(len(loras))]


def ensure_scales(engine: LlamaEngine, loras: Sequence[Sequence[Any]], scales: Sequence[float]) -> None:
    """Make the engine (one request at a time, on its worker thread) apply ``scales``; the
    scheduler's slots take a request's scales with the request instead (``serving.placement``)."""
    if not loras:
        return
    paths = [str(path) for path, _scale in loras]
    applied = engine.loras
    if all(applied.get(Path(p).resolve()) == s for p, s in zip(paths, scales, strict=True)):
        return
    for path, scale in zip(paths, scales, strict=True):
        engine.set_lora(path, scale)
