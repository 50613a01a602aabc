"""llamact.peg.builder / llamact.chat.peg_builder against upstream's builders (the oracle).

Each case names one helper of upstream's ``common_chat_peg_builder`` with its arguments; the
oracle's ``peg_build`` runs it (as the root) and answers the built arena's JSON and its GBNF,
eager and lazy. The same helper is called here through :class:`ChatPegBuilder` the way the
oracle's ``build_helper`` calls it; the arena JSON (node ids included: they follow upstream's
evaluation order) and both grammars must be identical, or both sides must refuse.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from llamact.chat.peg_builder import COMMON_CHAT_MAX_PERMUTE, ChatPegBuilder, build_chat_peg_parser
from llamact.errors import LlamaException
from llamact.parity.oracle import OracleClient, OracleError
from llamact.peg import Arena, Choice, Literal, PegArenaError, Ref, Rule, Sequence, Space, arena_to_gbnf
from llamact.peg.builder import P, ParserBuilder, build_peg_parser, rule_name

pytestmark = pytest.mark.parity


def _build(req: dict[str, Any]) -> Arena:
    """What the oracle's ``build_helper`` does, through our builder."""
    p = ChatPegBuilder()
    helper = req["helper"]
    if helper == "standard_json_tools":
        root = p.standard_json_tools(
            req.get("section_start", ""), req.get("section_end", ""), req.get("tools"),
            req.get("parallel_tool_calls", False), req.get("force_tool_calls", False), req.get("name_key", ""),
            req.get("args_key", ""), req.get("array_wrapped", False), req.get("function_is_key", False),
            req.get("call_id_key", ""), req.get("gen_call_id_key", ""), req.get("parameters_order", []),
            req.get("accept_openai_wrapper", False))
    elif helper == "standard_constructed_tools":
        root = p.standard_constructed_tools(req.get("markers", {}), req.get("tools"),
                                            req.get("parallel_tool_calls", False), req.get("force_tool_calls", False))
    elif helper == "python_style_tool_calls":
        root = p.python_style_tool_calls(req.get("tools"), req.get("parallel_tool_calls", False),
                                         req.get("allow_json_literals", False))
    elif helper == "permute":
        literals = [p.literal(s) for s in req.get("literals", [])]  # made before the call, in order
        root = p.permute(req.get("rule_prefix", "perm"), literals)
    elif helper == "prefix":
        root = p.prefix(req["s"], req.get("delimiter", ""))
    elif helper == "optspace":
        root = p.optspace(req["s"])
    elif helper == "tag_with_safe_content":
        root = p.tag_with_safe_content(req["tag_name"], req.get("marker", ""), p.literal(req["literal"]))
    elif helper == "schema":
        root = p.schema(p.json(), req["name"], req.get("schema"), req.get("raw", False))
    elif helper == "chars":
        root = p.chars(req["classes"], req.get("min", 1), req.get("max", -1))
    elif helper == "json_member":
        root = p.json_member(req["key"], p.json())
    else:
        root = {"json": p.json, "python_value": p.python_value, "quoted_string": p.quoted_string,
                "marker": p.marker}[helper]()
    p.set_root(root)
    return p.build()


def _check(oracle: OracleClient, req: dict[str, Any]) -> None:
    expected = oracle.request("peg_build", **req)
    if isinstance(expected, OracleError):
        with pytest.raises(LlamaException) as info:
            _build(req)
        if expected.message.startswith("JSON schema error"):  # ours; a missing tool name is nlohmann's text
            assert info.value.message == expected.message
        return
    arena = _build(req)
    assert json.loads(json.dumps(arena.to_json())) == expected["parser"]
    for lazy, key in ((False, "grammar"), (True, "grammar_lazy")):
        if isinstance(expected[key], dict):
            with pytest.raises(LlamaException) as info:
                arena_to_gbnf(arena, lazy=lazy)
            # the grammar layer appends where in the schema the problem is
            assert info.value.message.startswith(expected[key]["error"])
        else:
            assert arena_to_gbnf(arena, lazy=lazy) == expected[key], key


def _fn(name: str, params: Any = None, **extra: Any) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, **extra}
    if params is not None:
        function["parameters"] = params
    return {"type": "function", "function": function}


WEATHER = _fn("get_weather", {
    "type": "object",
    "properties": {"location": {"type": "string", "description": "City"},
                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                   "days": {"type": "integer", "minimum": 1}},
    "required": ["location"]})
NESTED = _fn("create-event.v2", {
    "type": "object",
    "properties": {"title": {"type": "string"},
                   "when": {"type": "object", "properties": {"start": {"type": "string", "format": "date-time"},
                                                             "all_day": {"type": "boolean"}},
                            "required": ["start"]},
                   "tags": {"type": "array", "items": {"type": "string"}},
                   "priority": {"anyOf": [{"type": "number"}, {"type": "null"}]}},
    "required": ["when", "title"]})
NO_PARAMS = _fn("ping")
EMPTY_PARAMS = _fn("noop", {})
TOOL_SETS: dict[str, Any] = {
    "none": [],
    "one": [WEATHER],
    "three": [WEATHER, NESTED, NO_PARAMS],
    "missing-function": [{"type": "function"}, EMPTY_PARAMS, "not a tool", WEATHER],
    "only-missing": [{"type": "function"}],
    "non-ascii": [_fn("café_søk", {"type": "object", "properties": {"q": {"type": "string"}, "ñ": {}}})],
}


def _json_tools_cases() -> list[dict[str, Any]]:
    layouts: list[dict[str, Any]] = [
        {},
        {"name_key": "tool_name", "args_key": "parameters"},
        {"call_id_key": "id"},
        {"gen_call_id_key": "tool_call_id", "accept_openai_wrapper": True},
        {"call_id_key": "id", "gen_call_id_key": "tool_call_id", "parameters_order": ["tool_call_id", "name"]},
        {"call_id_key": "id", "parameters_order": ["arguments", "id", "name"]},
        {"parameters_order": ["arguments"]},
        {"parameters_order": ["bogus", "arguments", "name"], "accept_openai_wrapper": True},
        {"name_key": "function.name", "args_key": "function.arguments"},
        {"name_key": "function.name"},
        {"args_key": "call.args", "call_id_key": "id", "gen_call_id_key": "meta.gen"},
        {"name_key": "function.name", "args_key": "function.arguments", "call_id_key": "meta.id",
         "gen_call_id_key": "seq"},
        {"function_is_key": True},
        {"function_is_key": True, "args_key": "arguments"},
        {"function_is_key": True, "call_id_key": "id", "gen_call_id_key": "n"},
        {"function_is_key": True, "args_key": "args", "call_id_key": "id"},
    ]
    cases = []
    for layout, (parallel, force, wrapped) in itertools.product(layouts, itertools.product([False, True], repeat=3)):
        if parallel == force == wrapped or (parallel and not force and not wrapped):
            cases.append({**layout, "tools": TOOL_SETS["three"], "parallel_tool_calls": parallel,
                          "force_tool_calls": force, "array_wrapped": wrapped})
    for layout, tools in itertools.product(layouts[:3] + layouts[8:9] + layouts[12:14], TOOL_SETS):
        cases.append({**layout, "tools": TOOL_SETS[tools], "parallel_tool_calls": True})
    for order in itertools.permutations(["name", "arguments", "id", "tool_call_id"], 3):
        cases.append({"tools": TOOL_SETS["one"], "call_id_key": "id", "gen_call_id_key": "tool_call_id",
                      "parameters_order": list(order)})
    for case in cases:
        case.update(helper="standard_json_tools", section_start="<tool_call>", section_end="</tool_call>")
    cases.append({"helper": "standard_json_tools", "tools": [WEATHER], "force_tool_calls": True})
    cases.append({"helper": "standard_json_tools", "section_start": "[TOOL_CALLS]", "array_wrapped": True,
                  "tools": [WEATHER, NESTED], "parallel_tool_calls": True})
    return cases


JSON_TOOLS_CASES = _json_tools_cases()


@pytest.mark.parametrize("index", range(len(JSON_TOOLS_CASES)))
def test_standard_json_tools(oracle: OracleClient, index: int) -> None:
    _check(oracle, JSON_TOOLS_CASES[index])


BAD_TOOLS: list[Any] = [
    [{"type": "function", "function": {"parameters": {}}}],
    [{"type": "function", "function": {"name": 3}}],
    [_fn("f", "not a schema")],
    [_fn("f", {"type": "object", "properties": ["a"]})],
    [_fn("f", {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}})],
    [_fn("f", {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a"}}})],
    [_fn("f", {"type": "object", "properties": {"a": {"type": "string", "pattern": "^[a$"}}})],
    {"not": "a list"},
]


@pytest.mark.parametrize("helper", ["standard_json_tools", "standard_constructed_tools", "python_style_tool_calls"])
@pytest.mark.parametrize("index", range(len(BAD_TOOLS)))
def test_unusual_tools(oracle: OracleClient, helper: str, index: int) -> None:
    _check(oracle, {"helper": helper, "tools": BAD_TOOLS[index], "section_start": "<tc>", "section_end": "</tc>"})


CUSTOM_MARKERS = {"tool_call_start_marker": "<|tool_calls|>", "tool_call_end_marker": "<|/tool_calls|>",
                  "function_opener": "<invoke name=\"", "function_name_suffix": "\">",
                  "function_closer": "</invoke>", "parameter_key_prefix": "<parameter name=\"",
                  "parameter_key_suffix": "\">", "parameter_closer": "</parameter>"}


@pytest.mark.parametrize("tools", sorted(TOOL_SETS))
@pytest.mark.parametrize("markers", [{}, CUSTOM_MARKERS, {"function_opener": "<fn ", "parameter_closer": ""}])
@pytest.mark.parametrize("parallel,force", [(False, False), (True, False), (False, True), (True, True)])
def test_standard_constructed_tools(oracle: OracleClient, tools: str, markers: dict[str, str], parallel: bool,
                                    force: bool) -> None:
    _check(oracle, {"helper": "standard_constructed_tools", "markers": markers, "tools": TOOL_SETS[tools],
                    "parallel_tool_calls": parallel, "force_tool_calls": force})


PY_TOOLS = dict(TOOL_SETS, mixed=[_fn("calc", {"type": "object", "properties": {
    "expr": {"type": "string"}, "precision": {"type": "integer"}, "opts": {"type": "object"},
    "flags": {"type": ["string", "null"]}, "x": "not a schema"}}), WEATHER])


@pytest.mark.parametrize("tools", sorted(PY_TOOLS))
@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("json_literals", [False, True])
def test_python_style_tool_calls(oracle: OracleClient, tools: str, parallel: bool, json_literals: bool) -> None:
    _check(oracle, {"helper": "python_style_tool_calls", "tools": PY_TOOLS[tools], "parallel_tool_calls": parallel,
                    "allow_json_literals": json_literals})


@pytest.mark.parametrize("count", range(COMMON_CHAT_MAX_PERMUTE + 2))
def test_permute(oracle: OracleClient, count: int) -> None:
    literals = [f"<f{i}>" for i in range(count)]
    _check(oracle, {"helper": "permute", "rule_prefix": "args", "literals": literals})


def test_permute_duplicates_and_odd_prefix(oracle: OracleClient) -> None:
    _check(oracle, {"helper": "permute", "rule_prefix": "my perm/ü", "literals": ["a", "a", "b"]})


@pytest.mark.parametrize("s,delimiter", [("", ""), ("", ">"), ("abc", ""), ("<tool>x", ">"), ("abc", "z"),
                                         ("a>b>c", ">"), (" x ", " "), ("<|é|>", "é"), (">start", ">")])
def test_prefix(oracle: OracleClient, s: str, delimiter: str) -> None:
    _check(oracle, {"helper": "prefix", "s": s, "delimiter": delimiter})


@pytest.mark.parametrize("s", ["", "   ", " <t> ", "\n<tool_call>\n", "x", "\v\fa b\r", "\u00a0x\u00a0", "\t"])
def test_optspace(oracle: OracleClient, s: str) -> None:
    _check(oracle, {"helper": "optspace", "s": s})


@pytest.mark.parametrize("marker", ["", "<tool_call>", "\u00e9"])
@pytest.mark.parametrize("tag_name", ["content", "my content!"])
def test_tag_with_safe_content(oracle: OracleClient, marker: str, tag_name: str) -> None:
    _check(oracle, {"helper": "tag_with_safe_content", "tag_name": tag_name, "marker": marker,
                    "literal": "<tool_call>"})


SCHEMAS: list[Any] = [
    {"type": "string"},
    {"type": "string", "minLength": 2, "maxLength": 5},
    {"enum": ["a", 1, None]},
    {"enum": [1, 2]},
    {"const": "x"},
    {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    {"type": "object", "properties": {"a": {"type": "string"}, "b": {"$ref": "#/$defs/b"}}, "required": ["a"],
     "$defs": {"b": {"type": "array", "items": {"type": "number"}}}},
    {"type": "integer", "minimum": -5, "maximum": 300},
    {},
    {"type": "strin"},
    {"type": "string", "pattern": "^(a$"},
    {"type": "string", "pattern": "^[a-z]+$"},
]


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
@pytest.mark.parametrize("raw", [False, True])
@pytest.mark.parametrize("name", ["args", "root"])
def test_schema(oracle: OracleClient, index: int, raw: bool, name: str) -> None:
    _check(oracle, {"helper": "schema", "name": name, "schema": SCHEMAS[index], "raw": raw})


@pytest.mark.parametrize("classes,lo,hi", [
    ("[a-z]", 1, -1), ("[^a-zA-Z0-9_]", 0, 1), ("[\\n\\t\\r\\\\\\]\\[]", 2, 2),
    ("[\\x41-\\x5a\\u00e9\\U0001F600]", 1, 3),
    ("[\\xZZ\\uQ\\U12]", 0, -1), ("[é-ü中]", 1, -1), ("[\\é]", 1, 1), ("[-a-]", 4, -1), ("[]", 1, -1), ("", 1, -1),
    ("abc", 0, 0), ("[^]", 1, 1), ("[z-a]", 1, 1), ("[\\q\\-]", 3, 7)])
def test_chars(oracle: OracleClient, classes: str, lo: int, hi: int) -> None:
    _check(oracle, {"helper": "chars", "classes": classes, "min": lo, "max": hi})


@pytest.mark.parametrize("helper", ["json", "python_value", "quoted_string", "marker"])
def test_value_helpers(oracle: OracleClient, helper: str) -> None:
    _check(oracle, {"helper": helper})


@pytest.mark.parametrize("key", ["name", "a b", "quo\"te", "ключ", ""])
def test_json_member(oracle: OracleClient, key: str) -> None:
    _check(oracle, {"helper": "json_member", "key": key})


# -- the handle operators and the builder itself (upstream's semantics, no oracle needed) ---------


def test_operators_allocate_as_upstream() -> None:
    b = ParserBuilder()
    a, c = b.literal("a"), b.literal("c")
    s = a + c
    assert b.get(s) == Sequence((a.id, c.id))
    assert b.get(s + a) == Sequence((a.id, c.id, a.id))  # nested sequences are spliced
    assert b.get(a | c | a) == Choice((a.id, c.id, a.id))
    n = len(b)
    t = "x" + a  # the free operator: literal first, then the sequence
    assert b.get(n) == Literal("x") and b.get(t) == Sequence((n, a.id)) and t.id == n + 1
    u = a + "y"
    assert b.get(u.id - 1) == Literal("y") and b.get(u) == Sequence((a.id, u.id - 1))
    v = "z" | a
    assert b.get(v) == Choice((v.id - 1, a.id))
    w = a << c
    assert b.get(w) == Sequence((a.id, w.id - 1, c.id)) and b.get(w.id - 1) == Space()
    x = "q" << a
    assert b.get(x) == Sequence((x.id - 2, x.id - 1, a.id)) and b.get(x.id - 2) == Literal("q")
    assert a == P(a.id, b) == a.id and a != c and a != P(a.id, ParserBuilder())  # handles compare by id


def test_in_place_operators_rebind_only_the_name() -> None:
    b = ParserBuilder()
    a = b.literal("a")
    alias = a
    a += b.literal("b")
    assert isinstance(b.get(a), Sequence) and alias.id == 0
    a |= "c"
    assert isinstance(b.get(a), Choice) and alias.id == 0


def test_seq_rtl_evaluates_right_to_left() -> None:
    b = ParserBuilder()
    order: list[str] = []

    def make(text: str):
        return lambda: (order.append(text), b.literal(text))[1]

    chain = b.seq_rtl(make("a"), make("b"), "c", make("d"))
    assert order == ["d", "b", "a"]
    assert [b.get(i) for i in b.get(chain).children] == [Literal("a"), Literal("b"), Literal("c"), Literal("d")]


@pytest.mark.parametrize("name,clean", [("tool-get_weather", "tool-get-weather"), ("a.b..c", "a-b-c"),
                                        ("ok-Name9", "ok-Name9"), ("café søk", "caf-s-k"), ("__x__", "-x-"), ("", "")])
def test_rule_name(name: str, clean: str) -> None:
    assert rule_name(name) == clean


def test_rule_overloads_and_build() -> None:
    def fn(p: ParserBuilder) -> P:
        expr = p.rule("expr x", lambda: p.choice([p.literal("1"), p.sequence([p.literal("("), p.ref("expr-x"),
                                                                               p.literal(")")])]))
        again = p.rule("expr x", lambda: p.literal("never built"))
        assert isinstance(p.get(again), Ref)
        return p.trigger_rule("top", expr)

    arena = build_peg_parser(fn)
    assert set(arena.rules) == {"expr-x", "top"}
    top = arena.get(arena.root)
    assert isinstance(top, Rule) and top.trigger and top.child == arena.rules["expr-x"]
    assert not any(isinstance(node, Literal) and node.literal == "never built" for node in arena.parsers)
    assert isinstance(arena.get(1), Rule) and arena.get(1).child == 0  # the placeholder rule over any()


def test_builder_misuse_raises() -> None:
    b = ChatPegBuilder()
    with pytest.raises(PegArenaError, match="ac parser requires at least one delimiter"):
        b.ac(b.any(), [])
    assert isinstance(b.get(b.ac(b.any(), "")), object)
    b.set_root(b.ref("missing"))
    with pytest.raises(PegArenaError, match="Rule not found: missing"):
        b.build()
    with pytest.raises(PegArenaError):
        b.sequence([b.any(), 999])
    arena = build_chat_peg_parser(lambda p: p.content(p.rest()))
    assert arena.to_json()["parsers"][-1] == {"type": "tag", "child": 0, "tag": "content"}
