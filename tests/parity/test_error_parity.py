"""Upstream's failures on its own Jinja vectors, met by llamact with the same kind of error and the
same text (the rule of llamact.parity.error_kinds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamact.errors import LlamaException
from llamact.jinja import render
from llamact.parity.components import ORACLE_NOW
from llamact.parity.error_kinds import match_error
from llamact.parity.oracle import OracleClient, OracleError
from llamact.parity.upstream_vectors import jinja_vectors

pytestmark = pytest.mark.parity

LLAMA_CPP = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp"

# Known differences, in llamact.jinja (reported; not the parity layer's to fix): none left.
KNOWN: set[str] = set()


def test_vectors_upstream_refuses_fail_with_upstreams_error(oracle: OracleClient) -> None:
    refused, problems, known = 0, [], set()
    for v in jinja_vectors(LLAMA_CPP):
        expected = oracle.request("jinja_render", template=v.template, context=v.context)
        if not isinstance(expected, OracleError):
            continue
        refused += 1
        try:
            got = render(v.template, v.context, now=ORACLE_NOW, source_name="vector")
        except LlamaException as exc:
            why = match_error("jinja", {"kind": expected.kind, "message": expected.message}, exc)
        else:
            why = f"rendered {got!r}"
        if why is None:
            continue
        if v.name in KNOWN:
            known.add(v.name)
        else:
            problems.append(f"{v.group}/{v.name}: {why}")
    assert refused >= 10
    assert not problems, "\n".join(problems)
    assert known == KNOWN, "a known difference is gone: remove it from KNOWN"


# Templates upstream refuses at run time, whose messages name value types (upstream's type() texts).
TYPE_NAMING = [
    ("{{ x[0] }}", {"x": None}),
    ("{{ messages[0]['content'][0]['text'] }}", {"messages": [{"role": "system", "content": None}]}),
    ("{{ 1 ~ 2 }}", {}),
    ("{{ 1 + true }}", {}),
    ("{{ 1.5 - 'a' }}", {}),
    ("{% for x in 3 %}{% endfor %}", {}),
]


@pytest.mark.parametrize("template,context", TYPE_NAMING, ids=[t for t, _ in TYPE_NAMING])
def test_type_names_in_errors_are_upstreams(oracle: OracleClient, template: str, context: dict[str, object]) -> None:
    expected = oracle.request("jinja_render", template=template, context=context)
    assert isinstance(expected, OracleError), expected
    with pytest.raises(LlamaException) as info:
        render(template, context, now=ORACLE_NOW, source_name="t")
    why = match_error("template_jinja", {"kind": expected.kind, "message": expected.message}, info.value)
    assert why is None, why


# Builtins whose arguments upstream type-checks (func_args::ensure_vals): a wrong type is an error
# there, never a quiet answer.
TYPE_CHECKED = [
    ("{{ 'abc'.endswith(1) }}", {}),
    ("{{ 'abc'.startswith(x) }}", {}),
    ("{{ 'abc'.endswith(none) }}", {}),
    ("{{ 'abc'.startswith() }}", {}),
    ("{{ messages[start:] }}", {"messages": []}),
    ("{{ [1, 2, 3][x:2] }}", {}),
    ("{{ 'abc'[y:] }}", {}),
    ("{{ [1, 2, 3]['a':2] }}", {}),
    ("{{ '{}'.format(K) }}", {}),
    ("{{ '{}'.format(a=1) }}", {}),
    ("{{ '{} {}'.format(1, a=2) }}", {}),
]


@pytest.mark.parametrize("template", ["{{ 'x'.format(a=2) }}", "{{ '{}'.format(none) }}",
                                      "{{ '{} {}'.format(1, [1]) }}"])
def test_format_renders_as_upstream(oracle: OracleClient, template: str) -> None:
    expected = oracle.request("jinja_render", template=template, context={})
    assert not isinstance(expected, OracleError), expected
    assert render(template, {}, now=ORACLE_NOW) == expected


@pytest.mark.parametrize("template,context", TYPE_CHECKED, ids=[t for t, _ in TYPE_CHECKED])
def test_type_checked_arguments_fail_as_upstream(oracle: OracleClient, template: str,
                                                 context: dict[str, object]) -> None:
    test_type_names_in_errors_are_upstreams(oracle, template, context)
