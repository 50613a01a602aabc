"""docs/design.md deviation 1, on its own: string literals accept ``\\xHH`` (exactly two hex digits).

Upstream accepts only ``\\n \\t \\r \\b \\f \\v \\\\ \\' \\"`` and throws on anything else; llamact
also decodes ``\\xHH``. A malformed escape raises a LlamaException naming the template source.
"""

from __future__ import annotations

from typing import Any

import pytest

from llamact.errors import LlamaException
from llamact.jinja import JinjaSyntaxError, render
from llamact.parity.oracle import OracleError


@pytest.mark.parametrize(("template", "expected"), [
    (r'{{ "\x41" }}', "A"),
    (r'{{ "\x00" }}', "\x00"),
    (r'{{ "\xE9" }}', "é"),
    (r'{{ "\xe9t\xE9" }}', "été"),
    (r"{{ '\x41\x42' }}", "AB"),
    (r'{{ "\\x41" }}', r"\x41"),
    (r'{{ "a\n\t\r\b\f\v\\\'\"" }}', "a\n\t\r\b\f\v\\'\""),
])
def test_hex_escapes_decode(template: str, expected: str) -> None:
    assert render(template, {}) == expected


@pytest.mark.parametrize("template", [r'{{ "\x4" }}', r'{{ "\xZZ" }}', r'{{ "\x" }}', r'{{ "\q" }}',
                                      r'{{ "\u0041" }}', r'{{ "\0" }}'])
def test_malformed_escape_names_the_source(template: str) -> None:
    with pytest.raises(JinjaSyntaxError) as info:
        render(template, {}, source_name="ModelParams.chat_template")
    assert isinstance(info.value, LlamaException)
    assert "ModelParams.chat_template" in str(info.value)
    assert info.value.source_name == "ModelParams.chat_template"


@pytest.mark.parity
def test_upstream_refuses_hex_escapes(oracle: Any) -> None:
    """The deviation is one: upstream's lexer throws on ``\\x``."""
    answer = oracle.request("jinja_render", template=r'{{ "\x41" }}', context={})
    assert isinstance(answer, OracleError)
    assert "unknown escape character \\x" in answer.message
