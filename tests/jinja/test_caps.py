"""llamact.jinja.caps against upstream's ``caps_get`` (the oracle's ``caps`` op): every vendored
template, and small templates exercising each probe rule; the defaults against a default
``jinja::caps`` (oracle op ``caps_defaults``).

No differences remain (a difference found later is to be listed here as a strict xfail with its reason).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llamact.jinja import JinjaSyntaxError
from llamact.jinja.caps import TemplateCaps, template_caps
from llamact.parity.corpus import template_files
from llamact.parity.oracle import OracleError

LLAMA_CPP = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp"

# name -> template; each exercises one probe rule (comments say which). Expectations come from the oracle.
PROBE_TEMPLATES = {
    # content printed: defaults, no tools (tools[0].function.name unused), no parallel calls
    "plain": "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}",
    # typed content via selectattr: string content fails to render -> no string content
    "typed_selectattr": ("{% for m in messages %}{% for p in m.content | selectattr('type', 'equalto', 'text') %}"
                         "{{ p.text }}{% endfor %}{% endfor %}"),
    # `is string` check -> second probe with content [] iterated (array_access) -> typed and string
    "is_string_then_loop": ("{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}"
                            "{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}{% endfor %}"),
    # `is string` check but [] never accessed as an array -> string only
    "is_string_only": "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% endif %}{% endfor %}",
    # string indexed with an int: array_access on the content, marker absent -> typed, not string
    "string_index": "{{ messages[0].content[0] }}",
    # system message skipped -> no system role
    "no_system": "{% for m in messages %}{% if m.role != 'system' %}{{ m.content }}{% endif %}{% endfor %}",
    # system content only tested for definedness (member access marks it used) -> system role
    "system_defined": "{% if messages[0].content is defined %}x{% endif %}",
    # tools by name, calls with tojson arguments (deep use) -> tools, calls, object args, parallel
    "tools_tojson_args": ("{% for t in tools %}{{ t.function.name }}\n{% endfor %}"
                          "{% for m in messages %}{{ m.content }}{% for tc in m.tool_calls or [] %}"
                          "{{ tc.function.name }}{{ tc.function.arguments | tojson }}{% endfor %}{% endfor %}"),
    # tools printed whole with the tojson filter, and with the global tojson()
    "tools_filter_tojson": "{{ tools | tojson }}{% for m in messages %}{{ m.content }}{% endfor %}",
    "tools_global_tojson": "{{ tojson(tools) }}{% for m in messages %}{{ m.content }}{% endfor %}",
    # tools printed whole with the string filter (deep use of arrays/objects)
    "tools_string": "{{ tools | string }}{% for m in messages %}{{ m.content }}{% endfor %}",
    # tools printed through a method call
    "tools_method_tojson": "{{ tools[0].tojson() }}{% for m in messages %}{{ m.content }}{% endfor %}",
    # arguments through items(): the tuples alias the argument values (identity) -> object args;
    # string arguments then fail (string has no items)
    "args_items": ("{% for m in messages %}{% for tc in m.tool_calls or [] %}{{ tc.function.name }}("
                   "{% for k, v in tc.function.arguments.items() %}{{ k }}={{ v }}{% endfor %}){% endfor %}"
                   "{% endfor %}{% for t in tools %}{{ t.function.name }}{% endfor %}"),
    # arguments iterated as an object: keys only, the value is never read -> no object args
    "args_keys": ("{% for m in messages %}{% for tc in m.tool_calls or [] %}{{ tc.function.name }}"
                  "{% for k in tc.function.arguments %}{{ k }}{% endfor %}{% endfor %}{% endfor %}"),
    # only the first call read -> no parallel calls
    "first_call_only": ("{% for m in messages %}{{ m.content }}{% if m.tool_calls %}"
                        "{{ m.tool_calls[0].function.name }}{% endif %}{% endfor %}"),
    # tool calls only tested for presence ('in' does not mark the value) -> no tool calls
    "tool_calls_in": "{% for m in messages %}{% if 'tool_calls' in m %}T{% endif %}{{ m.content }}{% endfor %}",
    # reasoning content printed for every assistant message -> preserve reasoning
    "preserve": ("{% for m in messages %}{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>"
                 "{% endif %}{{ m.content }}{% endfor %}"),
    # reasoning content only for the last assistant message -> no preserve reasoning
    "last_reasoning_only": ("{% for m in messages %}{% if loop.index0 == 3 and m.reasoning_content %}"
                            "<think>{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}{% endfor %}"),
    # preserve flag honoured
    "preserve_flag": ("{% for m in messages %}{% if preserve_thinking and m.reasoning_content %}"
                      "{{ m.reasoning_content }}{% endif %}{% endfor %}"),
    # reasoning effort read (identifier lookup), or only its alias, or only in a dead branch
    "effort": "{% if reasoning_effort is defined %}{{ reasoning_effort }}{% endif %}{{ messages[0].content }}",
    "effort_alias": "{{ reasoning_strength }}{{ messages[0].content }}",
    "effort_dead_branch": "{% if false %}{{ reasoning_effort }}{% endif %}{{ messages[0].content }}",
    # content passed through a macro parameter and a set variable
    "macro_param": ("{% macro r(x) %}{{ x }}{% endmacro %}{% for m in messages %}{% set c = m.content %}"
                    "{{ r(c) }}{% endfor %}"),
    # content through a method and a filter (try_builtin marks the input used)
    "content_methods": "{% for m in messages %}{{ m.content.strip() }}{{ m.content | trim }}{% endfor %}",
    # every probe fails to render
    "always_raises": "{{ raise_exception('no') }}",
    # slices keep the items' identity: the system message split off
    "system_split": ("{% if messages[0].role == 'system' %}{% set sys = messages[0].content %}"
                     "{% set msgs = messages[1:] %}{% else %}{% set msgs = messages %}{% endif %}"
                     "{% for m in msgs %}{{ m.content }}{% endfor %}"),
    # tool calls iterated with loop filtering, and the tools list sliced
    "loop_if": ("{% for t in tools[0:] %}{{ t.function.name }}{% endfor %}{% for m in messages if m.tool_calls %}"
                "{% for tc in m.tool_calls %}{{ tc.function.arguments }}{% endfor %}{% endfor %}"),
}


def _expected(oracle: Any, source: str) -> Any:
    answer = oracle.request("caps", template=source)
    assert not isinstance(answer, OracleError), answer
    return answer


def _vendored() -> list[Any]:
    return [pytest.param(path.read_text(encoding="utf-8"), id=path.stem) for path in template_files(LLAMA_CPP)]


@pytest.mark.parity
@pytest.mark.parametrize("source", _vendored())
def test_vendored_template_caps(oracle: Any, source: str) -> None:
    expected = _expected(oracle, source)
    got = template_caps(source).to_map()
    assert got == expected
    assert list(got) == list(expected)


@pytest.mark.parity
@pytest.mark.parametrize("source", list(PROBE_TEMPLATES.values()), ids=list(PROBE_TEMPLATES))
def test_probe_rule_caps(oracle: Any, source: str) -> None:
    assert template_caps(source).to_map() == _expected(oracle, source)


@pytest.mark.parity
def test_syntax_error_refused_like_upstream(oracle: Any) -> None:
    source = "{% if %}"
    assert isinstance(oracle.request("caps", template=source), OracleError)
    with pytest.raises(JinjaSyntaxError):
        template_caps(source)


@pytest.mark.parity
def test_defaults_are_upstreams_in_upstreams_order(oracle: Any) -> None:
    defaults = oracle.request("caps_defaults")
    assert not isinstance(defaults, OracleError), defaults
    got = TemplateCaps().to_map()
    assert got == defaults and list(got) == list(defaults)
    assert "supports_thinking" not in got


def test_cached_by_source() -> None:
    source = PROBE_TEMPLATES["plain"]
    assert template_caps(source) is template_caps("".join(source))


def test_dead_branch_identifier_is_not_used() -> None:
    # jinja2 hoists name resolution; upstream marks an identifier only when its lookup executes
    assert not template_caps(PROBE_TEMPLATES["effort_dead_branch"]).supports_reasoning_effort
    assert template_caps(PROBE_TEMPLATES["effort"]).supports_reasoning_effort


def test_items_alias_argument_values() -> None:
    assert template_caps(PROBE_TEMPLATES["args_items"]).supports_object_arguments
    assert not template_caps(PROBE_TEMPLATES["args_keys"]).supports_object_arguments


def test_normal_render_unaffected_by_probing() -> None:
    from llamact.jinja import render

    source = PROBE_TEMPLATES["args_items"]
    template_caps(source)
    msgs = [{"role": "assistant", "content": "",
             "tool_calls": [{"function": {"name": "f", "arguments": {"a": "1"}}}]}]
    assert render(source, {"messages": msgs, "tools": []}) == "f(a=1)"
