"""The counters ``/metrics`` reports, in Prometheus' text format with llama-server's metric names."""

from __future__ import annotations

import threading

__all__ = ["Metrics"]


class Metrics:
    """Totals over the finished requests; updated from the event loop and read by /metrics."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.prompt_tokens = 0
        self.prompt_seconds = 0.0
        self.predicted_tokens = 0
        self.predicted_seconds = 0.0
        self.requests = 0

    def record(self, n_prompt: int, prompt_ms: float, n_predicted: int, predicted_ms: float) -> None:
        with self._lock:
            self.prompt_tokens += n_prompt
            self.prompt_seconds += prompt_ms / 1e3
            self.predicted_tokens += n_predicted
            self.predicted_seconds += predicted_ms / 1e3
            self.requests += 1

    def prometheus(self, n_processing: int, n_deferred: int, n_cancelled: int = 0, n_decode: int = 0,
                   n_decoded_sequences: int = 0) -> str:
        with self._lock:
            rows = [
                ("counter", "prompt_tokens_total", "Number of prompt tokens processed.", self.prompt_tokens),
                ("counter", "prompt_seconds_total", "Prompt process time", self.prompt_seconds),
                ("counter", "tokens_predicted_total", "Number of generation tokens processed.",
                 self.predicted_tokens),
                ("counter", "tokens_predicted_seconds_total", "Predict process time", self.predicted_seconds),
                ("counter", "requests_total", "Number of finished requests.", self.requests),
                ("gauge", "prompt_tokens_seconds", "Average prompt throughput in tokens/s.",
                 self.prompt_tokens / self.prompt_seconds if self.prompt_seconds else 0.0),
                ("gauge", "predicted_tokens_seconds", "Average generation throughput in tokens/s.",
                 self.predicted_tokens / self.predicted_seconds if self.predicted_seconds else 0.0),
                ("counter", "requests_cancelled_total", "Requests stopped because their client went away.",
                 n_cancelled),
                ("counter", "n_decode_total", "Total number of llama_decode() calls of the slots' steps.", n_decode),
                ("gauge", "n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call",
                 n_decoded_sequences / n_decode if n_decode else 0.0),
                ("gauge", "requests_processing", "Number of requests processing.", n_processing),
                ("gauge", "requests_deferred", "Number of requests deferred.", n_deferred),
            ]
        lines: list[str] = []
        for kind, name, help_text, value in rows:
            metric = f"llamacpp:{name}"
            lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} {kind}", f"{metric} {value}"]
        return "\n".join(lines) + "\n"
