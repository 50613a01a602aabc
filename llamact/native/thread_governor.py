"""How many threads a one-token decode uses, chosen from how long the decodes take.

ggml's CPU workers meet at a spinning barrier after every operation, hundreds of times per token.
When other work holds a core, each barrier waits for a descheduled worker's next time slice and
decoding falls off a cliff (issue 30, measured on 2 cores with a busy loop on each: 0.69 tok/s with
2 threads, 57 with 1, 86 with 2 on a quiet machine). The decoded values do not depend on the thread
count (each output row is one worker's), so the count may change between any two decodes.

The governor sees each one-token decode's wall time and keeps, per thread count, the best time
seen (relaxing by ``RELAX`` per decode, so that the slow growth of a decode with the context's
length is not taken for a cliff). A count's expected time is the best of any count, scaled as if
threads sped decoding up linearly (the most they can). While ``WINDOW`` decodes in a row run
``CLIFF`` times slower than expected, it halves the count. Once, at the second decode, it tries half
the count for one decode, so that an engine started on a busy machine also has a reference. Below
the configured count it tries that count again when the machine looks free: on Linux,
``/proc/stat`` showing idle cores for the threads it would add; elsewhere, after ``PROBE_EVERY``
decodes, doubling the wait after each probe that failed. A probe is one decode, kept when it ran as
expected. On a quiet machine it costs two clock reads per token and, once, one decode at half the
threads.
"""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["ThreadGovernor"]

CLIFF = 4.0          # "fallen off": this many times slower than expected
WINDOW = 3           # decodes in a row that must all be that slow (one slow decode is noise)
RELAX = 1.002        # a best time forgets itself by this factor per decode at its count
PROBE_EVERY = 64     # decodes between looks at whether more threads would run again
MAX_BACKOFF = 4096   # the longest wait between probes where the machine cannot be read


class _CpuIdle:
    """Idle cores since the last look, from /proc/stat (None where it cannot be read)."""

    def __init__(self) -> None:
        self._last = self._read()

    @staticmethod
    def _read() -> tuple[int, int] | None:
        try:
            with open("/proc/stat", "rb") as fh:
                fields = fh.readline().split()[1:]
        except OSError:
            return None
        values = [int(v) for v in fields]
        idle = values[3] + (values[4] if len(values) > 4 else 0)   # idle + iowait
        return idle, sum(values[:8])

    def cores(self) -> float | None:
        now, last = self._read(), self._last
        self._last = now
        if now is None or last is None or now[1] <= last[1]:
            return None
        return (now[0] - last[0]) / (now[1] - last[1]) * (os.cpu_count() or 1)


class ThreadGovernor:
    """``observe(seconds)`` after each one-token decode; ``apply(n)`` sets the decode thread count."""

    def __init__(self, n_threads: int, apply: Callable[[int], None],
                 idle_cores: Callable[[], float | None] | None = None) -> None:
        self.n_max = n_threads
        self.current = n_threads
        self._apply = apply
        self._best: dict[int, float] = {}
        self._seen = 0
        self._slow = 0               # decodes in a row past the cliff at the current count
        self._probe_in = PROBE_EVERY
        self._backoff = PROBE_EVERY
        self._trial_from = 0         # the count a one-decode trial came from (0: no trial)
        self._idle_cores = idle_cores or _CpuIdle().cores   # idle cores since the last call
        self.changes = 0             # how many times the count moved (tests, metrics)
        self._last_eval = (-1, 0.0)

    def after_decode(self, n_eval: int, t_eval_ms: float) -> None:
        """llama.cpp's own counters after a decode (``llama_perf_context``: one-token decodes and
        their time, sampling excluded): a decode of one token since the last call is observed."""
        last_n, last_t = self._last_eval
        self._last_eval = (n_eval, t_eval_ms)
        if n_eval == last_n + 1 and t_eval_ms >= last_t:
            self.observe((t_eval_ms - last_t) / 1000.0)

    def expected(self, count: int) -> float:
        """The fastest a decode at ``count`` threads should run, from what was seen."""
        return min((best * max(1.0, k / count) for k, best in self._best.items()), default=float("inf"))

    def observe(self, seconds: float) -> None:
        count = self.current
        best = self._best.get(count)
        self._best[count] = seconds if best is None else min(seconds, best * RELAX)
        self._seen += 1
        slow = seconds > CLIFF * self.expected(count)
        if self._trial_from:   # the decode just seen was a trial at another count
            back, self._trial_from = self._trial_from, 0
            if back < count:   # a probe of more threads: kept unless it was slow
                if slow:
                    self._backoff = min(self._backoff * 2, MAX_BACKOFF)
                    self._set(back)
                else:
                    self._backoff = PROBE_EVERY
            else:              # the first decodes' look at half the threads: back to where it was
                self._set(back)
            return
        if slow and count > 1:
            self._slow += 1
            if self._slow >= WINDOW:
                self._set(max(1, count // 2))
            return
        self._slow = 0
        if self._seen == 2 and count > 1 and count // 2 not in self._best:
            self._trial(count // 2)
        elif count < self.n_max:
            self._probe_in -= 1
            if self._probe_in <= 0:
                self._probe_in = self._backoff
                idle = self._idle_cores()
                if idle is None or idle >= self.n_max - count - 0.5:
                    self._trial(self.n_max)

    def _trial(self, count: int) -> None:
        from_count = self.current
        self._set(count)
        self._trial_from = from_count

    def _set(self, count: int) -> None:
        if count != self.current:
            self._apply(count)
            self.current = count
            self.changes += 1
        self._slow = 0
        self._probe_in = self._backoff
        self._idle_cores()   # the next look at the machine measures from now
