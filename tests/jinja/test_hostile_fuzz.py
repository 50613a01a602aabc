"""Random small templates built from the risky constructs (writes to the caller's data, growth,
shared nesting, recursion) never raise anything but a LlamaException and never change the context."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamact.errors import LlamaException
from llamact.jinja import RenderLimits, render

LIMITS = RenderLimits(max_seconds=5.0, max_output_chars=50_000, max_allocated=2_000_000)

PRELUDE = ("{% set ns = namespace(s='ab', l=['a', 1], t=(1,), d={'k': 'v'}) %}"
           "{% macro rec(n) %}{% if n > 0 %}{{ rec(n - 1) }}{{ rec(n - 1) }}{% else %}{{ ns.s }}{% endif %}"
           "{% endmacro %}")

FRAGMENTS = [
    # writes to the caller's data
    "{% set _ = messages.pop() %}",
    "{% set _ = messages.append(messages[0]) %}",
    "{% set m = messages[0] %}{% set m.content = m.content ~ ns.s %}",
    "{% set _ = tools[0].function.parameters.required.append(ns.s) %}",
    "{% for m in messages %}{% set m.role = ns.s %}{% endfor %}",
    "{% set ns.m = messages %}{% set _ = ns.m.pop(0) %}",
    # growth
    "{% set ns.s = ns.s ~ ns.s %}",
    "{% set ns.s = ns.s + ns.s + ns.s %}",
    "{% set ns.s = ns.s * 3 %}",
    "{% set ns.l = ns.l + ns.l %}",
    "{% set _ = ns.l.append(ns.s) %}",
    "{% set ns.s = ns.s.replace('a', ns.s) %}",
    "{% set ns.s = ns.s.replace('', 'xy') %}",
    "{% set ns.s = ns.l|join(ns.s) %}",
    "{% set ns.s = ns.s|indent(50) %}",
    "{% set ns.s = ('{}' * 3).format(ns.s, ns.l, ns.t) %}",
    "{% set ns.s = ns.l|tojson(indent=4) %}",
    "{% set ns.s = ns.l|string %}",
    "{% set ns.s = ns.s|title ~ ns.s|upper %}",
    "{% set ns.l = ns.s.split('a') %}",
    "{% set ns.l = range(ns.l|length * 100) %}",
    "{% set ns.d = {'k': ns.d, 'v': ns.s} %}",
    "{% set ns.l = ns.d.items()|list + ns.l %}",
    # shared nesting and walks over it
    "{% set ns.t = (ns.t, ns.t) %}",
    "{% set ns.l = [ns.l, ns.l] %}",
    "{{ ns.t == ns.t }}{{ ns.l == ns.l }}",
    "{{ ns.l }}{{ ns.l|tojson }}",
    "{{ ns.s in ns.l }}",
    "{{ ns.l|sort|length }}",
    # output and recursion
    "{{ ns.s }}",
    "{{ rec(ns.l|length) }}",
    "{% set t %}{{ ns.s }}{{ ns.s }}{% endset %}{% set ns.s = t %}",
]


def _context() -> dict[str, Any]:
    return {
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"required": ["a"]}}}],
        "add_generation_prompt": True,
    }


@st.composite
def templates(draw: st.DrawFn) -> str:
    body = "".join(draw(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=6)))
    repeat = draw(st.sampled_from([0, 0, 3, 12, 40]))
    if repeat:
        body = f"{{% for i in range({repeat}) %}}{body}{{% endfor %}}"
    return PRELUDE + body


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(templates())
def test_risky_templates_raise_only_llama_exceptions_and_leave_the_context(template: str) -> None:
    context = _context()
    before = copy.deepcopy(context)
    try:
        out = render(template, context, source_name="fuzz", limits=LIMITS)
        assert isinstance(out, str)
    except LlamaException:
        pass
    assert context == before
