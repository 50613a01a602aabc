"""Claims of the specification (``../shared/spec/``) where llamact keeps upstream's answer, each
shown with the oracle: docs/design.md, "Where llamact keeps upstream's answer over the
specification's" (issue 45).

* PEG output without tools: the specification's parse trims only trailing whitespace; upstream's
  trims leading whitespace and keeps trailing (Solar Open without tools: neither), and llamact's
  stream equals that parse (deviation 5).
* A Ministral thought cut off by the token limit: the specification's final parse returns it with
  its ``[THINK]`` tag as content; upstream's returns it as reasoning, as llamact's does, streamed alike.
* Granite 3.3's ``<|tool_call|>[...]``: its template renders no tool call, so upstream's apply finds
  no tool-call format and the text is content.
* Mistral-Small-3.2: upstream's parser and grammar read ``[TOOL_CALLS]name[ARGS]`` then
  ``[ARGS]{...}`` (or ``[CALL_ID]id[ARGS]{...}``); the grammar makes a model write that, and it
  parses; the model's own ``[TOOL_CALLS]name[ARGS]{...}`` fails to parse, upstream's and llamact's.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from stream_checks import apply_answer, compare_upstream, stream_default, stream_upstream

from llamact.chat.output_parser import ChatParseError
from llamact.grammar.acceptor import GbnfAcceptor
from llamact.grammar.gbnf import parse_gbnf
from llamact.parity.oracle import OracleClient
from llamact.parity.stream_replay import template_result, token_pieces

pytestmark = pytest.mark.parity

WEATHER: dict[str, Any] = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TOOLS = pytest.mark.parametrize("tools", [[], [WEATHER]], ids=["no_tools", "tools"])


def _upstream_and_default(oracle: OracleClient, template: str, text: str, tools: list[Any],
                          stop_reason: str = "eog", **inputs: Any) -> tuple[dict[str, Any], Any]:
    """(the oracle's final message, the default-mode run), upstream mode checked step by step."""
    answer = apply_answer(oracle, template, tools=tools, **inputs)
    pieces = token_pieces(text, random.Random(5))
    steps, bad = compare_upstream(oracle, answer, text, pieces)
    assert not bad, bad[:3]
    assert "message" in steps[-1], steps[-1]
    default = stream_default(template_result(answer), text, pieces, tools=tools, stop_reason=stop_reason)
    assert default.matches_message(), (default.content, default.message.content)   # deviation 5
    return steps[-1]["message"], default


# -- PEG output: whitespace --------------------------------------------------------------------------

PEG_TEMPLATES = {
    # template: (apply inputs, upstream's content of "  Hello.  \n" without tools)
    "mistralai-Ministral-3-14B-Reasoning-2512": ({}, "Hello.  \n"),
    "Qwen3-Coder": ({}, "Hello.  \n"),
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": ({"enable_thinking": False}, "Hello.  \n"),
    "upstage-Solar-Open-100B": ({}, "  Hello.  \n"),
}


@pytest.mark.parametrize("template", PEG_TEMPLATES)
def test_peg_output_without_tools_keeps_upstreams_whitespace(oracle: OracleClient, template: str) -> None:
    """The specification: "Without tools, the PEG parse trims only trailing whitespace, so the stream
    keeps leading whitespace." Upstream's parse is another: llamact's final message is upstream's,
    and the stream sends exactly that."""
    inputs, content = PEG_TEMPLATES[template]
    upstream, default = _upstream_and_default(oracle, template, "  Hello.  \n", [], **inputs)
    assert upstream["content"] == content != "  Hello."   # not the specification's
    assert default.message.content == default.content == content


# -- a Ministral thought cut off by the token limit ----------------------------------------------------


@TOOLS
@pytest.mark.parametrize("template", ["mistralai-Ministral-3-14B-Reasoning-2512",
                                      "unsloth-mistral-Devstral-Small-2507"])
def test_a_thought_cut_off_by_the_token_limit_is_reasoning(oracle: OracleClient, template: str,
                                                           tools: list[Any]) -> None:
    """The specification: a Ministral thought cut off by the token limit "streams as reasoning,
    although the final parse returns it, with its [THINK] tag, as content". Upstream's final parse
    (the one llama-server runs when a generation ends, whatever ended it: the server_e2e row's
    cut-off cases are equal in upstream mode) returns it as reasoning; so does llamact's, in both
    modes, and the stream equals it."""
    text = "[THINK]Plan it. Then"
    upstream, default = _upstream_and_default(oracle, template, text, tools, stop_reason="max_tokens")
    assert (upstream["content"], upstream["reasoning_content"]) == ("", "Plan it. Then")
    assert (default.message.content, default.message.reasoning_content) == ("", "Plan it. Then")
    assert default.thinking == "Plan it. Then" and default.content == ""
    answer = apply_answer(oracle, template, tools=tools)
    compat = stream_upstream(template_result(answer), text, token_pieces(text, random.Random(5)), "max_tokens")
    assert (compat.message.content, compat.message.reasoning_content) == ("", "Plan it. Then")


# -- Granite 3.3 -----------------------------------------------------------------------------------------


@TOOLS
def test_granite_3_3_tool_call_text_is_content(oracle: OracleClient, tools: list[Any]) -> None:
    """Granite 3.3's template renders no assistant tool call, so upstream's apply finds no tool-call
    format (no grammar, no trigger) and ``<|tool_call|>[...]`` is content, in llamact's parse too."""
    template = "ibm-granite-granite-3.3-2B-Instruct"
    answer = apply_answer(oracle, template, tools=[WEATHER])
    assert answer["grammar"] == "" and answer["grammar_triggers"] == []
    text = '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    upstream, default = _upstream_and_default(oracle, template, text, tools)
    assert upstream["content"] == default.message.content == text
    assert upstream["tool_calls"] == [] and default.message_calls == []


# -- Mistral-Small-3.2 -------------------------------------------------------------------------------------

MISTRAL_SMALL = "Mistral-Small-3.2-24B-Instruct-2506"
ARGS = '{"city": "Paris"}'


def test_mistral_small_3_2_calls_as_its_grammar_writes_them_parse(oracle: OracleClient) -> None:
    """Upstream's grammar for Mistral-Small-3.2 admits ``[TOOL_CALLS]get_weather[ARGS][ARGS]{...}``
    (or ``...[ARGS][CALL_ID]id[ARGS]{...}``), not the model's own ``[TOOL_CALLS]get_weather[ARGS]{...}``;
    what it admits parses into the call, upstream's parse and llamact's alike."""
    answer = apply_answer(oracle, MISTRAL_SMALL, tools=[WEATHER], tool_choice="required")
    grammar = GbnfAcceptor(parse_gbnf(answer["grammar"]))
    written = {"double_args": "[TOOL_CALLS]get_weather[ARGS][ARGS]" + ARGS,
               "call_id": "[TOOL_CALLS]get_weather[ARGS][CALL_ID]abc123xyz[ARGS]" + ARGS}
    for text in written.values():
        assert grammar.accepts(text), text
        upstream, default = _upstream_and_default(oracle, MISTRAL_SMALL, text, [WEATHER])
        assert [(c["name"], c["arguments"]) for c in upstream["tool_calls"]] == [("get_weather", ARGS)]
        assert default.message_calls == [("get_weather", ARGS)]
    assert not grammar.is_viable_prefix("[TOOL_CALLS]get_weather[ARGS]" + ARGS)


@TOOLS
def test_mistral_small_3_2_calls_in_the_models_own_form_do_not_parse(oracle: OracleClient,
                                                                      tools: list[Any]) -> None:
    """``[TOOL_CALLS]get_weather[ARGS]{...}`` (a reply written without the grammar) is, with tools, a
    parse error for upstream and ``ChatParseError`` for llamact's upstream mode when the output is
    complete; the default mode (deviation 17) answers with the text as content, no call, and the
    parse error named (no recovery rule reads this form); cut off by the token limit, it keeps the
    text and sends no call. Without tools it is content, in both."""
    answer = apply_answer(oracle, MISTRAL_SMALL, tools=tools)
    text = "[TOOL_CALLS]get_weather[ARGS]" + ARGS
    pieces = token_pieces(text, random.Random(5))
    steps, bad = compare_upstream(oracle, answer, text, pieces)   # upstream mode: the oracle's steps
    assert not bad, bad[:3]
    if not tools:
        assert steps[-1]["message"]["content"] == text
        assert stream_default(template_result(answer), text, pieces).message.content == text
        return
    assert "error" in steps[-1]
    with pytest.raises(ChatParseError):
        stream_upstream(template_result(answer), text, pieces)
    complete = stream_default(template_result(answer), text, pieces, tools=tools)
    assert complete.message.content == text and complete.message_calls == [] and complete.matches_message()
    recovery = complete.parser.recovery
    assert recovery is not None and recovery.parse_error and recovery.recovered == ()
    cut = stream_default(template_result(answer), text, pieces, tools=tools, stop_reason="max_tokens")
    assert cut.message_calls == [] and cut.matches_message()
