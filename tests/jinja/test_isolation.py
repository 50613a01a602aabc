"""A template never changes the caller's data (upstream renders from a copy of the context), yet
within one render it sees its own changes (``messages.pop()`` affects later reads) as upstream's does.

The caller-side checks need no oracle; what the template prints is the oracle's answer.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from llamact.jinja import JinjaException, JinjaLimitExceeded, JinjaRuntimeError, compile_template, render
from llamact.jinja import caps as caps_module
from llamact.jinja.caps import template_caps
from llamact.parity.oracle import OracleError


def _context() -> dict[str, Any]:
    return {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}},
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": {"b": [1, 2]}}},
            ]},
        ],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "add_generation_prompt": True,
    }


# Each template writes to the caller's data in a different way, then reads what it wrote.
WRITERS = {
    "pop": "{% set _ = messages.pop() %}{{ messages|length }}|{% for m in messages %}{{ m.role }};{% endfor %}",
    "pop-index": "{{ messages.pop(0).content }}|{{ messages[0].content }}|{{ messages|length }}",
    "append": ("{% set _ = messages.append({'role': 'system', 'content': 'injected'}) %}"
               "{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}"),
    "set-attr": "{% set m = messages[0] %}{% set m.content = 'rewritten' %}{{ messages[0].content }}",
    "set-attr-in-loop": ("{% for m in messages %}{% set m.role = 'x' ~ loop.index %}{% endfor %}"
                         "{{ messages|map(attribute='role')|join(',') }}"),
    "nested": ("{% set f = tools[0].function %}{% set f.name = 'evil' %}{% set p = f.parameters %}"
               "{% set p.type = 'string' %}{{ tools|tojson }}"),
    "nested-list": ("{% set calls = messages[2].tool_calls %}{% set _ = calls.pop(0) %}"
                    "{% set args = calls[0].function.arguments.b %}{% set _ = args.append(3) %}"
                    "{{ messages[2].tool_calls|tojson }}"),
    "through-namespace": "{% set ns = namespace(m=messages) %}{% set _ = ns.m.pop() %}{{ messages|length }}",
    "through-filter": ("{% set first = messages|first %}{% set first.content = 'via first' %}"
                       "{% set last = (messages|list)[-1] %}{% set last.content = 'via list' %}"
                       "{{ messages|tojson }}"),
    "through-items": ("{% for k, v in messages[2].items() %}{% if k == 'tool_calls' %}{% set _ = v.pop() %}"
                      "{% endif %}{% endfor %}{{ messages[2].tool_calls|length }}"),
    "filter-append": "{{ messages|append('x')|length }}{{ messages|length }}",
    "pop-all-then-loop": ("{% for _ in range(3) %}{% set _ = messages.pop() %}{% endfor %}"
                          "{% for m in messages %}never{% else %}empty{% endfor %}"),
}


@pytest.mark.parametrize("template", list(WRITERS.values()), ids=list(WRITERS))
def test_template_writes_never_reach_the_caller(template: str) -> None:
    context = _context()
    before = copy.deepcopy(context)
    render(template, context, source_name="writer")
    assert context == before


@pytest.mark.parametrize("template", list(WRITERS.values()), ids=list(WRITERS))
def test_repeated_renders_see_fresh_data(template: str) -> None:
    # after its first write, a template's later renders copy up front: still the caller's values
    context = _context()
    compiled = compile_template(template, "writer")
    first = compiled.render(context)
    assert compiled.render(context) == first
    assert context == _context()


@pytest.mark.parity
@pytest.mark.parametrize("template", list(WRITERS.values()), ids=list(WRITERS))
def test_writes_are_seen_within_the_render_like_upstream(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, _context())


def test_template_owned_containers_stay_writable() -> None:
    # the Kimi pattern: a list inside a namespace, appended to and popped from
    template = ("{% set q = namespace(ids=[]) %}{% for m in messages %}{% set _ = q.ids.append(m.role) %}{% endfor %}"
                "{{ q.ids.pop(0) }}{{ q.ids|length }}{% set l = [1] %}{% set _ = l.append(2) %}{{ l|length }}")
    context = _context()
    assert render(template, context) == "system22"
    assert context == _context()


@pytest.mark.parity
def test_aliased_values_are_copied_apart_like_upstream(like_oracle: Callable[..., None]) -> None:
    # upstream's context comes from JSON: a dict passed twice is two dicts there, so a write to
    # one is not seen through the other
    shared = {"content": "original"}
    context = {"a": shared, "b": shared}
    template = "{% set a.content = 'changed' %}{{ a.content }}|{{ b.content }}"
    like_oracle(template, copy.deepcopy(context))
    assert render(template, context) == "changed|original"
    assert shared == {"content": "original"}


def test_cyclic_context_written_to_is_refused() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(JinjaLimitExceeded, match="cycle"):
        render("{% set _ = l.append(1) %}", {"l": cyclic}, source_name="cyclic")
    assert len(cyclic) == 1
    assert render("{{ l|length }}", {"l": cyclic}) == "1"  # reading it needs no copy


WRITING_PROBES = {
    # upstream's analysis then reads messages[0] of an empty list, and throws
    "pop": "{% set _ = messages.pop() %}{% for m in messages %}{{ m.content }}{% endfor %}{{ tools|tojson }}",
    "rewrite": ("{% for t in tools %}{% set f = t.function %}{% set f.name = 'x' %}"
                "{% set _ = t.function.parameters.required.append('y') %}{% endfor %}"
                "{% for m in messages %}{% set m.content = 'z' %}{{ m.content }}{% endfor %}"),
    "append": "{% set _ = messages.append({'role': 'x'}) %}{{ messages[0].content }}",
}


def _caps_or_error(template: str) -> Any:
    try:
        return template_caps(template).to_map()
    except JinjaException as exc:
        return exc


@pytest.mark.parametrize("template", list(WRITING_PROBES.values()), ids=list(WRITING_PROBES))
def test_caps_probing_never_changes_its_inputs(template: str) -> None:
    tools = copy.deepcopy(caps_module._TOOLS)
    template_caps.cache_clear()
    first = _caps_or_error(template)
    assert caps_module._TOOLS == tools
    template_caps.cache_clear()
    again = _caps_or_error(template)
    assert again == first or (isinstance(first, JinjaRuntimeError) and str(again) == str(first))


@pytest.mark.parity
@pytest.mark.parametrize("template", list(WRITING_PROBES.values()), ids=list(WRITING_PROBES))
def test_caps_of_writing_templates_like_upstream(oracle: Any, template: str) -> None:
    expected = oracle.request("caps", template=template)
    got = _caps_or_error(template)
    if isinstance(expected, OracleError):
        assert isinstance(got, JinjaRuntimeError), got
        assert got.reason == "caps probing failed: " + expected.message
    else:
        assert got == expected
