"""Templates are untrusted: injection payloads reach nothing dangerous, and hostile templates stop
within the configured bounds with a LlamaException."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamact.errors import LlamaException
from llamact.jinja import JinjaLimitExceeded, RenderLimits, budget, render

MESSAGES = [{"role": "user", "content": "hi"}]

# CVE-2024-34359 (llama-cpp-python): a chat template in GGUF metadata escaping jinja2's plain
# Environment through ``().__class__.__base__.__subclasses__()`` to ``os.popen``.
CVE_2024_34359 = (
    "{% for x in ().__class__.__base__.__subclasses__() %}{% if \"warning\" in x.__name__ %}"
    "{{ x()._module.__builtins__['__import__']('os').popen(\"touch {marker}\") }}{% endif %}{% endfor %}"
)

PAYLOADS = [
    "{{ ''.__class__.__mro__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ ().__class__.__base__.__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.popen('touch {marker}').read() }}",
    "{{ joiner.__init__.__globals__ }}",
    "{{ lipsum.__globals__['os'].popen('touch {marker}').read() }}",
    "{{ self._TemplateReference__context }}",
    "{{ self.__init__.__globals__ }}",
    "{{ request.application.__globals__.__builtins__.__import__('os').popen('touch {marker}').read() }}",
    "{{ config.items() }}",
    "{{ config.__class__.__init__.__globals__['os'].popen('touch {marker}') }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ raise_exception.__globals__['__builtins__'] }}",
    "{{ strftime_now.__globals__['time'] }}",
    "{{ range.__self__ }}",
    "{{ messages.__class__ }}",
    "{{ messages['__class__'] }}",
    "{{ messages|attr('__class__') }}",
    "{{ messages.items.__globals__ }}",
    "{{ messages.pop.__self__ }}",
    "{{ ''.format.__globals__ }}",
    "{{ 'a'.upper.__self__ }}",
    "{{ messages[0].__dict__ }}",
    "{{ undefined_var.__class__.__init__.__globals__ }}",
    "{{ undefined_var._undefined_obj }}",
    "{% for x in [1] %}{{ loop.__init__.__globals__ }}{{ loop._iterator }}{% endfor %}",
    "{% set x = ''.__class__ %}{{ x.__subclasses__() }}",
    "{{ ('a' ~ '')['__class__'] }}",
    "{{ {}.__class__.__base__.__subclasses__() }}",
    "{% include '/etc/passwd' %}",
    "{% import 'os' as os %}{{ os.popen('touch {marker}') }}",
    "{% from 'os' import popen %}",
    "{% extends '/etc/passwd' %}",
    "{% raw %}{{ x }}{% endraw %}",
    "{{ open('/etc/passwd').read() }}",
    "{{ __import__('os').popen('touch {marker}') }}",
    "{{ eval('1') }}{{ exec }}{{ getattr }}{{ globals() }}",
    CVE_2024_34359,
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_injection_payload_is_harmless(payload: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    template = payload.replace("{marker}", str(marker))
    try:
        out = render(template, {"messages": MESSAGES}, source_name="payload")
    except LlamaException:
        out = ""
    assert not marker.exists()
    for leak in ("class", "module", "function", "built-in", "object at", "subclasses", "root:"):
        assert leak not in out, out


def test_cve_2024_34359_raises(tmp_path: Path) -> None:
    marker = tmp_path / "retr0reg"
    with pytest.raises(LlamaException):
        render(CVE_2024_34359.replace("{marker}", str(marker)), {"messages": MESSAGES}, source_name="gguf metadata")
    assert not marker.exists()


LIMITS = RenderLimits(max_seconds=1.0, max_output_chars=1_000_000)


@pytest.mark.parametrize("template", [
    pytest.param("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}", id="loops"),
    pytest.param("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}",
                 id="exponential-macro"),
])
def test_long_render_stops_at_the_time_bound(template: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # events, not wall time: the render's clock is a fake that advances 10 ms per reading, and the
    # render must stop at the first reading past its deadline
    readings: list[float] = []

    def monotonic() -> float:
        readings.append(len(readings) * 0.01)
        return readings[-1]

    monkeypatch.setattr(budget, "_clock", monotonic)
    with pytest.raises(JinjaLimitExceeded, match="took longer"):
        render(template, {}, limits=LIMITS)
    assert readings[-1] > LIMITS.max_seconds and readings[-2] <= LIMITS.max_seconds


@pytest.mark.parametrize("template", [
    pytest.param("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", id="output"),
    pytest.param("{{ 'a' * 1000000000000 }}", id="repeat"),
    pytest.param("{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}"
                 "{% endfor %}{{ ns.s }}", id="doubling"),
    pytest.param("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", id="recursion"),
    pytest.param("{% set a = [] %}{% set _ = a.append(a) %}{{ a|tojson }}", id="cycle"),
])
def test_huge_output_stops_at_the_size_bound(template: str) -> None:
    with pytest.raises(JinjaLimitExceeded):
        render(template, {}, limits=LIMITS)


def test_range_is_bounded() -> None:
    with pytest.raises(LlamaException):
        render("{{ range(10000000000)|length }}", {})
