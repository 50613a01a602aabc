"""Focused behaviours of upstream's engine, each expectation answered by the oracle: printing,
tojson, undefined, operators, member access, filters, loops, whitespace and errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.parity

CONTEXT: dict[str, Any] = {
    "s": "héllo wörld", "n": None, "i": 3, "f": 2.5, "b": True, "u8": "é😀",
    "a": [1, "x", [2, 3], {"k": "v"}], "o": {"k": "v", "items": 1, "n": 2},
    "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None}],
}

PRINTING = [
    "{{ 1.0 }}|{{ 0.1 }}|{{ 0.0000001 }}|{{ 3.14159265 }}|{{ 100000000000.5 }}|{{ -0.0 }}|{{ 1/3 }}",
    "{{ true }}{{ false }}{{ none }}{{ undefined_var }}{{ o }}{{ a }}",
    "{{ [1, 'a', [2.5, true]] }}|{{ (1, 2) }}|{{ msgs }}",
    "{{ 5|string }}|{{ 5.5|string }}|{{ true|string }}|{{ none|string }}|{{ a|string }}|{{ o|string }}",
    "{{ ['it\\'s']|string }}|{{ 'a' ~ [1, 'b'] }}|{{ 'a' ~ {'k': none} }}",
    "{{ 'x'|safe }}|{{ 1|safe }}|{{ 1.5|safe }}|{{ true|safe }}|{{ none|safe }}",
]

TOJSON = [
    "{{ a|tojson }}|{{ o|tojson(indent=2) }}|{{ f|tojson }}|{{ 1.0|tojson }}|{{ 100000000.0|tojson }}",
    "{{ 0.000012345|tojson }}|{{ 123456789.0|tojson }}|{{ -1.5|tojson }}|{{ 0.1|tojson }}",
    "{{ u8|tojson }}|{{ u8|tojson(ensure_ascii=true) }}|{{ 'tab\\there\\n'|tojson }}",
    "{{ [1, 2]|tojson(separators=(',', ':')) }}|{{ {'a': [1, {'b': none}], 'c': {}}|tojson(indent=2) }}",
    "{{ msgs|tojson(indent=4) }}|{{ [[], {}]|tojson(indent=1) }}|{{ tojson(o) }}",
    "{{ o|tojson(sort_keys=true) }}",
    "{{ undefined_var|tojson }}",
]

UNDEFINED = [
    "{{ undefined_var.x.y }}|{{ undefined_var['x'] }}|{{ undefined_var|length }}|{{ undefined_var|upper }}",
    "{{ undefined_var|first }}|{{ undefined_var|list }}|{{ undefined_var|default('d') }}",
    "{{ undefined_var is defined }}|{{ undefined_var is undefined }}|{{ undefined_var is iterable }}",
    "{% for x in undefined_var %}x{% else %}empty{% endfor %}",
    "{{ 'x' ~ undefined_var }}|{{ undefined_var + 'x' }}|{{ 1 in undefined_var }}|{{ 1 not in undefined_var }}",
    "{{ undefined_var + 1 }}",
    "{{ not undefined_var }}|{{ undefined_var or 'x' }}|{{ undefined_var == undefined_var }}",
    "{{ none.foo }}|{{ i.foo }}|{{ i['x'] }}",
]

OPERATORS = [
    "{{ 'a' ~ 1 ~ 2.5 ~ true ~ none }}|{{ 'a' + none }}|{{ none + 'a' }}",
    "{{ 1 ~ 2 }}",
    "{{ 1 + true }}",
    "{{ 'a' < 'b' }}",
    "{{ 7 / 2 }}|{{ 7 % 3 }}|{{ 7.5 % 2 }}|{{ 1 / 0 }}|{{ -1 / 0 }}|{{ 2 * 3 }}|{{ 2.0 * 3 }}",
    "{{ 'ab' * 3 }}|{{ 3 * 'ab' }}|{{ 'ab' * 0 }}|{{ -i }}|{{ not i }}",
    "{{ [1, 2] + [3] }}|{{ 1 in [1, 2] }}|{{ 'a' in 'abc' }}|{{ 'k' in o }}|{{ 'z' not in o }}",
    "{{ [1, [2]] == [1, [2]] }}|{{ {'a': 1} == {'a': 1} }}|{{ (1, 2) == [1, 2] }}|{{ 1 == 1.0 }}|{{ 1 == true }}",
    "{{ '1' == 1 }}|{{ none == none }}|{{ n != 1 }}|{{ i > 2.5 }}|{{ i == 3.0 }}",
    "{{ 7 // 2 }}",
    "{{ 2 ** 3 }}",
    "{{ 1e3 }}",
    "{{ none + 1 }}",
    "{{ 'a' 'b' 'c' }}|{{ 'it\\'s' }}",
]

MEMBERS_AND_FILTERS = [
    "{{ o.items }}|{{ o['items'] }}|{{ o.n }}|{{ o.get('k') }}|{{ o.get('zz') }}|{{ o.get('zz', 5) }}",
    "{{ o|items }}|{{ o.items() }}|{{ o|dictsort }}|{{ o.keys() }}|{{ o.values()|list }}",
    "{{ s|length }}|{{ u8|length }}|{{ s[1] }}|{{ s[0:3] }}|{{ a[1:3] }}|{{ a[:-1]|length }}|{{ a[::-1] }}",
    "{{ s.upper() }}|{{ s|title }}|{{ 'hello world-foo'|title }}|{{ 'aBC'|capitalize }}|{{ '  x  '|trim }}",
    "{{ 'a,b,,c'.split(',') }}|{{ 'a b  c'.split() }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'xxhixx'.strip('x') }}",
    "{{ 'abc'.replace('', '-') }}|{{ '{} and {}'.format(1, 'x') }}|{{ '42'|int }}|{{ 'abc'|int(7) }}|{{ '3.5'|float }}",
    "{{ 'line1\\nline2\\n\\nline3'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}",
    "{{ 'a\\n\\nb\\n'|indent(width=3, blank=true) }}|{{ ''|indent(2, true) }}|{{ 'x\\n'|indent('> ') }}",
    "{{ [3, 1, 2]|sort }}|{{ [3, 1, 2]|sort(reverse=true) }}|{{ msgs|map(attribute='role')|list }}",
    "{{ msgs|selectattr('content')|list|length }}|{{ msgs|rejectattr('content', 'none')|list|length }}",
    "{{ [1, 2, 3]|join(', ') }}|{{ msgs|join(',', attribute='role') }}|{{ [1, 2, 3]|max }}|{{ [1, 2, 3]|reverse }}",
    "{{ [1, 2, 3]|select('odd')|list }}|{{ [1, 2, 3]|reject('equalto', 2)|list }}",
    "{{ -3|abs }}|{{ 3.7|int }}|{{ 3|float }}|{{ true|int }}|{{ ''|default('d') }}|{{ ''|default('d', true) }}",
    "{{ i is odd }}|{{ i is divisibleby(3) }}|{{ s is string }}|{{ a is iterable }}|{{ o is mapping }}",
    "{{ [1, 2]|map('string')|list }}",
    "{{ [1, 2]|unique }}",
    "{{ o|default('d') }}",
    "{{ [1, 2, 3]|slice(2) }}",
    "{{ msgs.items.role }}",
]

STATEMENTS = [
    "{% for k, v in o %}{{ k }}={{ v }};{% endfor %}|{% for k in o %}{{ k }}{% endfor %}",
    "{% for x in [1, 2, 3] %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% else %}E{% endfor %}",
    "{% for x in [1, 2] %}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.revindex0 }}{{ loop.previtem }}"
    "{{ loop.nextitem }}{{ loop.cycle }}{% endfor %}",
    "{% for x in [1, 2, 3] if x > 1 %}{{ loop.length }}{% endfor %}",
    "{% set ns = namespace(x=1) %}{% set ns.x = ns.x + 1 %}{{ ns.x }}|{% set d = {} %}{% set d.y = 2 %}{{ d.y }}",
    "{% macro m(a, b=2) %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }}|{{ m(1, 3) }}|{{ m(b=4, a=5) }}",
    "{% macro m() %}[{{ caller() }}]{% endmacro %}{% call m() %}inner{% endcall %}",
    "{% set x %}block {{ 1 }}{% endset %}{{ x }}|{% filter upper %}hi {{ s }}{% endfilter %}",
    "{% generation %}gen {{ 1 }}{% endgeneration %}",
    "{% for x in 'abc' %}{{ x }}{% endfor %}",
    "{{ raise_exception('boom') }}",
    "{{ range(3) }}|{{ range(1, 7, 2)|list }}|{{ strftime_now('%Y-%m-%d %H:%M %b %A') }}",
    "{%- set x = 1 -%}\n  {{ x }}\n  {%- if true %}\n  a\n  {% endif %}\n {{ 'b' }} \n{#- c -#}   d\n",
    "a {% if true %}x{% endif %}",
    "a{% if true %}x{% endif %}\r\nline\r\n",
    "{% for a, b in [[1, 2, 3]] %}{{ a }}{% endfor %}",
]


@pytest.mark.parametrize("template", PRINTING + TOJSON)
def test_printing_and_tojson(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, CONTEXT)


@pytest.mark.parametrize("template", UNDEFINED)
def test_undefined(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, CONTEXT)


@pytest.mark.parametrize("template", OPERATORS)
def test_operators(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, CONTEXT)


@pytest.mark.parametrize("template", MEMBERS_AND_FILTERS)
def test_members_and_filters(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, CONTEXT)


@pytest.mark.parametrize("template", STATEMENTS)
def test_statements_and_whitespace(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, CONTEXT)
