"""The counters ``/metrics`` reports, in Prometheus' text format with llama-server's metric names."""

from __future__ import annotations

import threading

from ...engine.speculative import SpecTotals
from ..http.logs import note_usage
from .gateway_metrics import AdapterUse

__all__ = ["Metrics"]


class Metrics:
    """Totals over the finished requests (llama-server's counters), and the prompt and generation
    throughput since the last scrape (its "buckets", reset by each /metrics read). Updated from the
    event loop, read by /metrics."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.prompt_tokens = 0          # evaluated, not taken from a cache
        self.prompt_tokens_cached = 0
        self.prompt_seconds = 0.0
        self.predicted_tokens = 0
        self.predicted_seconds = 0.0
        self.requests = 0
        self._bucket = [0, 0.0, 0, 0.0]   # prompt tokens, seconds, predicted tokens, seconds since the last read
        self.adapters = AdapterUse()      # the LoRA adapters of the open requests (the gateway's gauges)

    def record(self, n_prompt: int, prompt_ms: float, n_predicted: int, predicted_ms: float, n_cached: int = 0) -> None:
        note_usage(n_prompt, n_predicted, n_cached)   # the request's access line
        with self._lock:
            self.prompt_tokens += n_prompt
            self.prompt_tokens_cached += n_cached
            self.prompt_seconds += prompt_ms / 1e3
            self.predicted_tokens += n_predicted
            self.predicted_seconds += predicted_ms / 1e3
            self.requests += 1
            b = self._bucket
            b[0] += n_prompt
            b[1] += prompt_ms / 1e3
            b[2] += n_predicted
            b[3] += predicted_ms / 1e3

    def prometheus(self, n_processing: int, n_deferred: int, n_cancelled: int = 0, n_decode: int = 0,
                   n_busy_slots: int = 0, n_tokens_max: int = 0, speculative: SpecTotals | None = None) -> str:
        """llama-server's metrics (names, help, types, order), then llamact's own two counters.
        ``speculative``: the engine's speculative decoding totals (None: it does not speculate)."""
        spec = speculative or SpecTotals()
        with self._lock:
            p_tokens, p_seconds, g_tokens, g_seconds = self._bucket
            self._bucket = [0, 0.0, 0, 0.0]
            counters = [
                ("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens",
                 self.prompt_tokens),
                ("prompt_tokens_cached_total", "Number of prompt tokens reused from the cache",
                 self.prompt_tokens_cached),
                ("prompt_seconds_total", "Total time spent processing prompts", self.prompt_seconds),
                ("tokens_predicted_total", "Number of generation tokens processed", self.predicted_tokens),
                ("tokens_predicted_seconds_total", "Total time spent generating tokens", self.predicted_seconds),
                ("n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and "
                                   "multimodal decoding", n_decode),
                ("n_tokens_max", "Largest observed sequence length (prompt + generation)", n_tokens_max),
                ("spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", spec.n_draft),
                ("spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the "
                                                          "target model", spec.n_accepted),
                ("spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps",
                 spec.n_steps),
            ]
            gauges = [
                ("prompt_tokens_seconds", "Average prompt throughput in tokens/s",
                 p_tokens / p_seconds if p_seconds else 0.0),
                ("predicted_tokens_seconds", "Average generation throughput in tokens/s",
                 g_tokens / g_seconds if g_seconds else 0.0),
                ("requests_processing", "Number of requests processing", n_processing),
                ("requests_deferred", "Number of requests deferred", n_deferred),
                ("n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call",
                 n_busy_slots / max(n_decode, 1)),
            ]
            own = [
                ("requests_total", "Number of finished requests (llamact)", self.requests),
                ("requests_cancelled_total", "Requests stopped because their client went away (llamact)",
                 n_cancelled),
            ]
        lines: list[str] = []
        for kind, rows in (("counter", counters), ("gauge", gauges)):
            for name, help_text, value in rows:
                metric = f"llamacpp:{name}"
                lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} {kind}", f"{metric} {value}"]
        if spec.n_steps:   # one series per draft position, once a draft was verified (as llama-server)
            metric = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
            lines += [f"# HELP {metric} Accepted tokens per draft position", f"# TYPE {metric} counter"]
            lines += [f'{metric}{{position="{i}"}} {n}' for i, n in enumerate(spec.accepted_per_pos)]
        for name, help_text, value in own:
            metric = f"llamacpp:{name}"
            lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} counter", f"{metric} {value}"]
        return "\n".join(lines) + "\n"
