"""The autoparser route (analysis + generator) against upstream, on the branches the corpus misses.

The corpus's 19 scenarios never extract reasoning together with tools, never continue a message
that has reasoning, never combine a response format with tools, and never have a tool with more
than one required argument. Here templates chosen to cover every tool format the analysis finds
(JSON in a section or per call, in an array, content always wrapped; tags with JSON arguments, with
a call id; tagged arguments with and without name suffix, function close, section markers) are
applied with such requests, and the whole ``chat_apply`` answer must equal the oracle's:

* through the full route (llamact's own analysis, then the generator);
* with upstream's analysis injected (the oracle's ``analyze`` op), so that a difference is known to
  be the generator's.

Real templates reach only part of the generator (no vendored template has argument markers, a call
id without end marker, tagged arguments with a call id, a delimiter-style thought, ...), so the
oracle's ``autoparser_generate`` op also runs upstream's generator on synthetic analyses, and ours
must build the same parser, grammar and triggers from them.

Failures are compared too: upstream's "Unable to generate parser for this template..." text, with
the reason (a schema error: the same text; a template error: the same raised message, upstream's
Jinja trace aside).
"""

from __future__ import annotations

import copy
import functools

import pytest

import llamact.chat.autoparser as autoparser
from llamact.chat.autoparser import AutoparserError, apply_autoparser
from llamact.chat.autoparser.generator import generate_parser
from llamact.chat.autoparser.model import AutoparserAnalysis
from llamact.chat.messages import ChatMessage
from llamact.chat.oai import parse_messages
from llamact.chat.render import CONTINUATION_NONE, TemplateInputs
from llamact.chat.result import ChatTemplateResult
from llamact.chat.templates import load_chat_templates
from llamact.errors import LlamaException
from llamact.json_types import Json
from llamact.parity.apply_runner import apply_request
from llamact.parity.components import ORACLE_NOW
from llamact.parity.corpus import BOS_TOKEN, EOS_TOKEN
from llamact.parity.locate import find_llama_cpp
from llamact.parity.oracle import OracleClient, OracleError
from llamact.parity.scenarios import RESPONSE_SCHEMA, TOOLS, USER

pytestmark = pytest.mark.parity

FAILED = "Unable to generate parser for this template. Automatic parser generation failed: "

TEMPLATES = [
    "Qwen-Qwen3-0.6B",                                  # JSON per call, reasoning with newlines
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use",    # JSON array in a section, wrapped content, tools-only reasoning
    "Apriel-1.6-15b-Thinker-fixed",                     # reasoning start inside the generation prompt
    "meta-llama-Llama-3.1-8B-Instruct",                 # bare JSON calls, no marker: no lazy grammar
    "GLM-4.6",                                          # tagged arguments, name suffix
    "GLM-4.7-Flash",                                    # tagged arguments, no name suffix: atomic peek
    "ByteDance-Seed-OSS",                               # tagged arguments, function close
    "MiniMax-M2",                                       # tagged arguments in a section, no per-call marker
    "tencent-Hy3",                                      # tagged arguments, section and per-call markers
    "poolside-Laguna-XS.2",                             # tagged arguments, whitespace between tags tolerated
    "Mistral-Small-3.2-24B-Instruct-2506",              # JSON arguments after a call id
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",         # JSON arguments in a fenced block, section + per call
    "upstage-Solar-Open-100B",                          # JSON arguments, content always wrapped
    "HuggingFaceTB-SmolLM3-3B",                         # reasoning, no tool calls rendered
    "ibm-granite-granite-3.3-2B-Instruct",              # content wrapped with reasoning
]

# a tool with two required arguments (the tagged format's ordered required sequence) and an optional one
FLIGHT_TOOL: Json = {
    "type": "function",
    "function": {
        "name": "book_flight",
        "description": "Book a flight",
        "parameters": {
            "type": "object",
            "properties": {
                "origin": {"type": "string"},
                "passengers": {"type": "integer"},
                "date": {"type": "string"},
            },
            "required": ["origin", "passengers"],
        },
    },
}

REASONING_ONLY = {"role": "assistant", "content": "", "reasoning_content": "The user asks about Paris."}
REASONING_AND_CONTENT = {"role": "assistant", "content": "The weather in Paris is",
                         "reasoning_content": "Check the forecast."}


def _inputs(messages: list[Json], **options: Json) -> Json:
    out: Json = {"messages": copy.deepcopy(messages), "tools": [], "tool_choice": "auto",
                 "parallel_tool_calls": False, "reasoning_format": "deepseek", "enable_thinking": True,
                 "add_generation_prompt": True, "continue_final_message": False, "chat_template_kwargs": {}}
    out.update(copy.deepcopy(options))
    return out


SCENARIOS: dict[str, Json] = {
    "continue_reasoning": _inputs([USER, REASONING_ONLY], add_generation_prompt=False, continue_final_message=True),
    "continue_content_after_reasoning": _inputs([USER, REASONING_AND_CONTENT], add_generation_prompt=False,
                                                continue_final_message="content"),
    "continue_reasoning_explicit": _inputs([USER, REASONING_AND_CONTENT], add_generation_prompt=False,
                                           continue_final_message="reasoning_content"),
    "continue_with_tools": _inputs([USER, REASONING_AND_CONTENT], tools=TOOLS, add_generation_prompt=False,
                                   continue_final_message=True),
    # upstream joins the text parts with a blank line, none before the first non-empty text
    "continue_typed_content": _inputs([USER, {"role": "assistant", "content": [
        {"type": "text", "text": ""}, {"type": "text", "text": "Sunny"}, {"type": "text", "text": ""},
        {"type": "text", "text": "and warm"}]}], add_generation_prompt=False, continue_final_message="content"),
    "tools_extracting_reasoning": _inputs([USER], tools=TOOLS),
    "response_format_with_tools": _inputs([USER], tools=TOOLS, json_schema=RESPONSE_SCHEMA),
    "required_parallel_reasoning": _inputs([USER], tools=TOOLS, tool_choice="required", parallel_tool_calls=True),
    "two_required_arguments": _inputs([USER], tools=[FLIGHT_TOOL, *TOOLS], tool_choice="required",
                                      parallel_tool_calls=True),
    "two_required_arguments_auto": _inputs([USER], tools=[FLIGHT_TOOL], reasoning_format="none"),
    "thinking_off_with_tools": _inputs([USER], tools=TOOLS, enable_thinking=False),
}


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    templates = find_llama_cpp(None) / "models" / "templates"
    return {name: (templates / f"{name}.jinja").read_text(encoding="utf-8") for name in TEMPLATES}


def _request(source: str, inputs: Json) -> Json:
    return {"template": source, "bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN, "add_bos": False, "add_eos": False,
            "inputs": inputs}


def _check(expected: Json, request: Json) -> None:
    """llamact's ``chat_apply`` answer for ``request`` equals upstream's (an error: the same failure)."""
    if isinstance(expected, OracleError):
        with pytest.raises(LlamaException) as info:
            apply_request(request, ORACLE_NOW)
        _assert_same_failure(expected.message, info.value)
        return
    got = apply_request(request, ORACLE_NOW)
    for key in expected:
        assert got[key] == expected[key], key
    assert got == expected


def _assert_same_failure(upstream: str, raised: LlamaException) -> None:
    assert isinstance(raised, AutoparserError), raised
    assert upstream.startswith(FAILED)
    # a Jinja error inside carries upstream's location preamble too: the whole text is upstream's
    assert raised.message == upstream


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("template", TEMPLATES)
def test_route_equals_upstream(oracle: OracleClient, sources: dict[str, str], template: str, scenario: str) -> None:
    request = _request(sources[template], SCENARIOS[scenario])
    _check(oracle.request("chat_apply", **request), request)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("template", TEMPLATES)
def test_generator_on_upstreams_analysis(oracle: OracleClient, sources: dict[str, str], template: str,
                                         scenario: str, monkeypatch: pytest.MonkeyPatch) -> None:
    source = sources[template]
    analysis = oracle.request("analyze", template=source, bos_token=BOS_TOKEN, eos_token=EOS_TOKEN)
    assert not isinstance(analysis, OracleError), analysis
    injected = functools.partial(apply_autoparser, analysis=AutoparserAnalysis.from_json(analysis))
    monkeypatch.setattr(autoparser, "apply_autoparser", injected)
    request = _request(source, SCENARIOS[scenario])
    _check(oracle.request("chat_apply", **request), request)


BAD_SCHEMAS: dict[str, Json] = {
    "bad_min_length": {"type": "object", "properties": {"a": {"type": "string", "minLength": "x"}}},
    "dangling_ref": {"type": "object", "properties": {"a": {"$ref": "#/nope"}}, "required": ["a"]},
}


@pytest.mark.parametrize("schema", sorted(BAD_SCHEMAS))
@pytest.mark.parametrize("template", ["Qwen-Qwen3-0.6B", "GLM-4.6", "Mistral-Small-3.2-24B-Instruct-2506"])
def test_a_tool_schema_upstream_refuses_fails_with_upstreams_text(oracle: OracleClient, sources: dict[str, str],
                                                                  template: str, schema: str) -> None:
    tool = {"type": "function", "function": {"name": "f", "description": "", "parameters": BAD_SCHEMAS[schema]}}
    request = _request(sources[template], _inputs([USER], tools=[tool], reasoning_format="none"))
    expected = oracle.request("chat_apply", **request)
    assert isinstance(expected, OracleError)
    _check(expected, request)


def test_a_template_that_raises_fails_with_upstreams_reason(oracle: OracleClient, sources: dict[str, str]) -> None:
    messages = [USER, {"role": "user", "content": "Again?"}]  # Mistral insists on alternating roles
    request = _request(sources["Mistral-Small-3.2-24B-Instruct-2506"], _inputs(messages, reasoning_format="none"))
    expected = oracle.request("chat_apply", **request)
    assert isinstance(expected, OracleError) and "\nWhile executing " in expected.message
    _check(expected, request)
    with pytest.raises(AutoparserError) as info:
        apply_request(request, ORACLE_NOW)
    assert isinstance(info.value.__cause__, LlamaException)  # the template's own error stays reachable



# --- the generator on analyses no vendored template produces -----------------------------------
#
# Real templates reach only some of the generator's branches. The oracle's ``autoparser_generate``
# runs upstream's generator with any analysis; here each synthetic analysis below is given to both
# generators, on Qwen3's template (which renders tools, reasoning and continuations), and the
# answers must be equal.

SYNTHETIC_TEMPLATE = "Qwen-Qwen3-0.6B"
EXTRA_CONTEXT = {"datetime": "Jan 15 2026", "date_string": "15 Jan 2026"}
CAPS = {"supports_tool_calls": True, "supports_tools": True, "supports_parallel_tool_calls": True}


def _analysis(reasoning: Json = None, content: Json = None, complete: bool = True, **tools: Json) -> Json:
    return {"jinja_caps": CAPS, "reasoning": reasoning or {}, "content": content or {}, "tools": tools,
            "analysis_complete": complete, "preserved_tokens": ["<call>"], "additional_stops": ["</turn>"]}


THINK = {"mode": "TAG_BASED", "start": "<think>\n", "end": "\n</think>\n\n"}
SYNTHETIC: dict[str, Json] = {
    "delimiter_reasoning_openai_wrapper": _analysis(
        {"mode": "TAG_BASED", "start": "", "end": "</think>"},
        format={"mode": "JSON_NATIVE", "per_call_start": "<tool_call>\n", "per_call_end": "</tool_call>",
                "openai_wrapper_trigger": True}),
    "reasoning_without_end": _analysis(
        {"mode": "TOOLS_ONLY", "start": "<think>", "end": ""},
        format={"mode": "JSON_NATIVE", "section_start": "<calls>", "section_end": "</calls>"}),
    "json_function_field": _analysis(
        THINK, format={"mode": "JSON_NATIVE", "section_start": "<calls>", "section_end": "</calls>",
                       "function_field": "call", "id_field": "id", "tools_array_wrapped": True}),
    "json_wrapped_content": _analysis(
        THINK, {"mode": "ALWAYS_WRAPPED", "start": "<response>", "end": "</response>"},
        format={"mode": "JSON_NATIVE", "per_call_start": "<call>", "per_call_end": "</call>"}),
    "tag_json_call_id_before_args": _analysis(
        THINK, format={"mode": "TAG_WITH_JSON", "per_call_start": "<call>", "per_call_end": "</call>"},
        arguments={"start": "<args>", "end": "</args>"},
        call_id={"pos": "BETWEEN_FUNC_AND_ARGS", "prefix": "[ID]", "suffix": ""}),
    "tag_json_section_only": _analysis(
        format={"mode": "TAG_WITH_JSON", "section_start": "<calls>", "section_end": "</calls>"},
        function={"name_prefix": "<fn "}),
    "tag_json_section_without_end": _analysis(
        THINK, format={"mode": "TAG_WITH_JSON", "section_start": "<calls>", "per_call_start": "<call>",
                       "per_call_end": "</call>"},
        function={"name_prefix": "name=", "name_suffix": ":", "args_separator": "<sep>"}),
    "tagged_everything": _analysis(
        THINK, format={"mode": "TAG_WITH_TAGGED", "section_start": "<calls>", "per_call_start": "<call>",
                       "per_call_end": "</call>"},
        function={"name_prefix": "<fn=", "name_suffix": ">", "close": "</fn>"},
        arguments={"start": "<args>", "end": "</args>", "name_prefix": "<arg=", "name_suffix": ">",
                   "value_prefix": "", "value_suffix": "</arg>"},
        call_id={"pos": "BETWEEN_FUNC_AND_ARGS", "prefix": "[ID]", "suffix": "[/ID]"}),
    "tagged_section_tolerant": _analysis(
        THINK, format={"mode": "TAG_WITH_TAGGED", "section_start": "<calls>", "section_end": "</calls>"},
        function={"name_prefix": "<fn=", "args_separator": "|"},
        arguments={"name_prefix": "<k>", "name_suffix": "</k>", "value_prefix": "<v>", "value_suffix": "</v>",
                   "tolerate_intertag_whitespace": True}),
    "tagged_call_id_without_suffix": _analysis(
        format={"mode": "TAG_WITH_TAGGED", "per_call_start": "<call>", "per_call_end": "</call>"},
        arguments={"start": "{", "end": "}", "name_prefix": "<k>", "name_suffix": "</k>", "value_suffix": "</v>",
                   "tolerate_intertag_whitespace": True},
        call_id={"pos": "BETWEEN_FUNC_AND_ARGS", "prefix": "#", "suffix": ""}),
    "no_tool_format": _analysis(THINK, format={"mode": "NONE"}),
    "incomplete": _analysis(THINK, complete=False),
}

SYNTHETIC_PARAMS: dict[str, Json] = {
    "content": {"messages": [USER]},
    "tools_auto": {"messages": [USER], "tools": TOOLS},
    "tools_required_parallel": {"messages": [USER], "tools": [FLIGHT_TOOL, *TOOLS], "tool_choice": "required",
                                "parallel_tool_calls": True, "reasoning_format": "deepseek"},
    "tools_auto_parallel_reasoning": {"messages": [USER], "tools": [FLIGHT_TOOL], "parallel_tool_calls": True,
                                      "reasoning_format": "deepseek"},
    "response_format": {"messages": [USER], "tools": TOOLS, "json_schema": RESPONSE_SCHEMA,
                        "reasoning_format": "deepseek"},
    "continue_content": {"messages": [USER], "add_generation_prompt": False, "continue_final_message": "content",
                         "continue_msg": REASONING_AND_CONTENT, "reasoning_format": "deepseek"},
}


def _template_inputs(params: Json) -> TemplateInputs:
    cont = params.get("continue_final_message")
    return TemplateInputs(
        messages=copy.deepcopy(params["messages"]), tools=copy.deepcopy(params.get("tools")),
        tool_choice=params.get("tool_choice", "auto"), json_schema=copy.deepcopy(params.get("json_schema")),
        parallel_tool_calls=params.get("parallel_tool_calls", False),
        reasoning_format=params.get("reasoning_format", "none"), enable_thinking=params.get("enable_thinking", True),
        add_generation_prompt=params.get("add_generation_prompt", True),
        continue_final_message=cont or CONTINUATION_NONE,
        continue_msg=parse_messages([params["continue_msg"]])[0] if cont else ChatMessage(),
        now=ORACLE_NOW, extra_context=dict(EXTRA_CONTEXT))


@pytest.mark.parametrize("params", sorted(SYNTHETIC_PARAMS))
@pytest.mark.parametrize("analysis", sorted(SYNTHETIC))
def test_generator_on_synthetic_analyses(oracle: OracleClient, sources: dict[str, str], analysis: str,
                                         params: str) -> None:
    source = sources[SYNTHETIC_TEMPLATE]
    expected = oracle.request("autoparser_generate", template=source, bos_token=BOS_TOKEN, eos_token=EOS_TOKEN,
                              analysis=SYNTHETIC[analysis],
                              params={**SYNTHETIC_PARAMS[params], "extra_context": EXTRA_CONTEXT})
    tmpl = load_chat_templates(source, bos_token=BOS_TOKEN, eos_token=EOS_TOKEN).default
    inputs = _template_inputs(SYNTHETIC_PARAMS[params])
    if isinstance(expected, OracleError):
        with pytest.raises(LlamaException) as info:
            generate_parser(tmpl, inputs, AutoparserAnalysis.from_json(SYNTHETIC[analysis]))
        assert info.value.message == expected.message
        return
    got = ChatTemplateResult.from_params(
        generate_parser(tmpl, inputs, AutoparserAnalysis.from_json(SYNTHETIC[analysis])), "autoparser").to_json()
    for key in expected:
        assert got[key] == expected[key], key
