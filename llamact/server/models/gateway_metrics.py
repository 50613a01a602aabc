"""The model-server gauges Kubernetes' inference gateway reads from ``/metrics``, under the names its
endpoint picker scrapes by default (vLLM's names).

    gauges = GatewayGauges(waiting, running, kv_used, kv_total, adapters)   # adapters: AdapterUse.snapshot()
    text = gauges.prometheus()          # appended after llama-server's and llamact's own series

The Gateway API Inference Extension's endpoint picker (EPP, behind llm-d and the inference gateway)
balances model servers by scraping their Prometheus text. Its defaults (``pkg/epp/server/options.go``
in kubernetes-sigs/gateway-api-inference-extension: ``--total-queued-requests-metric`` and the
flags beside it) are vLLM's names, so llamact answers under those names and the picker needs no flag:

* ``vllm:num_requests_waiting`` (gauge): requests accepted and not yet on a slot (llama-server's
  ``requests_deferred``, and those being prepared, which ``requests_processing`` counts);
* ``vllm:num_requests_running`` (gauge): requests on a slot, never more than the slots (see
  ``on_slots``);
* ``vllm:kv_cache_usage_perc`` (gauge, 0 to 1): the KV cells that hold a token over all cells of the
  context, every slot together -- a slot's kept prompt cache counts (llama.cpp keeps those cells
  filled until another request needs them); ``vllm:gpu_cache_usage_perc`` carries the same value
  under the name endpoint pickers before v1.0 read;
* ``vllm:lora_requests_info`` (gauge, only with ``--lora`` / ``--lora-scaled``): the scrape's Unix
  time, labelled ``running_lora_adapters`` (the adapters, as given on the command line, that a
  request on a slot runs with: a non-zero scale), ``waiting_lora_adapters`` (likewise for the
  requests waiting) and ``max_lora`` (the adapters loaded: llamact holds all of them at once);
* ``vllm:cache_config_info`` (gauge, 1): ``block_size`` 1 (llama.cpp's cache is per token cell) and
  ``num_gpu_blocks`` (the context's cells).

``AdapterUse`` remembers which adapters each request runs with (the chat and raw paths note each
job as they submit it); a job counts as waiting until its stream holds a slot.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ...errors import LlamaException

__all__ = ["AdapterUse", "GatewayGauges", "adapter_names", "kv_cells", "on_slots"]


def adapter_names(loras: Iterable[Iterable[Any]], scales: Iterable[float]) -> tuple[str, ...]:
    """The adapters a request runs with: those its scales give a non-zero weight (by path as given)."""
    return tuple(str(path) for (path, *_), scale in zip(loras, scales, strict=False) if scale != 0.0)


def kv_cells(engine: Any, scheduler: Any = None) -> tuple[int, int]:
    """(cells holding a token, all cells) of an engine's context: every slot's cached tokens with a
    ``BatchScheduler``, else the engine's one sequence. A runtime without llama.cpp's cache: (0, 0)."""
    try:
        total = int(engine.n_ctx)
        if scheduler is not None:
            return sum(n for _busy, n in scheduler.slot_states()), total
        return len(engine.context_tokens), total
    except LlamaException:   # LiteRT-LM: no cells to count
        return 0, 0


def on_slots(waiting: int, processing: int, on_a_slot: int | None) -> tuple[int, int]:
    """(waiting, running) as a gateway reads them from llama-server's (deferred, processing) and the
    sequences on a slot: processing also counts requests being prepared (their prompt tokenized, a
    grammar built) while every slot may be busy, and a picker that reads running beyond the slots
    misjudges the load, so those count as waiting. ``on_a_slot`` None: one request at a time."""
    if on_a_slot is None:
        return waiting, processing
    running = min(on_a_slot, processing)
    return waiting + processing - running, running


def _holds_slot(job: Any) -> bool:
    """A started job whose stream is on a slot (a batched stream says -1 while it waits in the queue)."""
    stream = job.stream
    if stream is None:
        return False
    generation = getattr(stream, "generation", stream)
    return int(getattr(generation, "slot_id", 0)) >= 0


class AdapterUse:
    """Which LoRA adapters the open requests run with (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: weakref.WeakKeyDictionary[Any, tuple[str, ...]] = weakref.WeakKeyDictionary()

    def note(self, job: Any, adapters: tuple[str, ...]) -> None:
        if adapters:
            with self._lock:
                self._jobs[job] = adapters

    def snapshot(self) -> tuple[list[str], list[str]]:
        """(running, waiting) adapters, each in first-seen order without repeats."""
        running: dict[str, None] = {}
        waiting: dict[str, None] = {}
        with self._lock:
            jobs = list(self._jobs.items())
        for job, adapters in jobs:
            if job.finished or job.cancelled.is_set():
                continue
            target = running if _holds_slot(job) else waiting
            target.update(dict.fromkeys(adapters))
        return list(running), list(waiting)


@dataclass(frozen=True)
class GatewayGauges:
    """One scrape's values (see the module docstring)."""

    waiting: int
    running: int
    kv_used: int
    kv_total: int
    adapters_loaded: int = 0
    adapters_running: tuple[str, ...] = ()
    adapters_waiting: tuple[str, ...] = ()

    @property
    def kv_usage(self) -> float:
        return min(self.kv_used / self.kv_total, 1.0) if self.kv_total > 0 else 0.0

    def prometheus(self) -> str:
        lines: list[str] = []

        def gauge(name: str, help_text: str, value: float, labels: str = "") -> None:
            lines.extend((f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name}{labels} {value}"))

        gauge("vllm:num_requests_waiting", "Requests waiting for a slot (the inference gateway's queue size)",
              self.waiting)
        gauge("vllm:num_requests_running", "Requests on a slot", self.running)
        gauge("vllm:kv_cache_usage_perc", "KV cache usage: cells holding a token over all cells, every slot "
                                          "together (1 means 100 percent)", self.kv_usage)
        gauge("vllm:gpu_cache_usage_perc", "The same value as vllm:kv_cache_usage_perc (the older name)",
              self.kv_usage)
        if self.adapters_loaded:
            labels = (f'{{max_lora="{self.adapters_loaded}",running_lora_adapters="{_label(self.adapters_running)}",'
                      f'waiting_lora_adapters="{_label(self.adapters_waiting)}"}}')
            gauge("vllm:lora_requests_info", "LoRA adapters of the running and waiting requests (the value: the "
                                             "time of this scrape)", round(time.time(), 3), labels)
        gauge("vllm:cache_config_info", "The KV cache's layout: block_size in tokens, num_gpu_blocks in all",
              1, f'{{block_size="1",num_gpu_blocks="{self.kv_total}"}}')
        return "\n".join(lines) + "\n"


def _label(names: Iterable[str]) -> str:
    """A comma-separated list as a label value (Prometheus' escapes for backslash, quote, newline)."""
    text = ",".join(names)
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
