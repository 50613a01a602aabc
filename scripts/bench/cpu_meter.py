"""How much of the machine other processes used during a window (Linux ``/proc/stat``): shared by
the benchmarks that leave out repetitions measured while neighbours were busy.

Busy CPU time of the whole machine minus the benchmark's own (this process and its waited-for
children, plus whatever ``extra_own`` adds: a peer process it drives), over wall time x cores. With
as many threads as cores, every cycle someone else takes stalls llama.cpp's spin barriers, so such
samples measure the neighbours, not the code under test.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable


class CpuMeter:
    def __init__(self, extra_own: Callable[[], float] | None = None) -> None:
        self.available = os.path.exists("/proc/stat")
        self.tick = os.sysconf("SC_CLK_TCK") if self.available else 100
        self.cores = os.cpu_count() or 1
        self._extra_own = extra_own

    def _busy(self) -> float:
        with open("/proc/stat") as fh:
            vals = [int(v) for v in fh.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
        return (sum(vals) - vals[3] - vals[4]) / self.tick

    def _own(self) -> float:
        import resource  # Unix only, like /proc/stat

        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        extra = self._extra_own() if self._extra_own is not None else 0.0
        return time.process_time() + children.ru_utime + children.ru_stime + extra

    def start(self) -> tuple[float, float, float]:
        if not self.available:
            return time.perf_counter(), 0.0, 0.0
        return time.perf_counter(), self._busy(), self._own()

    def others(self, mark: tuple[float, float, float]) -> float:
        """Fraction of the machine used by other processes since ``mark`` (0 where unknown)."""
        if not self.available:
            return 0.0
        wall = time.perf_counter() - mark[0]
        other = (self._busy() - mark[1]) - (self._own() - mark[2])
        return max(0.0, other / (wall * self.cores)) if wall > 0 else 0.0
