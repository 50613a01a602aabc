"""Hostile templates stop at the configured bounds with JinjaLimitExceeded, before memory runs out
and without holding the thread for long.

Each hostile template renders in a worker process whose address space is capped (RLIMIT_AS) and
whose Python allocations are traced (tracemalloc): a case passes when the render raises
JinjaLimitExceeded and the traced peak stayed far below what the template asked for. Nothing here
measures time. The time bound is shown on templates whose single step (one sort, one filter, one
comparison) is enormous, with a clock that advances one "second" per reading: the budget's own
count of clock readings. The set-up before the step fits in the bound and the step does not, so
the typed error shows the clock is read all through the step, whatever the machine's speed. One
step too large for any machine (10**12 comparisons) shows the same bound on the real clock.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from llamact.jinja import JinjaLimitExceeded, RenderLimits, render
from llamact.jinja import budget as budget_module
from llamact.jinja.caps import template_caps

MEMORY_LIMITS = {"max_seconds": 20.0, "max_output_chars": 1_000_000, "max_allocated": 8_000_000}
PEAK_BOUND = 16 * 1024 * 1024  # twice max_allocated: room for the interpreter's own churn
TIME_LIMITS = {"max_seconds": 0.3}
ADDRESS_SPACE = 1024 * 1024 * 1024  # beyond the worker's own, so an unbounded render fails fast
REPLY_TIMEOUT = 300  # a guard against a hang, not a measurement

_WORKER = textwrap.dedent("""
    import gc, json, resource, sys, tracemalloc
    from llamact.jinja import RenderLimits, render
    from llamact.jinja import budget
    from llamact.errors import LlamaException
    real_clock = budget._clock

    class ReadingClock:  # one second per reading: a budget's deadline is a count of clock readings
        def __init__(self):
            self.readings = 0
        def __call__(self):
            self.readings += 1
            return float(self.readings)
    size = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (size + int(sys.argv[1]), resource.RLIM_INFINITY))
    if sys.argv[2] == "trace":
        tracemalloc.start()
    for line in sys.stdin:
        request = json.loads(line)
        gc.collect()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        clock = ReadingClock() if request.get("clock") == "readings" else real_clock
        budget._clock = clock
        try:
            render(request["template"], request["context"], source_name="hostile",
                   limits=RenderLimits(**request["limits"]))
            outcome, message = "rendered", ""
        except LlamaException as exc:
            outcome, message = type(exc).__name__, str(exc)
        except MemoryError:
            outcome, message = "MemoryError", ""
        finally:
            budget._clock = real_clock
        peak = tracemalloc.get_traced_memory()[1] - base if tracemalloc.is_tracing() else 0
        readings = clock.readings if clock is not real_clock else None
        print(json.dumps({"outcome": outcome, "message": message, "peak": peak, "readings": readings}), flush=True)
""")


class _Worker:
    """One worker process for the module; respawned when a render does not answer."""

    def __init__(self, trace: bool) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.args = [sys.executable, "-c", _WORKER, str(ADDRESS_SPACE), "trace" if trace else "untraced"]

    def _start(self) -> subprocess.Popen[str]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                         env=dict(os.environ))
        return self.proc

    def render(self, template: str, limits: dict[str, Any], context: dict[str, Any] | None = None,
               clock: str = "real") -> dict[str, Any]:
        """``clock`` "readings": the budget's clock advances one second per reading (the reply's
        ``readings`` counts them); "real": time.monotonic."""
        proc = self._start()
        assert proc.stdin is not None and proc.stdout is not None
        request = {"template": template, "context": context or {}, "limits": limits, "clock": clock}
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], REPLY_TIMEOUT)
        line = proc.stdout.readline() if ready else ""
        if not line:
            self.close()
            return {"outcome": "no answer (hung or crashed)", "message": "", "peak": None}
        reply: dict[str, Any] = json.loads(line)
        return reply

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


@pytest.fixture(scope="module")
def traced() -> Iterator[_Worker]:
    """A worker tracing its allocations (peaks are measured)."""
    w = _Worker(trace=True)
    yield w
    w.close()


@pytest.fixture(scope="module")
def untraced() -> Iterator[_Worker]:
    """A worker running at full speed (tracing would slow the set-up before the step under test)."""
    w = _Worker(trace=False)
    yield w
    w.close()


BIG = "{% set big = 'x' * 900000 %}{% set l = [] %}{% for i in range(1000) %}{% set _ = l.append(big) %}{% endfor %}"

# Each grows memory through one path; unbounded, each asks for far more than the worker may map.
GROWTH = {
    "replace": "{{ ('a' * 4000).replace('a', 'a' * 8000)|length }}",
    "replace-empty": "{{ ('a' * 100000).replace('', 'b' * 1000)|length }}",
    "repeat": "{{ ('ab' * 400000) * 100000 }}",
    "concat-tilde": "{% set l = [] %}{% for i in range(100000) %}{% set _ = l.append('x' * 900000 ~ i) %}{% endfor %}",
    "concat-plus": ("{% set l = [] %}{% for i in range(100000) %}{% set _ = l.append(('x' * 900000) + (i|string)) %}"
                    "{% endfor %}"),
    "list-doubling": ("{% set ns = namespace(l=[0]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}"
                      "{{ ns.l|length }}"),
    "append-ranges": "{% set l = [] %}{% for i in range(1000) %}{% set _ = l.append(range(100000)) %}{% endfor %}",
    "append-select": ("{% set r = range(100000) %}{% set l = [] %}{% for i in range(1000) %}"
                      "{% set _ = l.append(r|select('divisibleby', 2)|list) %}{% endfor %}"),
    "append-split": ("{% set s = 'a' * 900000 %}{% set l = [] %}{% for i in range(1000) %}"
                     "{% set _ = l.append(s.split('a')) %}{% endfor %}"),
    "append-items": "{% set l = [] %}{% for i in range(100000) %}{% set _ = l.append(d.items()) %}{% endfor %}",
    "append-keys": "{% set l = [] %}{% for i in range(100000) %}{% set _ = l.append(d|dictsort) %}{% endfor %}",
    "dict-chain": ("{% set ns = namespace(d={}) %}{% for i in range(1000000) %}"
                   "{% set ns.d = {'next': ns.d, 'v': 'x' ~ i} %}{% endfor %}"),
    "indent": "{{ ('x\\n' * 100000)|indent(10000)|length }}",
    "indent-width": "{{ 'x\\ny'|indent(2000000000)|length }}",
    "join": BIG + "{{ l|join|length }}",
    "join-separator": BIG + "{{ range(1000)|join('y' * 900000)|length }}",
    "format": BIG + "{{ ('{}' * 1000).format(*l)|length }}",
    "tojson": BIG + "{{ l|tojson|length }}",
    "tojson-indent": "{{ [[[1]]]|tojson(indent=100000000)|length }}",
    "tojson-separators": "{{ range(1000)|tojson(separators=(('y' * 900000), ':'))|length }}",
    "tojson-ascii": "{{ ('é' * 900000)|tojson(ensure_ascii=true)|length }}",
    "print": BIG + "{{ l }}",
    "string-filter": BIG + "{{ (l|string)|length }}",
    "concat-list": BIG + "{{ ('x' ~ l)|length }}",
    "macro-frames": ("{% macro f(n) %}{% set s = 'x' * 900000 ~ n %}{% if n < 400 %}{{ f(n + 1) }}{% endif %}"
                     "{{ s|length }}{% endmacro %}{{ f(0)|length }}"),
    "macro-output-doubling": ("{% macro f(n) %}{% if n > 0 %}{% set s = f(n - 1) %}{{ s }}{{ s }}{% else %}x"
                              "{% endif %}{% endmacro %}{{ f(40)|length }}"),
    "set-block-doubling": ("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set t %}{{ ns.s }}{{ ns.s }}"
                           "{% endset %}{% set ns.s = t %}{% endfor %}{{ ns.s|length }}"),
    "namespace-kwargs": ("{% set l = [] %}{% for i in range(100000) %}"
                         "{% set _ = l.append(namespace(a=range(100000))) %}{% endfor %}"),
    "for-copies": ("{% macro f(n, r) %}{% for x in r %}{% if n < 300 and loop.first %}{{ f(n + 1, r) }}{% endif %}"
                   "{% endfor %}{% endmacro %}{{ f(0, range(1000000)) }}"),
}


WIDE_DICT = {f"key{i}": i for i in range(1000)}


@pytest.mark.parametrize("template", list(GROWTH.values()), ids=list(GROWTH))
def test_growth_stops_before_memory_runs_out(traced: _Worker, template: str) -> None:
    reply = traced.render(template, MEMORY_LIMITS, {"d": WIDE_DICT})
    assert reply["outcome"] == "JinjaLimitExceeded", reply
    assert "(template hostile" in reply["message"], reply
    assert reply["peak"] < PEAK_BOUND, reply


# (set-up, step): one step each that would run for seconds, built on a set-up that is cheap in
# clock readings. The steps allocate little, so only the time bound can stop them.
STEPS = {
    "sort": ("{% set l = (range(0, 600000, 2)|list) + (range(1, 600000, 2)|list) %}", "{{ l|sort|length }}"),
    "select": ("", "{{ range(1000000)|select('divisibleby', 2)|list|length }}"),
    "reject": ("", "{{ range(1000000)|reject('ne', -1)|list|length }}"),
    "max": ("", "{{ range(1000000)|max }}"),
    "in": ("{% set l = (range(1000000)|list) + (range(1000000)|list) %}", "{{ -1 in l }}"),
    "equal-lists": ("{% set a = range(1000000)|list %}{% set b = range(1000000)|list %}", "{{ a == b }}"),
    "equal-tuple-dag": ("{% set ns = namespace(t=(1, 2)) %}{% for i in range(24) %}{% set ns.t = (ns.t, ns.t) %}"
                        "{% endfor %}", "{{ ns.t == ns.t }}"),
    "print-dag": ("{% set ns = namespace(l=[]) %}{% for i in range(24) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}",
                  "{{ ns.l }}"),
    "tojson-dag": ("{% set ns = namespace(l=[]) %}{% for i in range(20) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}",
                   "{{ ns.l|tojson|length }}"),
    "string-dag": ("{% set ns = namespace(l=[]) %}{% for i in range(20) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}",
                   "{{ ns.l|string|length }}"),
    "join": ("", "{{ range(1000000)|join(',')|length }}"),
    "string": ("", "{{ range(1000000)|string|length }}"),
    "title": ("{% set s = 'ab ' * 5000000 %}", "{{ s|title|length }}"),
    "format": ("{% set f = '{}' * 500000 %}", "{{ f.format(*range(500000))|length }}"),
    "tojson-ascii": ("{% set s = 'é' * 2000000 %}", "{{ s|tojson(ensure_ascii=true)|length }}"),
    "trim-wide-set": ("{% set s = 'é' * 5000000 %}{% set chars = ('ü' * 3000) ~ 'é' %}", "{{ s|trim(chars)|length }}"),
}
# Readings the step must take beyond the set-up's: more than a step reading the clock only as it
# starts and ends could (trim over 5M characters, in 64K chunks, reads it about 76 times).
STEP_READINGS = 8


@pytest.mark.parametrize(("setup", "step"), list(STEPS.values()), ids=list(STEPS))
def test_one_enormous_step_stops_at_the_time_bound(untraced: _Worker, setup: str, step: str) -> None:
    alone = untraced.render(setup, {"max_seconds": 1e12}, clock="readings")
    assert alone["outcome"] == "rendered" and alone["readings"] > 0, alone
    # The first reading (1) sets the deadline at 1 + max_seconds, and the render stops at the first
    # reading past it: the set-up's own readings fit, and the step must take STEP_READINGS more.
    limits = {"max_seconds": float(alone["readings"] + STEP_READINGS)}
    reply = untraced.render(setup + step, limits, clock="readings")
    assert reply["outcome"] == "JinjaLimitExceeded", reply
    assert "longer than" in reply["message"], reply
    assert reply["readings"] == alone["readings"] + STEP_READINGS + 2, reply


# 2**40 leaf comparisons (a DAG of 40 levels, 40 objects): no machine ends it within the bound
ENDLESS_STEP = ("{% set ns = namespace(t=(1, 2)) %}{% for i in range(40) %}{% set ns.t = (ns.t, ns.t) %}"
                "{% endfor %}{{ ns.t == ns.t }}")


def test_a_step_no_machine_finishes_stops_on_the_real_clock(untraced: _Worker) -> None:
    reply = untraced.render(ENDLESS_STEP, TIME_LIMITS)
    assert reply["outcome"] == "JinjaLimitExceeded", reply
    assert "longer than 0.3 s" in reply["message"], reply
    assert reply["readings"] is None   # time.monotonic, not the counting clock


def test_limit_errors_name_the_template_source() -> None:
    with pytest.raises(JinjaLimitExceeded) as info:
        render("{{ 'a' * 100 }}", {}, source_name="model metadata", limits=RenderLimits(max_output_chars=10))
    assert info.value.source_name == "model metadata"
    assert "model metadata" in str(info.value)


class _StepClock:
    """A clock that advances one 'second' each time it is read: budgets count reads, not time."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_caps_probes_share_one_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # one render of this template reads the clock about 400 times; the probes render it 7 times
    monkeypatch.setattr(budget_module, "_clock", _StepClock())
    limits = RenderLimits(max_seconds=2000)
    source = "{% for i in range(400) %}{{ i }}{% endfor %}{{ messages[0].content }}"
    render(source, {"messages": [{"role": "user", "content": "hi"}]}, limits=limits)  # one render fits
    template_caps.cache_clear()
    with pytest.raises(JinjaLimitExceeded) as info:
        template_caps(source, limits=limits)
    assert info.value.source_name == "caps"
    template_caps.cache_clear()
