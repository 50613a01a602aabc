"""docs/design.md deviation 17: calls a model wrote outside its template's envelope, or malformed,
recovered when they validate against their tool; a final parse that fails answered, not raised.

One test per rule (its name is what ``llamact.recovered`` lists), through ``ChatStreamParser`` with
the Qwen 2.5 template (Hermes envelopes, the template Qwen2.5-Coder ships) in random token splits:
the streamed content equals the final content, the call comes out, upstream mode leaves it as
content or fails. Then what must not be recovered, and the readers beneath (no model, no oracle:
the parser is built from the vendored template).
"""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamact.chat import apply_chat_template
from llamact.chat.messages import ChatMessage
from llamact.chat.oai import parse_tools
from llamact.chat.output_parser import ChatParseError
from llamact.chat.recovery import CallReader, ContentScan, rules
from llamact.chat.recovery.jsonish import Brackets, loads_lenient, python_calls
from llamact.chat.result import ChatTemplateResult
from llamact.chat.streaming import ChatStreamParser
from llamact.parity.stream_replay import token_pieces

TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"
WEATHER: dict[str, Any] = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"],
    "additionalProperties": False}}}
AREA: dict[str, Any] = {"type": "function", "function": {"name": "calculate_triangle_area", "parameters": {
    "type": "object", "properties": {"base": {"type": "integer"}, "height": {"type": "integer"},
                                     "unit": {"type": "string"}}, "required": ["base", "height"]}}}
TOOLS = [WEATHER, AREA]
PARIS = ("get_weather", {"city": "Paris"})
ASK = [{"role": "user", "content": "Weather in Paris?"}]


@cache
def qwen25(tool_choice: str = "auto") -> ChatTemplateResult:
    source = (TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8")
    return apply_chat_template(source, ASK, tools=TOOLS, tool_choice=tool_choice)


def run(text: str, *, tool_choice: str = "auto", named: str | None = None, seed: int = 0,
        upstream: bool = False, stop: str = "eog") -> tuple[ChatStreamParser, str]:
    """``text`` streamed in token-sized pieces: the parser after finish, and the content it sent."""
    parser = ChatStreamParser(qwen25("required" if named else tool_choice), tools=TOOLS, tool_choice=tool_choice,
                              named_tool=named, upstream_compat=upstream)
    sent = [d for piece in token_pieces(text, random.Random(seed)) for d in parser.feed(piece)]
    sent += parser.finish(stop)
    return parser, "".join(d.content for d in sent)


def calls(parser: ChatStreamParser) -> list[tuple[str, Any]]:
    return [(c.name, json.loads(c.arguments)) for c in parser.message.tool_calls]


def recovered(text: str, expected_calls: list[tuple[str, Any]], expected_rules: tuple[str, ...], content: str = "",
              **kwargs: Any) -> ChatStreamParser:
    """The default stream reads ``expected_calls`` from ``text`` with ``expected_rules``, in any
    token split, its streamed content equal to its final ``content``."""
    for seed in range(6):
        parser, sent = run(text, seed=seed, **kwargs)
        assert calls(parser) == expected_calls, (seed, parser.message)
        assert parser.recovery is not None and parser.recovery.recovered == expected_rules, parser.recovery
        assert sent == parser.message.content == content, (seed, sent)
        assert parser.finish_reason == "tool_calls" and not parser.diverged
        assert all(c.id for c in parser.message.tool_calls)
    return parser


def upstream_fails_or_keeps_it_as_text(text: str, **kwargs: Any) -> None:
    """What llama-server does with ``text``: its final parse fails, or the call stays text."""
    try:
        parser, _ = run(text, upstream=True, **kwargs)
    except ChatParseError:
        return
    assert parser.message.tool_calls == [] or calls(parser) != [PARIS], parser.message


# -- each rule --------------------------------------------------------------------------------------

FENCED = ('Sure, here it is:\n```json\n{\n  "name": "get_weather",\n  "arguments": {"city": "Paris"}\n}\n```\n'
          'Anything else?')


def test_fenced_block() -> None:
    """The big one: Qwen2.5-Coder writes ```json {"name": ..., "arguments": ...} ``` (issue 43)."""
    recovered(FENCED, [PARIS], (rules.FENCED_BLOCK,), "Sure, here it is:\nAnything else?")
    upstream_fails_or_keeps_it_as_text(FENCED)
    parser, _ = run(FENCED, upstream=True)
    assert parser.message.content == FENCED and parser.finish_reason == "stop"
    # other fence spellings (no language, tool_call), several calls
    for body in ('```\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
                 '```tool_call\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'):
        recovered(body, [PARIS], (rules.FENCED_BLOCK,))
    two = ('```json\n[{"name": "get_weather", "arguments": {"city": "Paris"}},\n'
           ' {"name": "get_weather", "arguments": {"city": "Rome"}}]\n```\n\n'
           '```json\n{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}\n```')
    recovered(two, [PARIS, ("get_weather", {"city": "Rome"}), ("calculate_triangle_area", {"base": 10, "height": 5})],
              (rules.FENCED_BLOCK,))


def test_bare_json() -> None:
    text = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    recovered(text, [PARIS], (rules.BARE_JSON,))
    upstream_fails_or_keeps_it_as_text(text)
    recovered('I will check.\n  {"name": "get_weather",\n   "arguments": {"city": "Paris"}}\n\nOne moment.', [PARIS],
              (rules.BARE_JSON,), "I will check.\nOne moment.")


def test_inline_json_only_when_a_call_is_required() -> None:
    text = 'Calling get_weather now: {"name": "get_weather", "arguments": {"city": "Paris"}} as asked.'
    recovered(text, [PARIS], (rules.INLINE_JSON,), "Calling get_weather now: as asked.", tool_choice="required")
    recovered(text, [PARIS], (rules.INLINE_JSON,), "Calling get_weather now: as asked.", named="get_weather")
    parser, sent = run(text)   # "auto": JSON inside prose is prose
    assert parser.message.content == sent == text and parser.recovery is None


def test_python_call() -> None:
    recovered('get_weather(city="Paris")', [PARIS], (rules.PYTHON_CALL,))
    recovered("[get_weather(city='Paris'), calculate_triangle_area(10, 5)]",
              [PARIS, ("calculate_triangle_area", {"base": 10, "height": 5})], (rules.PYTHON_CALL,))
    recovered('```python\nget_weather(city="Paris")\ncalculate_triangle_area(base=3, height=4, unit="cm")\n```',
              [PARIS, ("calculate_triangle_area", {"base": 3, "height": 4, "unit": "cm"})],
              (rules.FENCED_BLOCK, rules.PYTHON_CALL))
    recovered('<tool_call>\nget_weather(city="Paris")\n</tool_call>', [PARIS], (rules.PYTHON_CALL,))
    upstream_fails_or_keeps_it_as_text('<tool_call>\nget_weather(city="Paris")\n</tool_call>')


def test_single_quotes() -> None:
    text = "<tool_call>\n{'name': 'get_weather', 'arguments': {'city': 'Paris'}}\n</tool_call>"
    recovered(text, [PARIS], (rules.SINGLE_QUOTES,))
    upstream_fails_or_keeps_it_as_text(text)
    parser, _ = run("```json\n{'name': 'get_weather', 'arguments': {'city': 'Paris', 'days': True}}\n```")
    assert parser.message.tool_calls == []   # True is a boolean, days an integer: not a valid call


def test_trailing_comma() -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris",},}\n</tool_call>'
    recovered(text, [PARIS], (rules.TRAILING_COMMA,))
    upstream_fails_or_keeps_it_as_text(text)


def test_arguments_string() -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}\n</tool_call>'
    recovered(text, [PARIS], (rules.ARGUMENTS_STRING,))
    parser, _ = run(text, upstream=True)   # upstream's parse reads the call with no arguments at all
    assert [(c.name, c.arguments) for c in parser.message.tool_calls] == [("get_weather", "{}")]


def test_missing_close() -> None:
    text = "<tool_call>\n{'name': 'get_weather', 'arguments': {'city': 'Paris'}}"
    recovered(text, [PARIS], (rules.SINGLE_QUOTES, rules.MISSING_CLOSE))
    upstream_fails_or_keeps_it_as_text(text)
    recovered('```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n', [PARIS],
              (rules.FENCED_BLOCK, rules.MISSING_CLOSE))


@pytest.mark.parametrize("body", [
    '{"function": "get_weather", "parameters": {"city": "Paris"}}',
    '{"tool": "get_weather", "args": {"city": "Paris"}}',
    '{"tool_name": "get_weather", "input": {"city": "Paris"}}',
    '{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}',
    '{"get_weather": {"city": "Paris"}}',
])
def test_key_variants(body: str) -> None:
    text = f"<tool_call>\n{body}\n</tool_call>"
    recovered(text, [PARIS], (rules.KEY_VARIANTS,))
    upstream_fails_or_keeps_it_as_text(text)


def test_name_variant() -> None:
    """BFCL offers ``prob_dist.binomial`` as ``prob_dist_binomial`` and the model writes the dotted name
    (issue 43: 4 of 40 calls): a name that is one tool's once separators and case are set aside."""
    fenced = '```json\n{"name": "get.weather", "arguments": {"city": "Paris"}}\n```'
    recovered(fenced, [PARIS], (rules.FENCED_BLOCK, rules.NAME_VARIANT))
    upstream_fails_or_keeps_it_as_text(fenced)
    envelope = '<tool_call>\n{"name": "Get-Weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    recovered(envelope, [PARIS], (rules.NAME_VARIANT,))
    upstream_fails_or_keeps_it_as_text(envelope)
    recovered('get.weather(city="Paris")', [PARIS], (rules.PYTHON_CALL, rules.NAME_VARIANT))
    recovered('<tool_call>\n{"GET_WEATHER": {"city": "Paris"}}\n</tool_call>', [PARIS],
              (rules.KEY_VARIANTS, rules.NAME_VARIANT))
    # still validated against that tool's schema; no separator invented or dropped
    for text in ('```json\n{"name": "get.weather", "arguments": {"town": "Paris"}}\n```',
                 '```json\n{"name": "getweather", "arguments": {"city": "Paris"}}\n```',
                 '```json\n{"name": "get..weather", "arguments": {"city": "Paris"}}\n```'):
        parser, sent = run(text)
        assert parser.message.tool_calls == [] and sent == parser.message.content == text


def test_a_name_variant_must_name_exactly_one_tool() -> None:
    twins = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
             for name in ("prob_dist_binomial", "prob-dist-binomial")]
    reader = CallReader(parse_tools(twins))
    exact = reader.read('{"name": "prob-dist-binomial", "arguments": {}}')
    assert exact is not None and [c.name for c in exact.calls] == ["prob-dist-binomial"] and not exact.rules
    assert reader.read('{"name": "prob_dist.binomial", "arguments": {}}') is None   # which one? neither
    reader = CallReader(parse_tools(TOOLS))
    assert reader.resolve("Calculate.Triangle.Area") == ("calculate_triangle_area", frozenset({rules.NAME_VARIANT}))
    assert reader.resolve("get_weather") == ("get_weather", frozenset())
    assert reader.resolve("weather") is None and reader.resolve("get_weather_now") is None
    assert reader.may_name("get.wea") and not reader.may_name("got")


def test_stray_text() -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\nDone.'
    parser = recovered(text, [PARIS], (rules.STRAY_TEXT,), "Done.")
    assert parser.recovery is not None and parser.recovery.parse_error is not None
    with pytest.raises(ChatParseError):
        run(text, upstream=True)


def test_rules_combine_in_the_order_used() -> None:
    text = "```json\n{'function': 'get_weather', 'parameters': \"{'city': 'Paris',}\"}\n```"
    recovered(text, [PARIS], (rules.FENCED_BLOCK, rules.ARGUMENTS_STRING, rules.KEY_VARIANTS, rules.SINGLE_QUOTES,
                              rules.TRAILING_COMMA))


def test_every_rule_has_a_test() -> None:
    tested = [name for name in globals() if name.startswith("test_")]
    assert [rule for rule in rules.RULES if not any(t.startswith(f"test_{rule}") for t in tested)] == []


# -- what stays content ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    '```json\n{"name": "get_weather", "arguments": {"town": "Paris"}}\n```',     # not its schema
    '```json\n{"name": "get_weather", "arguments": {"city": 5}}\n```',
    '```json\n{"name": "Joke", "arguments": {"joke": "Why?"}}\n```',             # not a tool
    '{"name": "get_weather", "arguments": {"city": "Paris"}, "note": "x"}',     # not a call's shape
    '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\nprint(1)\n```',   # not only calls
    'Use get_weather(city="Paris") to ask.',                                       # a call inside prose
    '```python\nimport json\nget_weather(city="Paris")\n```',                      # code around it
    '{"city": "Paris"}',                                                          # arguments alone
    '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n``` and more on its line',
])
def test_what_is_not_a_valid_call_stays_content_in_order(text: str) -> None:
    for seed in range(4):
        parser, sent = run(text, seed=seed)
        assert parser.message.tool_calls == [] and parser.finish_reason == "stop"
        assert sent == parser.message.content
        assert parser.message.content == text or parser.recovery is not None


def test_nothing_is_read_with_tool_choice_none_or_in_upstream_mode() -> None:
    for kwargs in ({"tool_choice": "none"}, {"upstream": True}):
        parser, sent = run(FENCED, **kwargs)
        assert parser.message.tool_calls == [] and parser.message.content == FENCED and parser.recovery is None


def test_a_named_choice_recovers_only_that_tool() -> None:
    text = '```json\n{"name": "calculate_triangle_area", "arguments": {"base": 1, "height": 2}}\n```'
    parser, _ = run(text, named="get_weather")
    assert parser.message.tool_calls == []
    parser, _ = run(text, named="calculate_triangle_area")
    assert calls(parser) == [("calculate_triangle_area", {"base": 1, "height": 2})]


def test_a_cut_short_output_sends_no_call() -> None:
    """Deviation 5's rule holds: a generation cut short has no calls, the held text is content."""
    text = '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\n\n\n\n'
    parser, sent = run(text, stop="max_tokens")
    assert parser.message.tool_calls == [] and sent == parser.message.content == text
    assert parser.finish_reason == "length" and parser.recovery is None


def test_a_failed_parse_without_tools_is_answered_as_content() -> None:
    source = (TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")
    result = apply_chat_template(source, ASK, tools=TOOLS)
    text = "<think>\nIt is sunny.\n</think>\n\nLet me call it.\n<tool_call>\n{broken\n</tool_call>"
    upstream = ChatStreamParser(result, tools=TOOLS, upstream_compat=True, stream=False)
    upstream.feed(text)
    with pytest.raises(ChatParseError):
        upstream.finish("eog")
    parser = ChatStreamParser(result, tools=TOOLS)
    sent = [d for piece in token_pieces(text, random.Random(3)) for d in parser.feed(piece)]
    sent += parser.finish("eog")
    message = parser.message
    assert message.reasoning_content == "It is sunny." == "".join(d.thinking for d in sent)
    assert message.content == "Let me call it.\n<tool_call>\n{broken\n</tool_call>" == "".join(d.content for d in sent)
    assert parser.recovery is not None and parser.recovery.parse_error and parser.recovery.recovered == ()


def test_a_continued_message_keeps_its_prefill() -> None:
    source = (TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8")
    prefill = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    result = apply_chat_template(source, [*ASK, {"role": "assistant", "content": prefill}], tools=TOOLS,
                                 continue_final_message=True, add_generation_prompt=False)
    parser = ChatStreamParser(result, tools=TOOLS, is_continuation=True)
    parser.feed("\nThat is the call.")
    parser.finish("eog")
    assert parser.message.tool_calls == [] and parser.recovery is None


# -- the stream holds what may become a call, and only that -----------------------------------------


def test_text_that_cannot_begin_a_call_streams_at_once() -> None:
    parser = ChatStreamParser(qwen25(), tools=TOOLS)
    assert "".join(d.content for d in parser.feed("Hello there.\nIt is")) == "Hello there.\nIt is"
    assert "".join(d.content for d in parser.feed(" sunny.\n```py")) == " sunny."
    assert "".join(d.content for d in parser.feed("thon\nimport os\n")) == "\n```python\nimport os"
    parser = ChatStreamParser(qwen25(), tools=TOOLS)
    assert "".join(d.content for d in parser.feed('Sure:\n```json\n{"name": "get_we')) == "Sure:"
    # the block closes and is no call (get_weather needs a city): it goes; its next line may be a call
    released = "".join(d.content for d in parser.feed('ather"}\n```\nget_wea'))
    assert released == '\n```json\n{"name": "get_weather"}\n```'
    assert "".join(d.content for d in parser.feed("ther is")) == "\nget_weather is"


SNIPPETS = [
    "Sure.", " ", "\n", "\n\n", "text", "{", "}", "[", "]", '"', "'", ",", "`", "```", "```json\n", "\n```\n",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}', "get_weather(city='Paris')", "get_weather",
    "(", ")", "calculate_triangle_area(1, 2)", '{"get_weather": {"city": "Rome"}}', "<tool_call>\n", "\n</tool_call>",
    "{'name': 'get_weather', 'arguments': {'city': 'Oslo',},}", "get.weather(city='Nice')", '"Get-Weather"',
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.sampled_from(SNIPPETS), min_size=1, max_size=14), seed=st.integers(0, 1000),
       choice=st.sampled_from(["auto", "required"]))
def test_streamed_content_is_the_final_content(parts: list[str], seed: int, choice: str) -> None:
    """Deviation 5's rule with recovery on: whatever the text and the token split, what was streamed
    is the final content, every call whole at the end, and nothing raises."""
    text = "".join(parts)
    parser, sent = run(text, seed=seed, tool_choice=choice)
    assert sent == parser.message.content and not parser.diverged
    for call in parser.message.tool_calls:
        assert call.name in ("get_weather", "calculate_triangle_area") and isinstance(json.loads(call.arguments), dict)


# -- the readers beneath ----------------------------------------------------------------------------


def test_lenient_json() -> None:
    assert loads_lenient('{"a": [1, 2]}') == ({"a": [1, 2]}, frozenset())
    assert loads_lenient("{'a': True, 'b': None, 'c': 'it\\'s'}") == (
        {"a": True, "b": None, "c": "it's"}, frozenset({rules.SINGLE_QUOTES}))
    assert loads_lenient('{"a": [1, 2,], "b": "x, }",}') == (
        {"a": [1, 2], "b": "x, }"}, frozenset({rules.TRAILING_COMMA}))
    assert loads_lenient('{"a": NaN}') is None and loads_lenient("{a: 1}") is None and loads_lenient("[" * 5000) is None


def test_python_calls_read_literals_and_run_nothing() -> None:
    assert python_calls('f(1, b="x", c=[1, {"d": None}], e=true)') == (
        [("f", {"b": "x", "c": [1, {"d": None}], "e": True}, [1])], frozenset({rules.PYTHON_CALL}))
    assert python_calls("spotify.play(artist='A')") == ([("spotify.play", {"artist": "A"}, [])],
                                                       frozenset({rules.PYTHON_CALL}))
    for text in ("f(x)", "f(__import__('os').system('true'))", "f(*a)", "f(**k)", "f(1 + 2)", "f(a=g())",
                 "x = f(1)", "f(1); g(2)", "f", "f(a={1, 2})", "f(" * 2000):
        assert python_calls(text) is None, text


def test_brackets_resume_as_text_is_appended() -> None:
    text = 'x {"a": "}{", \'b\': [1, (2)], "c": "\\"}"} tail'
    whole = Brackets(2).end(text)
    assert whole == text.index(" tail")
    brackets = Brackets(2)
    ends = [brackets.end(text[:i]) for i in range(3, len(text) + 1)]
    assert ends[-1] == whole and all(e is None for e in ends[:whole - 3])
    assert Brackets(0).end("{]") == -1


def test_reader_validates_against_the_schema() -> None:
    reader = CallReader(parse_tools(TOOLS))
    read = reader.read('{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}')
    assert read is not None and [(c.name, json.loads(c.arguments)) for c in read.calls] == [
        ("get_weather", {"city": "Paris", "days": 2})]
    for bad in ('{"name": "get_weather", "arguments": {"city": "Paris", "days": "2"}}',
                '{"name": "get_weather", "arguments": {"city": "Paris", "extra": 1}}',
                '{"name": "get_weather", "arguments": {}}',
                '[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "nope", "arguments": {}}]',
                '{"name": "get_weather", "parameters": {"city": "P"}, "arguments": {"city": "P"}}',
                'calculate_triangle_area(1, 2, "cm", 4)', 'calculate_triangle_area(1, base=2, height=3)'):
        assert reader.read(bad) is None, bad


def test_a_schema_jsonschema_cannot_use_leaves_the_object_check() -> None:
    odd = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": 5}}}
    reader = CallReader(parse_tools([odd]))
    assert reader.read('{"name": "f", "arguments": {"x": 1}}') is not None
    assert reader.read('{"name": "f", "arguments": [1]}') is None


def test_content_scan_views_are_prefixes_of_its_final_content() -> None:
    reader = CallReader(parse_tools(TOOLS))
    text = ('Intro\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\n\nThen\n'
            '```js\nlet x = {a: 1};\n```\nget_weather(city="Rome")\n{"k": 1}\nEnd')
    final, found, used = ContentScan(reader).finish(text)
    assert final == 'Intro\nThen\n```js\nlet x = {a: 1};\n```\n{"k": 1}\nEnd'
    assert [c.name for c in found] == ["get_weather", "get_weather"]
    assert used == [rules.FENCED_BLOCK, rules.PYTHON_CALL]
    scan = ContentScan(reader)
    for i in range(len(text) + 1):
        assert final.startswith(scan.view(text[:i])), i


def test_the_recovery_report_is_the_extension_fields_json() -> None:
    parser, _ = run(FENCED)
    assert parser.recovery is not None
    assert parser.recovery.to_json() == {"parse_error": None, "recovered": ["fenced_block"]}
    assert isinstance(parser.message, ChatMessage)
