"""Upstream's vendor/llama.cpp/tests/test-chat-peg-parser.cpp, re-expressed against the oracle.

Each upstream test builds a parser with the chat builder, parses an input (strict, or lenient
where upstream passes ``COMMON_PEG_PARSE_FLAG_LENIENT``) and maps the AST to a message. Here:

* the raw parse, with upstream's flag, must equal the oracle's (upstream's parser on our arena);
* the whole chat pipeline (``parse_chat_output``: generation prompt, lenient parse, mapper) must
  give the oracle's ``chat_parse`` message, for the whole text and, where upstream streams
  tokens, for every token prefix (partial);
* where upstream computes streaming diffs, ours must equal the oracle's ``msg_diffs``;
* upstream's own expectations (content, reasoning, tool calls, tags, GBNF) are asserted on top.

Since the oracle runs *our* arena, the upstream helpers these parsers use (standard_json_tools,
standard_constructed_tools, permute) are also compared node for node with upstream's
(``peg_build``), grammars included. Not re-expressed: the ``t.bench`` timings of "comparison";
upstream's logged (never asserted) grammars are compared only where the arena has no schema node
(the arena JSON does not carry schema documents).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from peg_checks import checked_parse

from llamact.chat.diffs import ChatDiffError, compute_diffs
from llamact.chat.messages import ChatMessage
from llamact.chat.output_parser import ChatParseError, parse_chat_output
from llamact.chat.peg_builder import COMMON_CHAT_MAX_PERMUTE, ChatPegBuilder, build_chat_peg_parser
from llamact.chat.peg_mappers import map_generic, map_tags
from llamact.parity.oracle import OracleClient, OracleError
from llamact.peg import Arena, Schema, arena_to_gbnf
from llamact.peg.builder import P, ParserBuilder, build_peg_parser
from llamact.peg.executor import ParseResult

pytestmark = pytest.mark.parity

NATIVE = "peg-native"  # the generic mapper's format


# --- helpers -------------------------------------------------------------------------------------




def checked_chat(oracle: OracleClient, arena: Arena, text: str, is_partial: bool, generation_prompt: str = "",
                 fmt: str = NATIVE) -> dict[str, Any]:
    """Our chat pipeline's message (or error), asserted equal to upstream's ``common_chat_parse``."""
    expected = oracle.request("chat_parse", parser=arena.to_json(), format=fmt, generation_prompt=generation_prompt,
                              text=text, is_partial=is_partial)
    if isinstance(expected, OracleError):
        with pytest.raises(ChatParseError) as info:
            parse_chat_output(text, is_partial, arena, fmt, generation_prompt)
        assert info.value.message == expected.message
        return {}
    ours = parse_chat_output(text, is_partial, arena, fmt, generation_prompt).to_dict()
    assert ours == expected, f"{text!r} is_partial={is_partial}"
    return ours


def checked_diffs(oracle: OracleClient, prev: ChatMessage, new: ChatMessage) -> None:
    """Upstream asserts ``compute_diffs`` does not throw; ours must also give upstream's diffs."""
    expected = oracle.request("msg_diffs", previous=prev.to_dict(), new=new.to_dict())
    assert not isinstance(expected, OracleError), expected  # upstream's assertion
    try:
        ours = [d.to_dict() for d in compute_diffs(prev, new)]
    except ChatDiffError as exc:
        pytest.fail(f"compute_diffs raised {exc} where upstream gave {expected}")
    assert ours == expected


def checked_grammar(oracle: OracleClient, arena: Arena, lazy: bool = False) -> str:
    expected = oracle.request("peg_grammar", parser=arena.to_json(), lazy=lazy)
    assert not isinstance(expected, OracleError), expected
    ours = arena_to_gbnf(arena, lazy=lazy)
    assert ours == expected
    return ours


def simple_tokenize(text: str) -> list[str]:
    """Upstream's test tokenizer: a new piece starts at each of these characters."""
    pieces: list[str] = []
    for ch in text:
        if ch in ' \n\t{},["].<>=/' or not pieces:
            pieces.append(ch)
        else:
            pieces[-1] += ch
    return pieces


def stream(oracle: OracleClient, arena: Arena, text: str) -> list[ChatMessage]:
    """Upstream's incremental loop: each token prefix parsed (lenient but the last, which is strict),
    mapped, and diffed against the previous one; never a failed parse. Returns the messages."""
    tokens = simple_tokenize(text)
    assert "".join(tokens) == text
    messages = [ChatMessage()]
    for i in range(1, len(tokens) + 1):
        prefix, last = "".join(tokens[:i]), i == len(tokens)
        result = checked_parse(oracle, arena, prefix, lenient=not last)
        assert not result.fail, prefix  # upstream's assertion
        message = map_generic(result.nodes)
        checked_chat(oracle, arena, prefix, is_partial=not last)
        checked_diffs(oracle, messages[-1], message)
        messages.append(message)
    return messages[1:]


def calls(message: ChatMessage) -> list[tuple[str, str]]:
    return [(c.name, c.arguments) for c in message.tool_calls]


def has_schema(arena: Arena) -> bool:
    return any(isinstance(node, Schema) for node in arena.parsers)


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str], **extra: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required, **extra}}}


LOCATION = {"type": "string", "description": "The city and state, e.g. San Francisco, CA"}
UNIT = {"type": "string", "enum": ["celsius", "fahrenheit"],
        "description": "The temperature unit to use. Infer this from the users location."}
TOOLS = [  # upstream's create_tools()
    _fn("get_current_weather", "Get the current weather in a given location", {"location": LOCATION, "unit": UNIT},
        ["location", "unit"]),
    _fn("get_forecast", "Get the weather forecast for a given location", {
        "location": LOCATION, "unit": UNIT,
        "days": {"type": "integer", "description": "Number of days to forecast (1-10)", "minimum": 1, "maximum": 10}},
        ["location", "unit"]),
    {"type": "function", "function": {
        "name": "search_knowledge_base", "description": "Search the internal technical documentation knowledge base.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "The search query string."},
            "max_results": {"type": "integer", "description": "The maximum number of results to return.",
                            "default": 5},
            "category": {"type": "string", "enum": ["api", "troubleshooting", "billing", "general"],
                         "description": "Filter search by specific category."}},
            "required": ["query", "category"], "additionalProperties": False},
        "strict": True}},
]


# --- test_example_native -------------------------------------------------------------------------


@dataclass(frozen=True)
class NativeCase:
    input: str
    expect_content: str
    expect_reasoning: str = ""
    expect_calls: list[tuple[str, str]] = field(default_factory=list)
    tools: list[Any] = field(default_factory=list)
    required: bool = False  # tool_choice == required
    reasoning_none: bool = False  # reasoning_format == none: the reasoning stays in the content
    json_schema: dict[str, Any] = field(default_factory=dict)
    parallel: bool = False
    generation_prompt: str = ""


def native_parser(tc: NativeCase) -> Arena:
    def build(p: ChatPegBuilder) -> P:
        reasoning = p.optional("<think>" + p.reasoning(p.until("</think>")) + "</think>" + p.space())
        lead = p.eps() if tc.reasoning_none else reasoning
        if tc.tools:
            tool_call = p.standard_json_tools("<tool_call>[", "]</tool_call>", tc.tools, tc.parallel, tc.required)
            return p.sequence([lead, p.content(p.until("<tool_call>")), p.optional(p.space() + tool_call), p.space(),
                               p.end()])
        if tc.json_schema:
            return p.sequence([lead, p.content(p.schema(p.json(), "response-output", tc.json_schema)), p.space(),
                               p.end()])
        return p.sequence([lead, p.content(p.rest()), p.end()])

    return build_chat_peg_parser(build)


def _weather(location: str, extra: str = "") -> tuple[str, str]:
    return ("get_current_weather" if not extra else "get_forecast",
            f'{{"location": "{location}", "unit": "fahrenheit"{extra}}}')


def _call_json(call: tuple[str, str]) -> str:
    return f'{{"name": "{call[0]}", "arguments": {call[1]}}}'


HELLO_THINK = "<think>The user said hello, I must say hello back</think>\nHello"
PARALLEL = [_weather("New York City, NY"), _weather("San Francisco, CA"), _weather("New York City, NY", ', "days": 3'),
            _weather("San Francisco, CA", ', "days": 3')]
INVOICE = '{"invoice_number": "INV-2025-001", "amount": 1250.50, "due_date": "2025-12-31"}'
NATIVE_CASES: dict[str, NativeCase] = {
    "content with reasoning (no generation_prompt)": NativeCase(
        HELLO_THINK, "Hello", "The user said hello, I must say hello back"),
    "content without reasoning (no generation_prompt)": NativeCase("Hello", "Hello"),
    "content with reasoning_format = none (tags appear in content)": NativeCase(
        HELLO_THINK, HELLO_THINK, reasoning_none=True),
    "content with reasoning generation_prompt": NativeCase(
        HELLO_THINK[len("<think>"):], "Hello", "The user said hello, I must say hello back",
        generation_prompt="<think>"),
    "content with reasoning generation_prompt and reasoning_format = none": NativeCase(
        HELLO_THINK[len("<think>"):], HELLO_THINK[len("<think>"):], reasoning_none=True),
    "content with closed reasoning generation_prompt (empty reasoning discarded)": NativeCase(
        "Hello", "Hello", generation_prompt="<think></think>"),
    "tools with reasoning generation_prompt": NativeCase(
        f"I must get the weather in New York</think>\n<tool_call>[{_call_json(PARALLEL[0])}]</tool_call>", "",
        "I must get the weather in New York", [PARALLEL[0]], tools=TOOLS, generation_prompt="<think>"),
    "parallel tools with reasoning generation_prompt": NativeCase(
        "I must get the weather in New York and San Francisco and a 3 day forecast of each.</think>\n"
        "Let me search that for you.<tool_call>[" + ", ".join(map(_call_json, PARALLEL)) + "]</tool_call>",
        "Let me search that for you.",
        "I must get the weather in New York and San Francisco and a 3 day forecast of each.", PARALLEL,
        tools=TOOLS, parallel=True, generation_prompt="<think>"),
    "response_format with reasoning generation_prompt": NativeCase(
        f"I must produce the invoice in the requested format</think>\n{INVOICE}", INVOICE,
        "I must produce the invoice in the requested format",
        json_schema={"type": "object", "properties": {"invoice_number": {"type": "string"},
                                                      "amount": {"type": "number"}, "due_date": {"type": "string"}},
                     "required": ["invoice_number", "amount", "due_date"]},
        generation_prompt="<think>"),
}


@pytest.mark.parametrize("name", [pytest.param(n, id=f"native/{n}") for n in NATIVE_CASES])
def test_native(oracle: OracleClient, name: str) -> None:
    tc = NATIVE_CASES[name]
    arena = native_parser(tc)
    if not has_schema(arena):  # upstream logs this grammar
        checked_grammar(oracle, arena, lazy=bool(tc.tools) and not tc.required)
    result = checked_parse(oracle, arena, tc.generation_prompt + tc.input, lenient=False)
    assert result.success  # upstream's assertions from here
    message = map_generic(result.nodes)
    assert (message.content, message.reasoning_content, calls(message)) == (
        tc.expect_content, tc.expect_reasoning, tc.expect_calls)
    checked_chat(oracle, arena, tc.input, False, tc.generation_prompt)


# --- test_example_qwen3_coder / test_example_qwen3_non_coder ---------------------------------------


def qwen3_coder_parser() -> Arena:
    def build(p: ChatPegBuilder) -> P:
        content = p.rule("content", p.content(p.until("<tool_call>")))
        tool_parsers = []
        for tool in TOOLS:
            function = tool["function"]
            name = function["name"]
            required = set(function.get("required", []))  # (upstream looks beside "parameters": none)
            arg_parsers = []
            for param, schema in function["parameters"]["properties"].items():
                schema_name = f"tool-{name}-arg-{param}-schema"
                if schema.get("type", "object") == "string":
                    value = p.tool_arg_string_value(p.schema(p.until_one_of(
                        ["</parameter>\n<parameter=", "</parameter>\n</function>"]), schema_name, schema, True))
                else:
                    value = p.tool_arg_json_value(p.schema(p.json(), schema_name, schema))
                arg = p.tool_arg(p.sequence([
                    p.tool_arg_open("<parameter=" + p.tool_arg_name(p.literal(param)) + ">"), value,
                    p.tool_arg_close("</parameter>\n" + p.peek(p.literal("<parameter=") | p.literal("</function>")))]))
                rule = p.rule(f"tool-{name}-arg-{param}", arg)
                arg_parsers.append(rule if param in required else p.optional(rule))
            tool_parsers.append(p.rule(f"tool-{name}", p.tool_open("<function=" + p.tool_name(p.literal(name)) + ">")
                                       << p.sequence(arg_parsers) << p.tool_close(p.literal("</function>"))))
        tool_call = p.trigger_rule("tool-call", "<tool_call>" << p.choice(tool_parsers) << "</tool_call>")
        return content + p.zero_or_more(p.space() + tool_call) + p.end()

    return build_chat_peg_parser(build)


def test_qwen3_coder_incremental_parsing(oracle: OracleClient) -> None:
    """qwen3 coder/incremental parsing."""
    text = ("Let me search the knowledge base for cat pictures.<tool_call>\n<function=search_knowledge_base>\n"
            "<parameter=query>cat pictures</parameter>\n<parameter=category>general</parameter>\n"
            "</function>\n</tool_call>")
    stream(oracle, qwen3_coder_parser(), text)


def qwen3_non_coder_parser() -> Arena:
    def build(p: ChatPegBuilder) -> P:
        tool_call = p.standard_json_tools("<tool_call>", "</tool_call>", TOOLS, True, False)
        return p.sequence([p.content(p.until("<tool_call>")), p.optional(p.space() + tool_call), p.end()])

    return build_chat_peg_parser(build)


QWEN3_WEATHER = ('I need to get the weather.\n<tool_call>{"name": "get_current_weather", "arguments": '
                 '{"location": "New York City, NY", "unit": "fahrenheit"}}</tool_call>')


def test_qwen3_non_coder_tool_call_parsing(oracle: OracleClient) -> None:
    """qwen3 non-coder/tool call parsing."""
    arena = qwen3_non_coder_parser()
    result = checked_parse(oracle, arena, QWEN3_WEATHER, lenient=False)
    assert result.success
    message = map_generic(result.nodes)
    assert (message.content, message.reasoning_content, calls(message)) == (
        "I need to get the weather.\n", "", [_weather("New York City, NY")])
    checked_chat(oracle, arena, QWEN3_WEATHER, False)


def test_qwen3_non_coder_incremental_parsing(oracle: OracleClient) -> None:
    """qwen3 non-coder/incremental parsing."""
    stream(oracle, qwen3_non_coder_parser(), QWEN3_WEATHER)


# --- test_command7_parser_compare ------------------------------------------------------------------


def command7_parser() -> Arena:
    def build(p: ChatPegBuilder) -> P:
        thinking = p.reasoning_block(
            "<|START_THINKING|>" << p.reasoning(p.until("<|END_THINKING|>")) << "<|END_THINKING|>")
        response = "<|START_RESPONSE|>" << p.content(p.until("<|END_RESPONSE|>")) << "<|END_RESPONSE|>"
        call_id = p.atomic('"tool_call_id"' << (":" << ('"' + p.tool_id(p.string_content('"')) + '"')))
        call_name = p.atomic('"tool_name"' << (":" << ('"' + p.tool_name(p.string_content('"')) + '"')))
        call_args = '"parameters"' << (":" << p.tool_args(p.json()))
        fields = p.rule("tool-call-fields", call_id | call_name | call_args)
        tool_call = p.rule("tool-call", p.tool(p.tool_open(p.literal("{")) << fields
                                               << p.zero_or_more(p.literal(",") << fields)
                                               << p.tool_close(p.literal("}"))))
        tool_calls = p.rule("tool-calls", "<|START_ACTION|>" << (
            "[" << tool_call << p.zero_or_more(p.literal(",") << tool_call) << "]") << "<|END_ACTION|>")
        return p.optional(thinking) << (tool_calls | response) + p.end()

    return build_chat_peg_parser(build)


COMMAND7_REASONING = (
    "To plan an effective trip to Japan that includes both historical sites and modern attractions within a "
    "budget of $4000 for a two-week stay, we need to:\n\n"
    "1. Identify key historical sites and modern attractions in Japan.\n"
    "2. Find affordable accommodation options that provide a balance between comfort and cost.\n"
    "3. Determine the best modes of transportation for getting around Japan.\n"
    "4. Create a day-by-day itinerary that ensures the user gets to see a variety of attractions without "
    "overspending.\n"
    "5. Provide a detailed cost breakdown that includes accommodation, transportation, meals, and entry fees "
    "to attractions.")
# the action, as upstream's common_json dump(-1) writes it (keys in insertion order, no spaces)
COMMAND7_ACTION = (
    '[{"tool_call_id":"call_0","tool_name":"plan_trip","parameters":{"destination":"Japan","duration":14,'
    '"budget":4000,"interests":["historical sites","modern attractions"],"accommodation_preferences":"affordable",'
    '"transportation_preferences":"efficient","meal_preferences":"local cuisine"}}]')
COMMAND7_TOKENS = ["<|START_THINKING|>", *simple_tokenize(COMMAND7_REASONING), "<|END_THINKING|>",
                   "<|START_ACTION|>", *simple_tokenize(COMMAND7_ACTION), "<|END_ACTION|>"]


def test_command7_current_parse(oracle: OracleClient) -> None:
    """comparison/current_parse (upstream asserts nothing; the parse and the message must be upstream's)."""
    arena = command7_parser()
    text = "".join(COMMAND7_TOKENS)
    checked_parse(oracle, arena, text, lenient=False)
    checked_chat(oracle, arena, text, False)


def test_command7_incremental_benchmark_prefixes(oracle: OracleClient) -> None:
    """comparison/"current_parse_benchmark incremental": the bench's token prefixes (lenient but the
    last), as parity checks of the parse and the message (the timing itself is not re-expressed)."""
    arena = command7_parser()
    for i in range(1, len(COMMAND7_TOKENS) + 1):
        prefix, last = "".join(COMMAND7_TOKENS[:i]), i == len(COMMAND7_TOKENS)
        checked_parse(oracle, arena, prefix, lenient=not last)
        checked_chat(oracle, arena, prefix, not last)


# --- test_prefix_tool_names ----------------------------------------------------------------------

PREFIX_TOOLS = [
    {"type": "function", "function": {"name": "special_function", "description": "A special function",
                                      "parameters": {"type": "object", "properties": {"arg1": {"type": "integer"}},
                                                     "required": ["arg1"]}}},
    {"type": "function", "function": {"name": "special_function_with_opt",
                                      "description": "A special function with optional params",
                                      "parameters": {"type": "object", "properties": {
                                          "arg1": {"type": "integer"}, "arg2": {"type": "integer"}},
                                          "required": ["arg1"]}}},
]
PREFIX_MARKERS = {
    "tool_call_start_marker": "<tool_call>", "tool_call_end_marker": "</tool_call>",
    "function_opener": "<function=", "function_closer": "</function>", "function_name_suffix": ">",
    "parameter_key_prefix": "<param=", "parameter_key_suffix": ">", "parameter_closer": "</param>",
}


def prefix_tools_parser() -> Arena:
    def build(p: ChatPegBuilder) -> P:
        content = p.rule("content", p.content(p.until("<tool_call>")))
        tool_call = p.standard_constructed_tools(PREFIX_MARKERS, PREFIX_TOOLS, False, False)
        return content + p.zero_or_more(p.space() + tool_call) + p.end()

    return build_chat_peg_parser(build)


def _prefix_call(name: str) -> str:
    return f"Let me call the function.<tool_call><function={name}><param=arg1>42</param></function></tool_call>"


@pytest.mark.parametrize("name", [
    pytest.param("special_function_with_opt", id="prefix tool names/parse long tool name"),
    pytest.param("special_function", id="prefix tool names/parse short tool name")])
def test_prefix_tool_names_parse(oracle: OracleClient, name: str) -> None:
    arena = prefix_tools_parser()
    result = checked_parse(oracle, arena, _prefix_call(name), lenient=False)
    assert result.success
    message = map_generic(result.nodes)
    assert message.content == "Let me call the function."
    assert [c.name for c in message.tool_calls] == [name]
    checked_chat(oracle, arena, _prefix_call(name), False)


def test_prefix_tool_names_incremental(oracle: OracleClient) -> None:
    """prefix tool names/incremental parse long tool name: never the short name on the way."""
    messages = stream(oracle, prefix_tools_parser(), _prefix_call("special_function_with_opt"))
    assert all(c.name != "special_function" for m in messages for c in m.tool_calls)
    assert [c.name for c in messages[-1].tool_calls] == ["special_function_with_opt"]


# --- test_tagged_peg_parser ----------------------------------------------------------------------


def tagged(oracle: OracleClient, build: Callable[[ParserBuilder], P], text: str,
           lenient: bool = False) -> tuple[ParseResult, dict[str, str]]:
    """``parse_and_extract``: one parse from the start, each tag's (last) text."""
    result = checked_parse(oracle, build_peg_parser(build), text, lenient)
    return result, map_tags(result.nodes)


def tagged_anywhere(oracle: OracleClient, build: Callable[[ParserBuilder], P],
                    text: str) -> tuple[ParseResult, dict[str, str]]:
    """``parse_anywhere_and_extract``: the first start byte whose parse succeeds, else the last byte's."""
    arena = build_peg_parser(build)
    size = len(text.encode())
    for start in range(size):
        result = checked_parse(oracle, arena, text, False, start)
        if result.success or start == size - 1:
            return result, map_tags(result.nodes)
    raise AssertionError("empty input")


def _find_fun_name(p: ParserBuilder) -> P:
    return p.choice([p.literal("{"), p.literal(":")]) + p.space() + p.literal('"') + p.atomic(p.literal("fun_name"))


def _fun_marker(p: ParserBuilder) -> P:
    needle = "foofoo"
    sharp = (p.tag("fun_pre", p.literal("<") + p.until_one_of([">", needle])) + p.literal(needle)
             + p.tag("fun_post", p.negate(p.space() + p.literal("<")) + p.until(">") + p.literal(">")) + p.space())
    square = (p.tag("fun_pre", p.literal("[") + p.until_one_of(["]", needle])) + p.literal(needle)
              + p.tag("fun_post", p.negate(p.space() + p.literal("[") + p.until("]") + p.literal("]")) + p.space()))
    return p.tag("fun_marker", p.choice([sharp, square]))


TEMPLATE_PREFIX = "This is a very long jinja template string. We have tools. We will try to call them now: "
HAYSTACK = ("\n<tool_call>\n<function=foofoo>\n<parameter=first>\nXXXX\n</parameter>\n<parameter=second>\nYYYY\n"
            "</parameter>\n</function>\n</tool_call>\n")
# upstream test -> (builder, input, how it is parsed, upstream's expected result type ("not fail": any
# other), the tags upstream checks or None)
TAGGED: dict[str, tuple[Callable[[ParserBuilder], P], str, str, str, dict[str, str] | None]] = {
    "basic tag extraction": (
        lambda p: p.tag("greeting", p.until(" ")) + " " + p.tag("name", p.rest()) + p.end(), "Hello World", "strict",
        "success", {"greeting": "Hello", "name": "World"}),
    "duplicate tags overwrite": (
        lambda p: p.tag("item", p.until(",")) + "," + p.tag("item", p.rest()) + p.end(), "first,second", "strict",
        "success", {"item": "second"}),
    "no tags extracted": (lambda p: p.rest() + p.end(), "Hello", "strict", "success", {}),
    "structured extraction": (
        lambda p: p.tag("header", p.until("\n")) + "\n" + p.tag("body", p.rest()) + p.end(),
        "Title\nBody content here", "strict", "success", {"header": "Title", "body": "Body content here"}),
    "partial parse": (
        lambda p: p.tag("prefix", p.until(":")) + ":" + p.tag("value", p.rest()) + p.end(), "key:val", "lenient",
        "not fail", {"prefix": "key", "value": "val"}),
    "find in the middle": (
        _find_fun_name, TEMPLATE_PREFIX + '<tool_call>{ "fun_name" : { "arg" : 1 }</tool_call>', "anywhere",
        "success", None),
    "fail find in the middle": (
        _find_fun_name, TEMPLATE_PREFIX + "<tool_call><fun=fun_name><arg name=arg>1</arg></tool_call>", "anywhere",
        "fail", None),
    "find function tag with name": (
        _fun_marker, HAYSTACK, "anywhere", "success", {"fun_pre": "<function=", "fun_post": ">"}),
}


@pytest.mark.parametrize("name", [pytest.param(n, id=f"tagged peg parser/{n}") for n in TAGGED])
def test_tagged_peg_parser(oracle: OracleClient, name: str) -> None:
    build, text, mode, expect, expect_tags = TAGGED[name]
    if mode == "anywhere":
        result, tags = tagged_anywhere(oracle, build, text)
    else:
        result, tags = tagged(oracle, build, text, lenient=mode == "lenient")
    assert not result.fail if expect == "not fail" else result.type == expect  # upstream's assertions
    if expect_tags is not None:
        assert {k: tags.get(k) for k in expect_tags} == expect_tags
    if name == "no tags extracted":
        assert tags == {}  # upstream checks the count


# --- test_permute --------------------------------------------------------------------------------


def permute_parser(prefix: str, letters: str) -> Arena:
    return build_chat_peg_parser(lambda p: p.permute(prefix, [p.literal(c) for c in letters]) + p.end())


def accepts(oracle: OracleClient, arena: Arena, text: str) -> bool:
    return checked_parse(oracle, arena, text, lenient=False).success


def test_permute_accepts_every_ordering(oracle: OracleClient) -> None:
    arena = permute_parser("abc", "abc")
    for text in ["abc", "acb", "bac", "bca", "cab", "cba"]:
        assert accepts(oracle, arena, text), text


def test_permute_single_element(oracle: OracleClient) -> None:
    arena = permute_parser("a", "a")
    assert accepts(oracle, arena, "a")
    assert not accepts(oracle, arena, "aa")


SPACE = 'space ::= | " " | "\\n"{1,2} [ \\t]{0,20}\n'


def test_permute_grammar_left_factorizes_shared_tails(oracle: OracleClient) -> None:
    assert checked_grammar(oracle, permute_parser("abc", "abc")) == (
        'abc-1 ::= "a"\nabc-2 ::= "b"\nabc-3 ::= "a" abc-2 | "b" abc-1\nabc-4 ::= "c"\n'
        'abc-5 ::= "a" abc-4 | "c" abc-1\nabc-6 ::= "b" abc-4 | "c" abc-2\n'
        'abc-7 ::= "a" abc-6 | "b" abc-5 | "c" abc-3\nroot ::= abc-7\n' + SPACE)


def test_permute_grammar_one_rule_per_remaining_subset(oracle: OracleClient) -> None:
    gbnf = checked_grammar(oracle, permute_parser("abcd", "abcd"))
    assert sum(line.startswith("abcd-") for line in gbnf.split("\n")) == 15


def test_permute_grammar_no_rules_for_single_element(oracle: OracleClient) -> None:
    assert checked_grammar(oracle, permute_parser("a", "a")) == 'root ::= "a"\n' + SPACE


def test_permute_grammar_falls_back_to_given_order_when_too_large(oracle: OracleClient) -> None:
    letters = "abcdefghijklmnop"[:COMMON_CHAT_MAX_PERMUTE + 1]
    assert checked_grammar(oracle, permute_parser("big", letters)) == 'root ::= "a" "b" "c" "d" "e" "f" "g"\n' + SPACE


# --- test_invalid_utf8 (the oracle's chat_parse takes text, so the mapping is checked on the AST) ---


def invalid_utf8_parser() -> Arena:
    return build_chat_peg_parser(
        lambda p: "<think>" + p.reasoning(p.until("</think>")) + "</think>" + p.content(p.rest()) + p.end())


def test_invalid_utf8_replaced_in_reasoning_and_content(oracle: OracleClient) -> None:
    result = checked_parse(oracle, invalid_utf8_parser(), b"<think>plan\xff\xfe</think>caf\xc3\xa9 \x80 done", False)
    assert result.success
    message = map_generic(result.nodes)
    assert (message.reasoning_content, message.content) == ("plan\ufffd\ufffd", "café \ufffd done")


def test_invalid_utf8_partial_input_keeps_trailing_incomplete_sequence_out(oracle: OracleClient) -> None:
    result = checked_parse(oracle, invalid_utf8_parser(), b"<think>x</think>a\x80b\xe4\xb8", True)
    assert not result.fail
    assert map_generic(result.nodes).content == "a\ufffdb"


# --- the upstream helpers used above, node for node and grammar for grammar with upstream's -------


def _helper_arena(req: dict[str, Any]) -> Arena:
    p = ChatPegBuilder()
    if req["helper"] == "standard_json_tools":
        root = p.standard_json_tools(req["section_start"], req["section_end"], req["tools"],
                                     req["parallel_tool_calls"], req["force_tool_calls"])
    elif req["helper"] == "standard_constructed_tools":
        root = p.standard_constructed_tools(req["markers"], req["tools"], False, False)
    else:
        root = p.permute(req["rule_prefix"], [p.literal(s) for s in req["literals"]])
    p.set_root(root)
    return p.build()


HELPERS: dict[str, dict[str, Any]] = {
    "native tools": {"helper": "standard_json_tools", "section_start": "<tool_call>[", "section_end": "]</tool_call>",
                     "tools": TOOLS, "parallel_tool_calls": False, "force_tool_calls": False},
    "native parallel tools": {"helper": "standard_json_tools", "section_start": "<tool_call>[",
                              "section_end": "]</tool_call>", "tools": TOOLS, "parallel_tool_calls": True,
                              "force_tool_calls": False},
    "qwen3 non-coder": {"helper": "standard_json_tools", "section_start": "<tool_call>",
                        "section_end": "</tool_call>", "tools": TOOLS, "parallel_tool_calls": True,
                        "force_tool_calls": False},
    "prefix tool names": {"helper": "standard_constructed_tools", "markers": PREFIX_MARKERS, "tools": PREFIX_TOOLS},
    "permute abc": {"helper": "permute", "rule_prefix": "abc", "literals": ["a", "b", "c"]},
    "permute abcd": {"helper": "permute", "rule_prefix": "abcd", "literals": ["a", "b", "c", "d"]},
}


@pytest.mark.parametrize("name", list(HELPERS))
def test_helpers_match_upstream(oracle: OracleClient, name: str) -> None:
    expected = oracle.request("peg_build", **HELPERS[name])
    assert not isinstance(expected, OracleError), expected
    arena = _helper_arena(HELPERS[name])
    assert arena.to_json() == expected["parser"]
    assert arena_to_gbnf(arena) == expected["grammar"]
    assert arena_to_gbnf(arena, lazy=True) == expected["grammar_lazy"]
