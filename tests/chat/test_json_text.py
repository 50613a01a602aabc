"""JSON text read as nlohmann reads it: values and error messages against the oracle.

Upstream shows nlohmann's parse errors to users ("Failed to parse tool call arguments as JSON:
[json.exception.parse_error.101] parse error at line 1, column 3: ..."). The reference is the
oracle's chat_apply on a template that reads tool-call arguments as objects, so that upstream
parses the argument text with nlohmann: the rendered prompt (the parsed value through tojson) or
the error text must be equal.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llamact.chat.json_text import JsonParseError, parse_json
from llamact.errors import LlamaException
from llamact.parity.apply_runner import apply_request
from llamact.parity.oracle import OracleClient, OracleError

# reads arguments.arg (so caps say "object arguments") and prints the parsed value
TEMPLATE = ("{%- for m in messages %}{%- if m.tool_calls %}{%- for c in m.tool_calls %}"
            "{{ c.function.arguments.arg }}|{{ c.function.arguments | tojson }}"
            "{%- endfor %}{%- endif %}{%- endfor %}")

SAMPLES = [
    '{not json', '', '   ', '{"a": 1,}', '[1, 2', '{"a": 01}', '{"a": -}', '{"a": 1.}', '{"a": 1e}', '{"a": 1e+}',
    '{"a": "x\ny"}', '{"a": "\\x"}', '{"a": "\\u12"}', '{"a": "\\ud800"}', '{"a": "\\ud800\\u0041"}',
    '{"a": "\\udc00"}',
    '{"a": tru}', '{"a": nul}', '{"a" 1}', '{"a": 1 "b": 2}', '{"a": [1 2]}', '1 2', '{"a": 1e400}', '\ufeff{"a": 1}',
    '\ufeff', '{"a": "\x01"}', '{"a": "\x08\x1f"}', 'x', '{"a": 1}\n\n}', '{\n"a":\n\tbad}', '{"é": ü}',
    '{"a": 18446744073709551616, "b": -9223372036854775809, "c": [1.5e300, -0, 1E2, 1e-400]}',
    '{"a":1, "a":2, "b":3}', '{"arg": "\\ud83d\\ude00 \\"q\\" \\\\ \\/"}', '[[[[]]]]',
    '{"arg": {"deep": [true, false, null]}}',
    '"just a string"', '{"a": "unterminated', '{"a": 1}\x00trailing', '{"arg": 1} ', '\t\r\n{"arg":2}\n',
]


def _request(arguments: str) -> dict:
    call = {"type": "function", "function": {"name": "f", "arguments": arguments}}
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    return {"template": TEMPLATE, "bos_token": "", "eos_token": "", "add_bos": False, "add_eos": False,
            "inputs": {"messages": messages, "force_pure_content": True}}


def _compare(oracle: OracleClient, arguments: str) -> None:
    request = _request(arguments)
    expected = oracle.request("chat_apply", **request)
    expected = ("error", expected.message) if isinstance(expected, OracleError) else ("ok", expected["prompt"])
    try:
        got = ("ok", apply_request(request, None)["prompt"])
    except LlamaException as exc:
        got = ("error", exc.message)
    assert got == expected, arguments


@pytest.mark.parity
def test_the_template_reads_arguments_as_objects(oracle: OracleClient) -> None:
    assert oracle.caps(TEMPLATE)["supports_object_arguments"] is True


@pytest.mark.parity
@pytest.mark.parametrize("arguments", SAMPLES)
def test_values_and_errors_equal_nlohmanns(oracle: OracleClient, arguments: str) -> None:
    _compare(oracle, arguments)


_JSONISH = st.lists(st.sampled_from(list('{}[]:,"\\ \n\t0123456789-+.eEtruefalsnl\x01éu') + ["\\u00e9", '"arg"']),
                    max_size=16).map("".join)


@pytest.mark.parity
@settings(max_examples=150, deadline=None)
@given(text=_JSONISH)
def test_random_text_matches_nlohmann(oracle: OracleClient, text: str) -> None:
    _compare(oracle, text)


def test_deep_nesting_is_refused_without_exhausting_the_stack() -> None:
    with pytest.raises(JsonParseError, match="nests deeper"):
        parse_json("[" * 200_000)
    assert parse_json("[" * 5000 + "]" * 5000) is not None
