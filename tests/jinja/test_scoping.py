"""Upstream's variable scopes (runtime.cpp), each expectation answered by the oracle.

A ``for`` loop has one scope for all its iterations (a variable set in one is still set in the
next; all of it ends with the loop) and its ``else`` runs in the enclosing scope; a macro sees its
caller's variables (dynamic scope), ``loop`` included, and evaluates its defaults there; ``if``, set
blocks and filter blocks have no scope of their own.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytestmark = pytest.mark.parity

LOOPS = [
    "{% for i in [1,2] %}{% if i == 1 %}{% set x = 'a' %}{% endif %}[{{ x }}]{% endfor %}[{{ x }}]",
    "{% for i in [1,2] %}{% for j in [1,2] %}{% if j == 1 %}{% set x = i %}{% endif %}{{ x }}{% endfor %}{% endfor %}",
    "{% set x = 0 %}{% for i in [1,2] %}{{ x }}{% set x = i %}{% endfor %}{{ x }}",
    "{% for i in [1,2,3] %}{% if i == 2 %}{% continue %}{% endif %}{% set last = i %}{% endfor %}[{{ last }}]",
    "{% for i in [1,2,3] if i > 1 %}{% set s = i %}{{ s }}{% endfor %}",
    "{% for x in [] %}{% else %}{% set y = 1 %}{% endfor %}[{{ y }}]",
    "{% for i in [1,2] %}{% continue %}{% else %}E{% endfor %}",
    "{% for i in [1,2] %}{% break %}{% else %}E{% endfor %}",
    "{% for i in [1,2] %}{{ i }}{% break %}{% else %}E{% endfor %}",
]

MACROS = [
    "{% macro f() %}[{{ y }}]{% endmacro %}{% for i in [1,2] %}{% set y = i %}{{ f() }}{% endfor %}",
    "{% set y = 0 %}{% macro f() %}[{{ y }}]{% endmacro %}{% for i in [1,2] %}{% set y = i %}{{ f() }}{% endfor %}"
    "{{ f() }}",
    "{% macro g(y) %}{{ f() }}{% endmacro %}{% macro f() %}[{{ y }}]{% endmacro %}{{ g(5) }}{{ f() }}",
    "{% macro f() %}{% set z = 1 %}{% endmacro %}{{ f() }}[{{ z }}]",
    "{% macro f(a=y) %}{{ a }}{% endmacro %}{% for y in [3] %}{{ f() }}{% endfor %}",
    "{% macro f(a, b=a) %}{{ b }}{% endmacro %}{% set a = 'outer' %}{{ f('p') }}",
    "{% macro f() %}{{ loop.index }}{% endmacro %}{% for i in [5,6] %}{{ f() }}{% endfor %}",
    "{% macro f(x) %}{% for i in [1,2] %}{% if i == 1 %}{% set q = x %}{% endif %}{{ q }}{% endfor %}{% endmacro %}"
    "{{ f('a') }}",
    "{% for i in [1,2] %}{% macro f() %}{{ i }}{% endmacro %}{{ f() }}{% endfor %}",
    "{% macro m() %}{% set v = 'm' %}{{ caller() }}{% endmacro %}{% set v = 'top' %}{% call m() %}{{ v }}{% endcall %}",
    "{% set ns = namespace(v=0) %}{% macro f() %}{% set ns.v = ns.v + 1 %}{% endmacro %}"
    "{% for i in [1,2] %}{{ f() }}{% endfor %}{{ ns.v }}",
    "{% macro g() %}[{{ y }}]{% endmacro %}{% macro f() %}{{ g() }}{% set y = 1 %}{{ g() }}{% endmacro %}"
    "{% set y = 0 %}{% for i in [1] %}{% set y = 5 %}{{ f() }}{% endfor %}",
    "{% macro f() %}{% if true %}{% set y = 1 %}{% endif %}{{ y }}{% endmacro %}"
    "{% for y in [7] %}{{ f() }}{% endfor %}",
    "{% macro f() %}{% if false %}{% set y = 1 %}{% endif %}{{ y }}{% endmacro %}"
    "{% for y in [7] %}{{ f() }}{% endfor %}",
    "{% macro f(n) %}{% for i in range(n) %}{% set y = i %}{% endfor %}[{{ y }}]{% endmacro %}"
    "{% for y in [7] %}{{ f(2) }}{% endfor %}",
    "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}",
    # a name the caller does not have reads as undefined (a parameter of another macro is no binding)
    "{% macro g(t) %}{% endmacro %}{% macro f() %}{% if t %}yes{% endif %}[{{ t }}]{% endmacro %}{{ f() }}",
]

BLOCKS = [
    "{% set x %}{% set y = 1 %}b{% endset %}[{{ y }}{{ x }}]",
    "{% filter upper %}{% set y = 'a' %}b{% endfilter %}[{{ y }}]",
    "{% for i in [1] %}{% set x %}{% set y = i %}{% endset %}{% endfor %}[{{ y }}]",
]


@pytest.mark.parametrize("template", LOOPS)
def test_one_scope_per_loop(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, {})


@pytest.mark.parametrize("template", MACROS)
def test_macros_see_their_callers_variables(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, {})


@pytest.mark.parametrize("template", BLOCKS)
def test_blocks_set_in_the_enclosing_scope(like_oracle: Callable[..., None], template: str) -> None:
    like_oracle(template, {})
