"""Upstream's runtime error texts, each expectation answered by the oracle.

Upstream prefixes a runtime error with where the innermost statement that failed is ("While
executing <Type> at line L, column C in source:", a 40-byte excerpt either side, a caret), names an
undefined value's type with what was looked up ("Undefined (hint: 'x')"), refuses a function where
it tests truth ("Function is not a bool value"), checks unpacking and object keys before it assigns,
binds macro arguments its own way, checks the arguments of its select filters, and refuses source
with its own lexer's and parser's texts. The cases mix
every statement and expression type, chains, parentheses, macros and call blocks, line ends and
multi-byte characters cut by the excerpt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from llamact.parity.apply_runner import apply_request
from llamact.parity.corpus import _apply_request
from llamact.parity.error_kinds import match_error
from llamact.parity.oracle import OracleError

pytestmark = pytest.mark.parity

CONTEXT: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None}]}

LOCATIONS = [
    '{{ a if b }}',
    '{{ x if true }}',
    '  {%- for x in 1 %}{% endfor %}',
    "{% if true %}{{ 'éééééééééééééééééééééééééééééé'|foo }}{% endif %}",
    "{{ 'éééééééééééééééééééééééééééééééééééééééééééééé'|foo ~ 'éééééééééééééééééééééééééé' }}",
    '{{ x.y.z() }}',
    '{{ (x.y).z() }}',
    '{{ x.y().z.w() }}',
    "{{ 1 + 'a' + 2 }}",
    "{{ 'a' ~ 1 + 'b' - 2 }}",
    "{{ -'a' }}",
    "{{ - 'a' }}",
    "{{ 1 < 2 < 'a' }}",
    '{{ x is nosuchtest }}',
    '{{ x is not nosuchtest }}',
    '{{ foo(1)(2) }}',
    "{{ [1,2]|map(attribute='x')|join(5) }}",
    '{% filter nosuch %}x{% endfilter %}',
    '{% macro m() %}{{ caller() }}{% endmacro %}{% call nosuch() %}x{% endcall %}',
    '{% for x in [1] if x.y.z() %}{% endfor %}',
    "{{ a['b'] }}{{ a.b[0](1) }}",
    '{% set x | nosuch %}x{% endset %}',
    '{% for x in range(2) %}{{ loop.previtem.foo() }}{% endfor %}',
    '{{ loop.index() }}',
    '{% for x in [1] %}{{ loop.foo() }}{{ loop[none] }}{% endfor %}',
    "{{ 'abc'.zz() }}{{ [1][5]() }}",
    '{{ 5.zz() }}',
    '{{ none.zz() }}',
    '{{ range.x }}',
    '{{ range[0] }}',
    "{{ range['x'] }}",
    '{{ range[none] }}',
    "{{ raise_exception('boom') }}",
    '{% macro f(x) %}{{ x.y.z() }}{% endmacro %}{% for i in [1] %}{{ f(i) }}{% endfor %}',
    '{% macro m() %}{{ caller() }}{% endmacro %}{% call m() %}{{ nope() }}{% endcall %}',
    "{{ messages[0]['content'][0]['text'] }}",
    '{{ (messages[0]).content.x() }}',
    '{{ messages[1:][0].x() }}',
    "{{ 'abc'[x:] }}",
    '{{ 1 ~ 2 ~ range }}',
    "{{ 'a' + 1 + 2 + [] }}",
    "{{ 1 + 2 + 'a' + 3 - 1 }}",
    '{% set ns = 5 %}{% set ns.x = 1 %}',
    '{{ x.items() }}',
    "{{ 'a'.items() }}",
    '{% set d = {} %}{{ d.foo() }}{{ d[1]() }}',
    '{{ [1].nope() }}',
    '{% for i in range(3) %}{{ loop.nextitem.x() }}{% endfor %}',
    '{% for i in range(3) %}{{ loop.nope() }}{% endfor %}',
    '{% if messages %}x{% elif messages.x.y() %}y{% endif %}',
    '{% set x | upper %}x{% endset %}',
    '{{ undefined_thing.attr|length }}{{ undefined_thing|foo }}',
    '{{ none.x() }}{{ 1.5.x() }}',
    '{{ true.x() }}',
]

BOOL = [
    '{% set f = range %}{% if f %}y{% endif %}',
    '{% set f = range %}{{ f and 1 }}',
    '{% set f = range %}{{ not f }}',
    '{% set f = range %}{{ 1 if f else 2 }}',
    '{% set f = range %}{{ 1 or f }}{{ f or 1 }}',
    '{% if false %}{% elif range %}y{% endif %}',
    "{% set spec = {'type': 'array'} %}{% if spec['items'] %}{{ spec['items']['type'] }}{% endif %}",
    "{% set spec = {'type': 'array'} %}{{ spec.items.type }}",
    '{% set f = namespace %}{{ f if f }}',
    '{% set f = namespace %}{% for x in [1] if f %}{{ x }}{% endfor %}',
]

UNPACK = [
    '{% set a, b = 1 %}',
    '{% for a, b in [[1, 2, 3]] %}{{ a }}{% endfor %}',
    '{% for a, b in [1] %}{{ a }}{% endfor %}',
    "{% for k, v in {'a': 1} %}{{ k }}{{ v.x() }}{% endfor %}",
    '{% set a, b = [1, 2, 3] %}',
    '{% set a, b = [1] %}',
    '{% for k, v in x.items() %}{% endfor %}',
]

KEYS = [
    '{{ {[1]: 2} }}',
    '{{ {range: 2} }}',
    '{{ {none: 2} }}',
    '{{ {x: 2} }}',
    '{{ {1.5: 2} }}',
    '{{ {(1,2): 2} }}',
    '{{ {true: 2} }}',
    '{{ {}[[1]] }}',
    '{{ {}[{}] }}',
    "{{ {'a':1}.b() }}",
    "{{ {'a':1}[3]() }}",
    '{{ [1][[1]] }}',
    "{{ 'a'[[1]] }}",
    '{{ 5[[1]] }}',
    '{{ {}[range] }}',
    '{{ [1][range] }}',
    '{{ {}[x] }}',
    '{{ {}[(1,2)] }}',
    "{{ {'a': 1}[1.5] }}",
    "{{ {1: 'x'}[1] }}",
    '{% set d = {x: 1} %}',
    '{{ {range: 1, [1]: 2} }}',
    "{{ {'a': 1, [1]: 2, x.y(): 3} }}",
    '{% for a, b in [[1]] %}{{ a }}{% endfor %}',
    "{{ {'a': 1}|tojson(sort_keys=true) }}",
    '{{ {x: 1} }}',
    "{{ {'a': 1, [1]: 2} }}",
    '{{ {}[[1]] }}{{ [1][range] }}',
]

MACRO_ARGS = [
    '{% macro f(a) %}{{ a }}{% endmacro %}{{ f() }}',
    '{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, 2) }}',
    '{% macro f(a) %}{{ a }}{% endmacro %}{{ f(b=2) }}',
    '{% macro f(a, b=2) %}{{ a }}{{ b }}{% endmacro %}{{ f(b=3) }}|{{ f(1) }}|{{ f(1, b=5) }}',
]

FILTER_ARGS = [
    '{% set f = namespace %}{{ [1]|select(f)|list }}',
    '{{ [1]|select()|list }}',
    "{{ [1]|select('odd', 1, 2, 3)|list }}",
    "{{ [{'a': 1}]|selectattr('a', 'equalto', 1, x=2)|list }}",
    "{{ [{'a': 1}]|rejectattr(1)|list }}",
    "{{ [1, 2]|reject('odd')|list }}",
    "{{ [{'a': 1}]|selectattr('a')|list }}",
]

SYNTAX = [
    '{%',
    '{{ 7 // 2 }}',
    '{{ 2 ** 3 }}',
    '{{ 1e3 }}',
    '{{ {{}: 2} }}',
    '{% for x in y recursive %}{% endfor %}',
    '{% raw %}x{% endraw %}',
    "{% extends 'x' %}",
    '{% if %}',
    '{% if x %}',
    '{{ x',
    "{{ 'abc",
    "{{ 'a\\q' }}",
    '{{ x ! y }}',
    '{{ é }}',
    '{{ 99999999999999999999 }}',
    '{{ 1.0000 }}',
    '{{ [1, 2 }}',
    "{{ {'a' 1} }}",
    '{% set x %}',
    '{% endif %}',
    '{% for x y %}{% endfor %}',
    '{% call 1() %}{% endcall %}',
    '{% macro %}',
    '{#',
    '{{ x }}}',
    '{{ f(a=) }}',
    '{{ x | }}',
    '{{ x is }}',
    '{{ -}}',
    '{% generation x y %}',
    '{{ x.1 }}',
    '{{ (1, 2) }}',
    '{{ not }}',
    '- {{ + }}',
    "{{ 'a' 'b' }}",
    '{% if a %}{% elif %}{% endif %}',
    '{{ x if y else }}',
    '{{ *x }}',
]

SIGNALS = [
    '{% break %}',
    '{% continue %}',
    '{% if true %}{% continue %}{% endif %}',
    '{% for x in [1,2] %}{{ x }}{% if x == 1 %}{% break %}{% endif %}{% endfor %}',
    '{% for x in [] %}{% else %}{% break %}{% endfor %}',
    '{% macro f() %}{% for i in [1] %}{% continue %}{% endfor %}ok{% endmacro %}{{ f() }}',
    '{{ x.y() }}{% break %}',
]

SOURCES = [
    "a\r\nb {{ x.y() }}\r\n",
    "a\rb\r{{ x.y() }}",
    "   {% if true %}{{ x.y() }}{% endif %}",
    " \t {%- for i in 1 %}{% endfor %}",
    "{{ x.y() }}\n",
    "line1\nline2 {{ 'ééé€€€😀😀' ~ x.y() }} and more text after €€€€€€€€€€€€😀😀😀😀😀😀",
    "€€€€€€€€€€€€€€{{ x.y() }}",
    "x€€€€€€€€€€€€€€{{ x.y() }}",
    "xx€€€€€€€€€€€€€€{{ x.y() }}",
    "{{ x.y() }}😀😀😀😀😀😀😀😀😀😀😀😀😀",
    "{{ x.y() }}é😀😀😀😀😀😀😀😀😀😀😀😀😀",
    "{{ x.y() }}éé😀😀😀😀😀😀😀😀😀😀😀😀😀",
    "{#- comment -#}\n{{ x.y() }}",
]

CHAT_TEMPLATES = [
    "{% for m in messages %}\r\n{{ m.content }}\r\n{% endfor %}\r\n{{ raise_exception('no') }}\r\n",
    "{{ m.x() }}\n",
    "{%- for m in messages %}{{ m.content.bad() }}{% endfor %}\n\n",
]


@pytest.mark.parametrize("template", LOCATIONS)
def test_located_runtime_errors(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, CONTEXT)


@pytest.mark.parametrize("template", BOOL)
def test_a_function_is_no_boolean(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, CONTEXT)


@pytest.mark.parametrize("template", UNPACK)
def test_unpacking_is_checked_like_upstream(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, CONTEXT)


@pytest.mark.parametrize("template", KEYS)
def test_object_keys(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, CONTEXT)


@pytest.mark.parametrize("template", MACRO_ARGS)
def test_macro_arguments(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, CONTEXT)


@pytest.mark.parametrize("template", FILTER_ARGS)
def test_select_arguments(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, CONTEXT)


@pytest.mark.parametrize("template", SYNTAX)
def test_syntax_errors_are_upstreams(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, {})


@pytest.mark.parametrize("template", SIGNALS)
def test_break_and_continue_outside_a_loop(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, {})


@pytest.mark.parametrize("template", SOURCES)
def test_positions_in_the_source_as_given(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, {})


@pytest.mark.parametrize("template", CHAT_TEMPLATES)
def test_chat_errors_point_into_the_source_as_upstream_keeps_it(oracle: Any, template: str) -> None:
    """The chat pipeline's context holds the lexer's source (LF line ends, no final one)."""
    request = _apply_request(template, {"messages": [{"role": "user", "content": "hi"}],
                                        "add_generation_prompt": True})
    expected = oracle.request("chat_apply", **request)
    assert isinstance(expected, OracleError), expected
    with pytest.raises(Exception) as raised:
        apply_request(request, 1768478400)
    why = match_error("chat_apply", {"kind": expected.kind, "message": expected.message}, raised.value)
    assert why is None, why
