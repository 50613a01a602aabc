"""The apply pipeline's own behaviour against the oracle: template sources, request errors, the
clock, caching, and the caller's data left untouched.

Corpus-wide equality is the scoreboard's job (rows template_render and chat_apply); these tests
pin what the corpus does not reach: the template-set rules, each malformed request (upstream's
error text), deviations (the clock, a template that does not compile), and the cache.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from llamact.chat import ChatRequestError, apply_chat_template, apply_templates, chat_inputs, load_chat_templates
from llamact.chat import templates as templates_mod
from llamact.chat.templates import CHATML_TEMPLATE, ORIGIN_MODEL, ORIGIN_OVERRIDE, normalized_source
from llamact.errors import LlamaException
from llamact.jinja import JinjaRuntimeError, JinjaSyntaxError
from llamact.parity.apply_runner import apply_request, inputs_from_request
from llamact.parity.oracle import OracleClient, OracleError

pytestmark = pytest.mark.parity

TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"
QWEN3_CODER = (TEMPLATES / "Qwen3-Coder.jinja").read_text(encoding="utf-8")
USER = {"role": "user", "content": "What is the weather in Paris?"}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}


def _request(template: str, inputs: dict[str, Any], **tokens: Any) -> dict[str, Any]:
    return {"template": template, "bos_token": tokens.get("bos_token", "<s>"),
            "eos_token": tokens.get("eos_token", "</s>"), "add_bos": tokens.get("add_bos", False),
            "add_eos": tokens.get("add_eos", False), "inputs": inputs}


def _both(oracle: OracleClient, request: dict[str, Any], now: int | None = None) -> tuple[Any, Any]:
    """(oracle's answer, llamact's answer); errors as ("error", text)."""
    fields = dict(request, now=now) if now is not None else request
    expected = oracle.request("chat_apply", **fields)
    if isinstance(expected, OracleError):
        expected = ("error", expected.message)
    try:
        got = apply_request(request, now)
    except LlamaException as exc:
        got = ("error", exc.message)
    return expected, got


# -- request errors: upstream's reasons, word for word ---------------------------------------------

BAD_REQUESTS = {
    "missing role": {"messages": [{"content": "x"}]},
    "content of the wrong type": {"messages": [{"role": "user", "content": 5}]},
    "neither content nor tool calls": {"messages": [{"role": "user"}]},
    "content part without type": {"messages": [{"role": "user", "content": [{"text": "x"}]}]},
    "content part of an unsupported type": {"messages": [{"role": "user",
                                                          "content": [{"type": "image", "text": "x"}]}]},
    "role not a string": {"messages": [{"role": 3, "content": "x"}]},
    "tool call without type": {"messages": [USER, {"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}]},
    "tool call without name": {"messages": [USER, {"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"arguments": "{}"}}]}]},
    "tool call without arguments": {"messages": [USER, {"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": "f"}}]}]},
    "tool without a name": {"messages": [USER], "tools": [{"type": "function", "function": {"description": "x"}}]},
    "tool of another type": {"messages": [USER], "tools": [{"type": "retrieval"}]},
    "tools not an array": {"messages": [USER], "tools": {"a": 1}},
    "arguments that are not JSON (the template reads them as objects)": {"messages": [USER, {
        "role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": "{city: Paris}"}}]}]},
    "tools with a grammar": {"messages": [USER], "tools": [WEATHER], "grammar": 'root ::= "x"'},
    "unknown reasoning format": {"messages": [USER], "reasoning_format": "weird"},
    "unknown tool choice": {"messages": [USER], "tool_choice": "sometimes"},
}


@pytest.mark.parametrize("name", sorted(BAD_REQUESTS))
def test_bad_requests_fail_with_upstreams_reason(oracle: OracleClient, name: str) -> None:
    expected, got = _both(oracle, _request(QWEN3_CODER, BAD_REQUESTS[name]))
    assert expected[0] == "error", expected
    assert got == expected


def test_request_errors_are_typed() -> None:
    with pytest.raises(ChatRequestError, match="Missing 'role'"):
        apply_chat_template(QWEN3_CODER, [{"content": "x"}])
    with pytest.raises(ChatRequestError, match='"required" needs at least one tool'):
        apply_chat_template(QWEN3_CODER, [USER], tool_choice="required")
    with pytest.raises(ChatRequestError, match="Cannot continue an assistant message that contains tool calls"):
        apply_chat_template(QWEN3_CODER, [USER, {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}],
            tools=[WEATHER], continue_final_message=True)


def test_a_template_that_raises_names_its_source_and_keeps_upstreams_reason(oracle: OracleClient) -> None:
    template = "{{ raise_exception('Only user and assistant roles are supported!') }}{{ 'x' }}"
    templates = load_chat_templates(model_default=QWEN3_CODER.replace(
        "{%- for message in loop_messages %}", "{%- for message in loop_messages %}" + template, 1))
    with pytest.raises(JinjaRuntimeError) as info:
        apply_templates(templates, inputs_from_request({"messages": [USER]}, None))
    assert "Jinja Exception: Only user and assistant roles are supported!" in info.value.message
    assert info.value.source_name == ORIGIN_MODEL


def test_a_template_that_does_not_compile_names_its_source(oracle: OracleClient) -> None:
    # upstream rethrows a sliced std::exception here ("std::exception"): llamact says what is wrong and where
    expected = oracle.request("chat_apply", **_request("{% if %}", {"messages": [USER]}))
    assert isinstance(expected, OracleError)
    with pytest.raises(JinjaSyntaxError) as info:
        load_chat_templates("{% if %}", origin=ORIGIN_OVERRIDE)
    assert info.value.source_name == ORIGIN_OVERRIDE and info.value.line == 1


# -- template sources ------------------------------------------------------------------------------


def test_empty_or_chatml_default_falls_back_to_tool_use_then_chatml() -> None:
    assert load_chat_templates(model_default="chatml").default.source == normalized_source(CHATML_TEMPLATE)
    assert load_chat_templates(model_default="").default.source == normalized_source(CHATML_TEMPLATE)
    both = load_chat_templates(model_default="chatml", model_tool_use=QWEN3_CODER)
    assert both.default.source == normalized_source(QWEN3_CODER)
    assert not load_chat_templates(model_default=None).has_explicit_template


def test_the_tool_use_variant_serves_requests_with_tools() -> None:
    templates = load_chat_templates(model_default=CHATML_TEMPLATE, model_tool_use=QWEN3_CODER)
    assert templates.for_request(has_tools=False) is templates.default
    assert templates.for_request(has_tools=True) is templates.tool_use
    with_tools = apply_chat_template(templates, [USER], tools=[WEATHER])
    assert with_tools.family == "qwen3_coder_xml" and "get_weather" in with_tools.prompt


def test_a_broken_tool_use_variant_is_ignored_as_upstream_ignores_it() -> None:
    templates = load_chat_templates(model_default=QWEN3_CODER, model_tool_use="{% if %}")
    assert templates.tool_use is None
    assert apply_chat_template(templates, [USER], tools=[WEATHER]).family == "qwen3_coder_xml"


def test_a_template_name_is_rendered_as_jinja_like_upstream(oracle: OracleClient) -> None:
    # llama.cpp answers "mistral-v7-tekken" for some Mistral GGUFs without a template; upstream's
    # Jinja path takes that name as template source
    request = _request("mistral-v7-tekken", {"messages": [USER], "force_pure_content": True})
    expected, got = _both(oracle, request)
    assert got == expected and got["prompt"] == "mistral-v7-tekken"


def test_upstreams_source_patches_apply(oracle: OracleClient) -> None:
    source = (TEMPLATES / "openai-gpt-oss-120b.jinja").read_text(encoding="utf-8")
    assert "in message.content or" in source
    patched = load_chat_templates(source).default.source
    assert "in message.content or" not in patched and "{%- if false %}" in patched


def test_bos_and_eos_are_stripped_when_the_tokenizer_adds_them(oracle: OracleClient) -> None:
    template = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}"
    for add_bos in (False, True):
        for add_eos in (False, True):
            request = _request(template, {"messages": [USER], "force_pure_content": True},
                               add_bos=add_bos, add_eos=add_eos)
            expected, got = _both(oracle, request)
            assert got == expected


# -- the clock (docs/design.md deviation 6) ----------------------------------------------------------------


def test_template_now_fixes_strftime_and_the_date_variables(oracle: OracleClient) -> None:
    template = "{{ strftime_now('%Y-%m-%d %H:%M') }}|{{ datetime }}|{{ date_string }}|{{ messages[0].content }}"
    for now in (0, 1768478400, 1900000000):
        expected, got = _both(oracle, _request(template, {"messages": [USER], "force_pure_content": True}), now)
        assert got == expected


# -- caching and the caller's data -----------------------------------------------------------------


def test_a_second_request_recompiles_and_reprobes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    source = QWEN3_CODER + "{# cache probe #}"
    calls: list[str] = []
    real = templates_mod.template_caps
    monkeypatch.setattr(templates_mod, "template_caps", lambda src: calls.append(src) or real(src))
    for _ in range(3):
        apply_chat_template(source, [USER], tools=[WEATHER])
    assert calls == [source]


def test_the_callers_messages_and_tools_are_left_untouched() -> None:
    call = {"type": "function", "id": "c1", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    messages = [{"role": "developer", "content": "Be brief."}, USER,
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]
    tools = [WEATHER]
    kwargs = {"enable_thinking": False, "nested": {"a": [1, 2]}}
    before = copy.deepcopy((messages, tools, kwargs))
    # a template that rewrites everything it is given (only for this request: upstream's caps probes
    # read their own messages back, and a template that empties them cannot be loaded at all), and
    # one without a system role (the merge workaround)
    hostile = ("{% if messages[0].content == 'Be brief.' %}"
               "{% set _ = messages.append({'role': 'system', 'content': 'injected'}) %}"
               "{% set m = messages[0] %}{% set m.content = 'rewritten' %}{% set _ = tools.pop() %}"
               "{% set _ = nested.a.append(3) %}{% endif %}{% for m in messages %}{{ m.role }}{% endfor %}")
    no_system = ("{% if messages[0].role == 'system' %}{{ raise_exception('no system') }}{% endif %}"
                 "{{ messages|length }}")
    for source in (QWEN3_CODER, hostile, no_system):
        inputs = chat_inputs(messages, tools=tools, chat_template_kwargs=kwargs)
        apply_templates(load_chat_templates(source), replace(inputs, force_pure_content=True))
        assert (messages, tools, kwargs) == before


def test_a_template_that_breaks_the_caps_probes_fails_to_load_like_upstream(oracle: OracleClient) -> None:
    template = "{% set _ = messages.pop() %}{{ messages|length }}"
    assert isinstance(oracle.caps(template), OracleError)
    with pytest.raises(JinjaRuntimeError, match="caps probing failed"):
        load_chat_templates(template)
