"""docs/design.md deviations 2-4, each shown on both sides: the same token stream fed to a
ChatStreamParser with ``upstream_compat=True`` (equal to the oracle, step by step) and in the
default mode (the deviation).

* 2: Qwen XML tool calls validated against the tools (Qwen3-Coder, Qwen 3.5, Nemotron 3 Nano,
  StepFun 3.5 -- the specialized family -- and Seed-OSS, an autoparser template with the layout);
* 3: Hermes / Qwen 2.5 double-brace calls (Qwen 2.5, Qwen 3, Hermes 2 Pro: autoparser templates);
* 4: reasoning trimmed per thought, escaped newlines decoded (not for the Qwen3-Coder XML family).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from stream_checks import apply_answer, compare_upstream, stream_default, stream_upstream

from llamact.chat.result import ChatTemplateResult
from llamact.parity.oracle import OracleClient
from llamact.parity.stream_replay import template_result, token_pieces

pytestmark = pytest.mark.parity

WEATHER: dict[str, Any] = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1},
                   "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"]}}}


def _upstream_final(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The oracle's final step: {"error": ...} or the final message."""
    final = steps[-1]
    assert not final["is_partial"]
    return {"error": final["error"]} if "error" in final else final["message"]


def _both(oracle: OracleClient, answer: Any, text: str, tools: list[Any], seed: int = 0) -> tuple[Any, Any]:
    """Upstream mode checked against the oracle on token pieces; returns (oracle's final, default run)."""
    pieces = token_pieces(text, random.Random(seed))
    steps, bad = compare_upstream(oracle, answer, text, pieces)
    assert not bad, bad[:3]
    default = stream_default(template_result(answer), text, pieces, tools=tools)
    assert default.matches_message(), (default.content, default.message.content)
    assert default.early_calls == 0  # calls come whole, at the end
    return _upstream_final(steps), default


# -- deviation 2: Qwen XML ------------------------------------------------------------------------

XML_TEMPLATES = {
    # template: (envelope, value newlines, text before the calls)
    "Qwen3-Coder": ("tool_call", True, "Hi\n"),
    "Qwen3.5-4B": ("tool_call", True, "Plan.\n</think>\n\nHi\n"),
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": ("tool_call", True, "Plan.\n</think>\nHi\n"),
    "StepFun3.5-Flash": ("tool_call", True, "Plan.\n</think>\nHi\n"),
    "ByteDance-Seed-OSS": ("seed:tool_call", False, "Hi\n"),
}
XML_CASES: dict[str, tuple[str, list[tuple[str, str]], str | None]] = {
    # case: (function, parameters, the valid call's arguments or None)
    "string_stays_string": ("get_weather", [("city", "123")], '{"city":"123"}'),
    "typed_values": ("get_weather", [("city", "Paris"), ("days", "3"), ("unit", "c")],
                     '{"city":"Paris","days":3,"unit":"c"}'),
    "optional_before_required": ("get_weather", [("days", "2"), ("city", "Paris")], '{"days":2,"city":"Paris"}'),
    "unknown_function": ("get_time", [("city", "Paris")], None),
    "unknown_parameter": ("get_weather", [("city", "Paris"), ("town", "Lyon")], None),
    "duplicate_parameter": ("get_weather", [("city", "Paris"), ("city", "Rome")], None),
    "missing_required": ("get_weather", [("days", "3")], None),
    "invalid_type": ("get_weather", [("city", "Paris"), ("days", "three")], None),
    "below_minimum": ("get_weather", [("city", "Paris"), ("days", "0")], None),
    "not_in_enum": ("get_weather", [("city", "Paris"), ("unit", "kelvin")], None),
}


def xml_call(template: str, name: str, params: list[tuple[str, str]]) -> tuple[str, str]:
    """(text before the calls, the call's envelope) as the template's model writes them."""
    envelope, newlines, before = XML_TEMPLATES[template]
    nl = "\n" if newlines else ""
    body = "".join(f"<parameter={k}>{nl}{v}{nl}</parameter>\n" for k, v in params)
    return before, f"<{envelope}>\n<function={name}>\n{body}</function>\n</{envelope}>"


@pytest.mark.parametrize("case", XML_CASES)
@pytest.mark.parametrize("template", XML_TEMPLATES)
def test_qwen_xml_calls_validated(oracle: OracleClient, template: str, case: str) -> None:
    name, params, arguments = XML_CASES[case]
    answer = apply_answer(oracle, template, tools=[WEATHER])
    before, envelope = xml_call(template, name, params)
    upstream, default = _both(oracle, answer, before + envelope, [WEATHER])
    if arguments is not None:
        assert default.message_calls == [(name, arguments)]
        assert default.ids == ["call_0"]
        if "error" not in upstream and upstream["tool_calls"]:  # where upstream finds the call, the same one
            assert [(c["name"], c["arguments"]) for c in upstream["tool_calls"]] == default.message_calls
    else:
        # default: no callable call, the envelope stays content
        assert default.message_calls == []
        assert default.message.content.endswith(envelope)
        # upstream: a parse error, a call the schema forbids, or the envelope's text gone
        assert ("error" in upstream or upstream["tool_calls"]
                or envelope not in upstream["content"]), upstream
        assert default.parser.finish_reason == "stop"


def test_qwen_xml_upstream_differences_are_real(oracle: OracleClient) -> None:
    """The cases above differ from upstream as documented: Qwen3-Coder drops an unknown call's text,
    Seed-OSS fails to parse it, and both accept a value the schema forbids."""
    answer = apply_answer(oracle, "Qwen3-Coder", tools=[WEATHER])
    before, envelope = xml_call("Qwen3-Coder", "get_time", [("city", "Paris")])
    upstream, _ = _both(oracle, answer, before + envelope, [WEATHER])
    assert upstream["content"] == "Hi\n" and upstream["tool_calls"] == []
    before, envelope = xml_call("Qwen3-Coder", "get_weather", [("city", "Paris"), ("days", "0")])
    upstream, _ = _both(oracle, answer, before + envelope, [WEATHER])
    assert [c["arguments"] for c in upstream["tool_calls"]] == ['{"city":"Paris","days":0}']
    answer = apply_answer(oracle, "ByteDance-Seed-OSS", tools=[WEATHER])
    before, envelope = xml_call("ByteDance-Seed-OSS", "get_time", [("city", "Paris")])
    upstream, _ = _both(oracle, answer, before + envelope, [WEATHER])
    assert "error" in upstream


@pytest.mark.parametrize("template", XML_TEMPLATES)
def test_qwen_xml_parallel_calls_keep_order_and_content(oracle: OracleClient, template: str) -> None:
    answer = apply_answer(oracle, template, tools=[WEATHER], parallel_tool_calls=True)
    before, good = xml_call(template, "get_weather", [("city", "Paris")])
    _, bad = xml_call(template, "get_time", [("city", "Rome")])
    _, good2 = xml_call(template, "get_weather", [("city", "Oslo"), ("days", "2")])
    _, default = _both(oracle, answer, before + good + "\n" + bad + "\n" + good2, [WEATHER])
    assert default.message_calls == [("get_weather", '{"city":"Paris"}'), ("get_weather", '{"city":"Oslo","days":2}')]
    assert default.ids == ["call_0", "call_1"]
    assert bad in default.message.content and good not in default.message.content


@pytest.mark.parametrize("template", ["Qwen3-Coder", "ByteDance-Seed-OSS"])
def test_qwen_xml_python_literals_as_the_templates_render_them(oracle: OracleClient, template: str) -> None:
    """The Qwen templates render a boolean as ``True`` and Seed-OSS an object with single quotes:
    upstream's parse refuses its own template's rendering (the corpus' typed_call); validated, the
    call comes through as JSON."""
    tool = {"type": "function", "function": {"name": "calc", "parameters": {"type": "object", "properties": {
        "exact": {"type": "boolean"}, "options": {"type": "object"}}, "required": ["exact"]}}}
    answer = apply_answer(oracle, template, tools=[tool])
    before, envelope = xml_call(template, "calc", [("exact", "True"), ("options", "{'mode': 'fast'}")])
    upstream, default = _both(oracle, answer, before + envelope, [tool])
    assert "error" in upstream or upstream["tool_calls"] == []
    assert default.message_calls == [("calc", '{"exact":true,"options":{"mode": "fast"}}')]


def test_qwen_xml_without_tools_keeps_upstream_behaviour(oracle: OracleClient) -> None:
    """No tools given to the stream: no validation, the calls are upstream's."""
    answer = apply_answer(oracle, "Qwen3-Coder", tools=[WEATHER])
    before, envelope = xml_call("Qwen3-Coder", "get_weather", [("city", "Paris"), ("days", "0")])
    text = before + envelope
    upstream, _ = _both(oracle, answer, text, [WEATHER])
    schema_free = stream_default(template_result(answer), text, tools=[])
    assert schema_free.message_calls == [(c["name"], c["arguments"]) for c in upstream["tool_calls"]]
    assert schema_free.message_calls  # the call the schema forbids is there, as upstream's


# -- deviation 3: double braces -------------------------------------------------------------------

HERMES_TEMPLATES = ["Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use"]
CALL = '"name": "get_weather", "arguments": {"city": "Paris"}'


def braced(opening: int, closing: int, call: str = CALL) -> str:
    """The call object written with ``opening`` braces before it and ``closing`` after it."""
    return "{" * opening + call + "}" * closing


DOUBLE_BRACES = {
    "double": "Hi\n<tool_call>\n" + braced(2, 2) + "\n</tool_call>",
    "fewer_closing": "Hi\n<tool_call>\n" + braced(2, 1) + "\n</tool_call>",
    "more_closing": "Hi\n<tool_call>\n" + braced(1, 3) + "\n</tool_call>",
    "no_newlines": "Hi\n<tool_call>" + braced(2, 2) + "</tool_call>",
    "spaced": "Hi\n<tool_call>\n { " + braced(1, 1) + " } \n</tool_call>",
}


@pytest.mark.parametrize("case", DOUBLE_BRACES)
@pytest.mark.parametrize("template", HERMES_TEMPLATES)
def test_double_brace_calls_are_extracted(oracle: OracleClient, template: str, case: str) -> None:
    answer = apply_answer(oracle, template, tools=[WEATHER])
    upstream, default = _both(oracle, answer, DOUBLE_BRACES[case], [WEATHER])
    assert "error" in upstream or upstream["tool_calls"] == []  # upstream: no call
    assert default.message_calls == [("get_weather", '{"city": "Paris"}')]
    assert default.message.content == "Hi\n"  # the envelope leaves no content
    assert default.parser.finish_reason == "tool_calls"


@pytest.mark.parametrize("template", HERMES_TEMPLATES)
def test_double_braces_with_other_text_stay_content(oracle: OracleClient, template: str) -> None:
    answer = apply_answer(oracle, template, tools=[WEATHER])
    envelope = "<tool_call>\n" + braced(2, 1) + " and then}\n</tool_call>"
    upstream, default = _both(oracle, answer, "Hi\n" + envelope, [WEATHER])
    assert "error" in upstream or upstream["tool_calls"] == []
    assert default.message_calls == []
    assert default.message.content == "Hi\n" + envelope


STRANDED = "<tool_call>\n" + braced(2, 2) + " and then\n</tool_call>"   # other text after the call
GOOD = "<tool_call>\n" + braced(2, 2) + "\n</tool_call>"
IN_ORDER = {
    # case: (output, the final content, the calls)
    "between_texts": ("Before.\n" + STRANDED + "\nAfter.", "Before.\n" + STRANDED + "\nAfter.", 0),
    "alone": (STRANDED, STRANDED, 0),
    "two_between_texts": ("A " + STRANDED + " B " + STRANDED + " C", "A " + STRANDED + " B " + STRANDED + " C", 0),
    "before_a_call": ("Hi\n" + STRANDED + "\n" + GOOD, "Hi\n" + STRANDED + "\n", 1),
    "before_a_single_brace_call": ("Hi\n" + STRANDED + "\n<tool_call>\n" + braced(1, 1) + "\n</tool_call>",
                                   "Hi\n" + STRANDED + "\n", 1),
    "after_a_call": (GOOD + "\n" + STRANDED, STRANDED, 1),   # upstream's parse has no content after a call
}


@pytest.mark.parametrize("case", IN_ORDER)
@pytest.mark.parametrize("template", HERMES_TEMPLATES)
def test_a_double_brace_envelope_that_stays_content_keeps_its_place(oracle: OracleClient, template: str,
                                                                    case: str) -> None:
    """The specification: a double-brace envelope with other text after the call "stays in content",
    and content keeps its order: the text that followed the envelope comes after it, not before."""
    answer = apply_answer(oracle, template, tools=[WEATHER], parallel_tool_calls=True)
    output, content, calls = IN_ORDER[case]
    upstream, default = _both(oracle, answer, output, [WEATHER])
    assert "error" in upstream or upstream["tool_calls"] == [] or case.startswith("before_a_single")
    assert default.message.content == content
    assert default.message_calls == [("get_weather", '{"city": "Paris"}')] * calls


def test_the_placeholder_is_one_the_output_does_not_hold(oracle: OracleClient) -> None:
    """The envelope is put back for a private-use character the parse keeps in its place; an output
    that holds the first such characters itself gets another one, and its own are kept."""
    answer = apply_answer(oracle, "Qwen-Qwen2.5-7B-Instruct", tools=[WEATHER])
    own = "".join(map(chr, range(0xE000, 0xE003)))
    output = own + " Before.\n" + STRANDED + "\nAfter. " + own
    _, default = _both(oracle, answer, output, [WEATHER])
    assert default.message.content == output and default.message_calls == []


@pytest.mark.parametrize("template", HERMES_TEMPLATES)
def test_double_brace_parallel_calls(oracle: OracleClient, template: str) -> None:
    answer = apply_answer(oracle, template, tools=[WEATHER], parallel_tool_calls=True)
    text = ("<tool_call>\n" + braced(2, 2) + "\n</tool_call>\n"
            "<tool_call>\n" + braced(2, 2, CALL.replace("Paris", "Rome")) + "\n</tool_call>")
    upstream, default = _both(oracle, answer, text, [WEATHER])
    assert "error" in upstream
    assert default.message_calls == [("get_weather", '{"city": "Paris"}'), ("get_weather", '{"city": "Rome"}')]


@pytest.mark.parametrize("template", HERMES_TEMPLATES)
def test_single_braces_are_upstreams(oracle: OracleClient, template: str) -> None:
    answer = apply_answer(oracle, template, tools=[WEATHER])
    upstream, default = _both(oracle, answer, "Hi\n<tool_call>\n" + braced(1, 1) + "\n</tool_call>", [WEATHER])
    assert default.message_calls == [(c["name"], c["arguments"]) for c in upstream["tool_calls"]]
    assert default.message.content == upstream["content"]


# -- deviation 4: reasoning per thought -----------------------------------------------------------


def _reasoning_both(oracle: OracleClient, template: str, text: str, pieces: list[str] | None = None,
                    **inputs: Any) -> tuple[Any, Any, ChatTemplateResult]:
    answer = apply_answer(oracle, template, **inputs)
    pieces = pieces or token_pieces(text, random.Random(1))
    steps, bad = compare_upstream(oracle, answer, text, pieces)
    assert not bad, bad[:3]
    result = template_result(answer)
    default = stream_default(result, text, pieces)
    assert default.matches_message()
    return _upstream_final(steps), default, result


def test_thought_is_trimmed(oracle: OracleClient) -> None:
    upstream, default, result = _reasoning_both(oracle, "Qwen-Qwen3-0.6B", "<think>\nPlan it.\n</think>\n\nHi there.")
    assert upstream["reasoning_content"] == "Plan it.\n"
    assert default.message.reasoning_content == "Plan it."
    assert default.message.content == upstream["content"] == "Hi there."
    # upstream mode streams the newline; the default stream never sends it
    assert stream_upstream(result, "<think>\nPlan it.\n</think>\n\nHi there.",
                           ["<think>\nPlan", " it.\n", "</think>\n\nHi", " there."]).thinking == "Plan it.\n"


@pytest.mark.parametrize(("template", "opening"), [("Qwen-Qwen3-0.6B", "<think>"), ("GLM-4.6", "<think>"),
                                                   ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "")])  # forced open
def test_escaped_newlines_in_reasoning_are_decoded(oracle: OracleClient, template: str, opening: str) -> None:
    pieces = [opening + "Line one\\", "nLine two\\r\\", "nLine three</think>", "Done."]
    upstream, default, _ = _reasoning_both(oracle, template, "".join(pieces), pieces)
    assert "\\n" in upstream["reasoning_content"]
    assert default.message.reasoning_content == "Line one\nLine two\r\nLine three"
    assert default.message.content == upstream["content"]


@pytest.mark.parametrize("template", ["Qwen3.5-4B", "Qwen3-Coder"])
def test_qwen3_coder_family_keeps_escapes(oracle: OracleClient, template: str) -> None:
    """Qwen3-Coder XML's reasoning keeps an escaped newline, as upstream; it is still trimmed."""
    text = "Code: print('a\\nb')\n</think>\nDone." if template == "Qwen3.5-4B" else "Code: print('a\\nb')  "
    upstream, default, _ = _reasoning_both(oracle, template, text, tools=[WEATHER])
    if template == "Qwen3.5-4B":
        assert upstream["reasoning_content"] == "Code: print('a\\nb')\n"
        assert default.message.reasoning_content == "Code: print('a\\nb')"
    else:  # no reasoning in Qwen3-Coder: the content is upstream's
        assert default.message.content == upstream["content"]


# templates whose generation prompt opens the thought (``...<think>\n``), with and without tool layouts
FORCED_OPEN = ["deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "Qwen3.5-4B", "MiniMax-M2",
               "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"]
REPEATED_START = {
    # case: (output, the reasoning of the default mode)
    "repeated": ("<think>\nPlan.\n</think>\nAnswer.", "Plan."),
    "after_whitespace": ("\n <think>Plan.</think>\nAnswer.", "Plan."),
    "split_over_tokens": ("<th|ink>|\nPl|an.\n</think>\nAnswer.", "Plan."),
    "not_the_tag": ("<thinking> Plan.\n</think>\nAnswer.", "<thinking> Plan."),
    "not_at_the_start": ("Plan <think> more.\n</think>\nAnswer.", "Plan <think> more."),
}


@pytest.mark.parametrize("tools", [[], [WEATHER]], ids=["no_tools", "tools"])
@pytest.mark.parametrize("case", REPEATED_START)
@pytest.mark.parametrize("template", FORCED_OPEN)
def test_a_start_tag_repeated_at_the_start_of_a_forced_open_thought_is_dropped(
        oracle: OracleClient, template: str, case: str, tools: list[Any]) -> None:
    """The specification: "a start tag the model repeats at the start of a forced-open thought is
    dropped, as in the parse", with or without tools. Upstream keeps it in the reasoning; the
    default stream never sends it, so what is streamed still equals the final message."""
    answer = apply_answer(oracle, template, tools=tools)
    assert answer["generation_prompt"].rstrip().endswith("<think>")   # the prompt opened the thought
    output, reasoning = REPEATED_START[case]
    pieces = output.split("|") if "|" in output else token_pieces(output, random.Random(3))
    text = "".join(pieces)
    steps, bad = compare_upstream(oracle, answer, text, pieces)
    assert not bad, bad[:3]
    upstream = _upstream_final(steps)
    default = stream_default(template_result(answer), text, pieces, tools=tools)
    assert default.matches_message(), (default.thinking, default.message.reasoning_content)
    assert default.message.reasoning_content == reasoning
    assert default.message.content == upstream["content"] and default.message_calls == []
    if case in ("repeated", "after_whitespace", "split_over_tokens"):
        assert upstream["reasoning_content"].lstrip().startswith("<think>")   # upstream keeps the repeated tag
    else:
        assert upstream["reasoning_content"].strip() == reasoning   # anything else is upstream's, trimmed


def test_a_start_tag_is_dropped_only_from_a_thought_the_prompt_opened(oracle: OracleClient) -> None:
    """Qwen 3's generation prompt opens no thought: its parse reads the first tag, and a second one
    is the thought's text, in upstream's reasoning and in the default mode's alike."""
    upstream, default, _ = _reasoning_both(oracle, "Qwen-Qwen3-0.6B", "<think><think>\nPlan.\n</think>\nAnswer.")
    assert upstream["reasoning_content"] == "<think>\nPlan.\n"
    assert default.message.reasoning_content == "<think>\nPlan."


def test_each_thought_is_trimmed_and_separated(oracle: OracleClient) -> None:
    text = ("<|channel|>analysis<|message|>First thought. <|end|><|start|>assistant<|channel|>analysis<|message|>"
            " Second one.\n<|end|><|start|>assistant<|channel|>final<|message|>Done.")
    upstream, default, _ = _reasoning_both(oracle, "openai-gpt-oss-120b", text)
    assert upstream["reasoning_content"] == "First thought.  Second one.\n"
    assert default.message.reasoning_content == "First thought.\n\nSecond one."
    assert default.message.content == upstream["content"] == "Done."
