"""Parity of the PEG AST -> message mappers (llamact/chat/peg_mappers.py) with upstream's.

Every expectation comes from the oracle: for each arena and text, ``chat_parse_stream`` gives
upstream's message (or its error) for every prefix parsed partially and the whole text parsed
finally; ``peg_parse`` gives the raw AST upstream built for that prefix. The AST is rebuilt as
:class:`AstNode` trees and our mapper runs on it, so these tests check the mappers alone, not
the PEG executor.

Arenas are hand-written (a small builder below, splicing upstream's own ``json()`` /
``python_value()`` parsers from ``peg_build``) to reach each mapper path, plus real ones from
``chat_apply`` with the vendored templates.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llamact.chat.messages import ChatMessage, ContentPart, ToolCall
from llamact.chat.peg_mappers import (
    map_gemma4,
    map_generic,
    map_minimax_m3,
    map_tags,
    mapper_for_format,
    normalize_quotes_to_json,
)
from llamact.parity.oracle import OracleError
from llamact.peg.ast import AstNode

pytestmark = pytest.mark.parity

TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"


# --- helpers ------------------------------------------------------------------------------------


class ArenaBuilder:
    """Upstream's arena JSON, node by node; each method returns the new node's id."""

    def __init__(self) -> None:
        self.parsers: list[dict[str, Any]] = []
        self.rules: dict[str, int] = {}

    def add(self, **node: Any) -> int:
        self.parsers.append(node)
        return len(self.parsers) - 1

    def lit(self, s: str) -> int:
        return self.add(type="literal", literal=s)

    def seq(self, *children: int) -> int:
        return self.add(type="sequence", children=list(children))

    def choice(self, *children: int) -> int:
        return self.add(type="choice", children=list(children))

    def rep(self, child: int, lo: int, hi: int) -> int:
        return self.add(type="repetition", child=child, min_count=lo, max_count=hi)

    def opt(self, child: int) -> int:
        return self.rep(child, 0, 1)

    def star(self, child: int) -> int:
        return self.rep(child, 0, -1)

    def rest(self) -> int:
        return self.star(self.add(type="any"))

    def until(self, *delimiters: str) -> int:
        return self.add(type="until", delimiters=list(delimiters))

    def space(self) -> int:
        return self.add(type="space")

    def end(self) -> int:
        return self.add(type="end")

    def tag(self, tag: str, child: int) -> int:
        return self.add(type="tag", child=child, tag=tag)

    def atag(self, tag: str, child: int) -> int:
        """An atomic tag, as upstream's tool_open / tool_name / tool_arg_name / ... are."""
        return self.add(type="atomic", child=self.tag(tag, child))

    def rule(self, name: str, child: int) -> int:
        self.rules[name] = self.add(type="rule", name=name, child=child, trigger=False)
        return self.rules[name]

    def splice(self, arena: dict[str, Any]) -> int:
        """Append another arena's nodes (ids shifted, rules merged); returns its root."""
        off = len(self.parsers)
        for node in arena["parsers"]:
            node = dict(node)
            if "child" in node:
                node["child"] += off
            if "children" in node:
                node["children"] = [c + off for c in node["children"]]
            self.parsers.append(node)
        for name, rule_id in arena["rules"].items():
            self.rules.setdefault(name, rule_id + off)
        return int(arena["root"]) + off

    def build(self, root: int) -> dict[str, Any]:
        return {"parsers": self.parsers, "rules": self.rules, "root": root}


def ast_from_json(j: dict[str, Any], source: bytes) -> AstNode:
    return AstNode(j["rule"], j["tag"], j["start"], j["end"], source,
                   tuple(ast_from_json(c, source) for c in j["children"]), j["is_partial"],
                   tuple((p, n) for p, n in j["invalid_utf8"]))


def map_like_upstream(raw: dict[str, Any], source: bytes, fmt: str, is_partial: bool) -> ChatMessage:
    """``common_chat_peg_parse`` after the parse (only for these tests; the real one lives elsewhere)."""
    nodes = [ast_from_json(n, source) for n in raw["nodes"]]
    if raw["type"] == "fail" and not (is_partial and raw["end"] > 0):
        raise ValueError(f"The model produced output that does not match the expected {fmt} format")
    return mapper_for_format(fmt)(nodes)


def check_stream(oracle: Any, arena: dict[str, Any], fmt: str, text: str) -> list[dict[str, Any]]:
    """Every prefix (partial) and the whole text (final) of ``text``: ours == upstream's. Returns
    upstream's steps."""
    steps = oracle.request("chat_parse_stream", parser=arena, format=fmt, text=text)
    assert not isinstance(steps, OracleError), steps
    src = text.encode()
    raws: dict[int, dict[str, Any]] = {}
    for step in steps:
        end = step["end"]
        if end not in raws:
            raws[end] = oracle.request("peg_parse", parser=arena, text=src[:end].decode())
            assert not isinstance(raws[end], OracleError), raws[end]
        where = f"{fmt} is_partial={step['is_partial']} text={src[:end].decode()!r}"
        try:
            got = map_like_upstream(raws[end], src[:end], fmt, step["is_partial"]).to_dict()
        except ValueError as exc:
            assert "message" not in step and step.get("error") == str(exc), where
            continue
        # (a step may carry both: the message, then an error from upstream's diffing of it)
        assert "message" in step, f"{where}: upstream failed with {step['error']!r}"
        assert got == step["message"], where
    return steps


def final_message(steps: list[dict[str, Any]]) -> dict[str, Any]:
    last = steps[-1]
    assert not last["is_partial"] and "message" in last, last
    return last["message"]


# --- hand-written arenas, one mapper path each ---------------------------------------------------


def arena_reasoning_content() -> dict[str, Any]:
    """<think>reasoning</think> then content chunks split at <br> (several content nodes)."""
    b = ArenaBuilder()
    think = b.opt(b.seq(b.lit("<think>"), b.tag("reasoning", b.until("</think>")), b.lit("</think>")))
    chunk = b.choice(b.lit("<br>"), b.tag("content", b.seq(b.add(type="any"), b.until("<br>"))))
    return b.build(b.rule("root", b.seq(think, b.star(chunk), b.end())))


def arena_json_tools(json_root: dict[str, Any]) -> dict[str, Any]:
    """Hermes style: <tool_call>{"name": "...", "arguments": {...}}</tool_call>, optional "id"."""
    b = ArenaBuilder()
    json = b.splice(json_root)
    sp = b.space()
    ident = b.opt(b.seq(b.lit('"id": '), b.atag("tool-id", b.seq(b.lit('"'), b.until('"'), b.lit('"'))), b.lit(", ")))
    call = b.tag("tool", b.seq(
        b.atag("tool-open", b.lit("<tool_call>")), sp, b.lit("{"), ident, b.lit('"name": "'),
        b.atag("tool-name", b.until('"')), b.lit('", "arguments": '), b.tag("tool-args", json), sp, b.lit("}"), sp,
        b.atag("tool-close", b.lit("</tool_call>"))))
    content = b.tag("content", b.until("<tool_call>"))
    return b.build(b.rule("root", b.seq(content, b.star(b.seq(call, sp)), b.end())))


def arena_args_first(json_root: dict[str, Any]) -> dict[str, Any]:
    """Arguments before the name (args_buffer): JSON args, or tagged ones; the name is optional, so an
    unnamed call reaches its close (and is dropped)."""
    b = ArenaBuilder()
    json = b.splice(json_root)
    arg = b.seq(b.atag("tool-arg-open", b.lit("<")), b.atag("tool-arg-name", b.until(">")), b.lit(">"),
                b.tag("tool-arg-string-value", b.until("</>")), b.atag("tool-arg-close", b.lit("</>")))
    args = b.choice(b.tag("tool-args", json), b.star(arg))
    name = b.opt(b.seq(b.lit(" as "), b.atag("tool-name", b.until(";"))))
    call = b.tag("tool", b.seq(b.atag("tool-open", b.lit("[call ")), args, name,
                               b.atag("tool-close", b.lit(";]"))))
    content = b.tag("content", b.seq(b.add(type="any"), b.until("[call ")))
    return b.build(b.rule("root", b.seq(b.star(b.choice(call, content)), b.end())))


def arena_tagged_args(python_root: dict[str, Any]) -> dict[str, Any]:
    """Qwen3-Coder style tagged arguments: <function=NAME><parameter=ARG>VALUE</parameter>...; the
    parameter "s" is a string (split into chunks at \\n, each its own string-value node), "e" an
    empty-able string, "p" a python value, anything else raw text normalised as a container."""
    b = ArenaBuilder()
    py = b.splice(python_root)
    stops = ("\n", "</parameter>", "</function>")
    chunk = b.seq(*(b.add(type="not", child=b.lit(stop)) for stop in stops), b.add(type="any"), b.until(*stops))
    string_chunks = b.star(b.choice(b.tag("tool-arg-string-value", chunk), b.lit("\n")))
    value = b.choice(
        b.seq(b.atag("tool-arg-name", b.lit("s")), b.lit(">"), string_chunks),
        b.seq(b.atag("tool-arg-name", b.lit("e")), b.lit(">"), b.tag("tool-arg-string-value", b.until("</parameter>"))),
        b.seq(b.atag("tool-arg-name", b.lit("p")), b.lit(">"), b.tag("tool-arg-value", py)),
        b.seq(b.atag("tool-arg-name", b.until(">")), b.lit(">"), b.tag("tool-arg-value", b.until("</parameter>"))))
    arg = b.tag("tool-arg", b.seq(b.atag("tool-arg-open", b.lit("<parameter=")), value,
                                  b.opt(b.atag("tool-arg-close", b.lit("</parameter>"))), b.space()))
    call = b.tag("tool", b.seq(b.atag("tool-open", b.lit("<function=")), b.atag("tool-name", b.until(">")), b.lit(">"),
                               b.space(), b.star(arg), b.atag("tool-close", b.lit("</function>")), b.space()))
    content = b.tag("content", b.until("<function="))
    return b.build(b.rule("root", b.seq(content, b.star(call), b.end())))


def arena_gemma4_edges() -> dict[str, Any]:
    """gemma4 rules with non-atomic (so possibly partial) names, unknown rules and a tool without args."""
    b = ArenaBuilder()
    sc = b.rule("gemma4-string-content", b.until("'"))
    string = b.rule("gemma4-string", b.seq(b.lit("'"), sc, b.lit("'")))
    num = b.rule("gemma4-number", b.add(type="chars", pattern="[0-9]", ranges=[{"start": 48, "end": 57}],
                                        negated=False, min_count=1, max_count=-1))
    boolean = b.rule("gemma4-bool", b.choice(b.lit("true"), b.lit("false")))
    null = b.rule("gemma4-null", b.lit("null"))
    other = b.rule("mystery", b.lit("?"))
    value_ref = b.add(type="ref", name="gemma4-value")
    array = b.rule("gemma4-array", b.seq(b.lit("["), b.opt(b.seq(value_ref, b.star(b.seq(b.lit(","), value_ref)))),
                                         b.lit("]")))
    key = b.rule("gemma4-dict-key", b.choice(string, b.rule("gemma4-dict-key-name", b.until(":", "}", ","))))
    kv = b.rule("gemma4-dict-kv", b.seq(key, b.lit(":"), value_ref))
    dct = b.rule("gemma4-dict", b.seq(b.lit("{"), b.opt(b.seq(kv, b.star(b.seq(b.lit(","), kv)))), b.lit("}")))
    b.rule("gemma4-value", b.choice(string, array, dct, num, boolean, null, other))
    call = b.tag("tool", b.seq(b.lit("<call:"), b.tag("tool-name", b.until("{", ">")),
                               b.opt(b.tag("tool-args", dct)), b.lit(">")))
    body = b.star(b.choice(call, b.tag("reasoning", b.seq(b.lit("~"), b.until("<call:", "~"))),
                           b.tag("content", b.seq(b.add(type="any"), b.until("<call:", "~")))))
    return b.build(b.rule("root", b.seq(body, b.end())))


def arena_minimax_edges() -> dict[str, Any]:
    """minimax-m3 tags with a non-atomic name: <invoke NAME>(<ARG>VALUE</>)*</invoke>, where VALUE is
    "text" (string), [item|item] (array), {<ARG>..</>} (object) or bare text (a number)."""
    b = ArenaBuilder()
    value = b.choice(
        b.seq(b.lit('"'), b.tag("tool-arg-string-value", b.until('"')), b.lit('"')),
        b.tag("tool-arg-array", b.add(type="ref", name="mm-array")),
        b.tag("tool-arg-object", b.add(type="ref", name="mm-object")),
        b.tag("tool-arg-value", b.until("</>", "|", "]")))
    member = b.tag("tool-arg", b.seq(b.add(type="not", child=b.lit("</")), b.lit("<"),
                                     b.tag("tool-arg-name", b.until(">")), b.lit(">"), value, b.lit("</>")))
    item = b.tag("tool-arg-item", value)
    b.rule("mm-array", b.seq(b.lit("["), b.opt(b.seq(item, b.star(b.seq(b.lit("|"), item)))), b.lit("]")))
    b.rule("mm-object", b.seq(b.lit("{"), b.star(member), b.lit("}")))
    call = b.tag("tool", b.seq(b.lit("<invoke "), b.tag("tool-name", b.until(">")), b.lit(">"), b.star(member),
                               b.lit("</invoke>")))
    body = b.star(b.choice(call, b.tag("reasoning", b.seq(b.lit("~"), b.until("<invoke ", "~"))),
                           b.tag("content", b.seq(b.add(type="any"), b.until("<invoke ", "~")))))
    return b.build(b.rule("root", b.seq(body, b.end())))


@pytest.fixture(scope="module")
def upstream_parsers(oracle: Any) -> dict[str, dict[str, Any]]:
    out = {}
    for helper in ("json", "python_value"):
        built = oracle.request("peg_build", helper=helper)
        assert not isinstance(built, OracleError), built
        out[helper] = built["parser"]
    return out


HAND_CASES: list[tuple[str, Callable[[dict[str, dict[str, Any]]], dict[str, Any]], str, list[str]]] = [
    ("reasoning_content", lambda u: arena_reasoning_content(), "peg-native", [
        "<think>\n \t\r\n</think>Hello<br>world<br>é!",
        "<think>Deep thought</think>a<br><br>b",
        "<think>  </think>",
        "<think>x",
        "<think> \f</think>x",
        "plain",
    ]),
    ("json_tools", lambda u: arena_json_tools(u["json"]), "peg-native", [
        'Hi <tool_call>{"name": "f", "arguments": {"a": 1, "b": {"c": "}{\\"x"}}}</tool_call>',
        '<tool_call>{"id": "call_7", "name": "g", "arguments": {}}</tool_call> <tool_call>{"name": "h", '
        '"arguments": {"s": "ü\\n\\u0001"}}</tool_call>',
        '<tool_call>{"name": "f", "arguments": [1]}</tool_call>',
        '<tool_call>{"name": "f", "arguments": {"a": [{"b": null}], "t": true}   }</tool_call>',
    ]),
    ("args_first", lambda u: arena_args_first(u["json"]), "peg-native", [
        '[call {"x": {"y": 2}} as fn;]',
        "[call <city>Paris</><note>say \"hi\"\n</> as weather;]",
        "[call <a>1</>;]text[call <b></> as named;]",
        '[call {"q": 1};]after',
        "[call <k>v</> as n1;][call <k>w",
    ]),
    ("tagged_args", lambda u: arena_tagged_args(u["python_value"]), "peg-simple", [
        "Let me call it.\n<function=f>\n<parameter=s>line one\nline \"two\"\n</parameter>\n<parameter=n>42</parameter>"
        "\n</function>\n",
        "<function=g><parameter=e></parameter><parameter=p>{'a': True, 'b': None, 'c': 'it\\'s'}</parameter>"
        "<parameter=x>[False, Nonesuch, 'q\"']</parameter></function>",
        "<function=h><parameter=x>{\"nested\": {\"deep\": {</parameter></function>",
        "<function=h><parameter=s>unclosed string</function><function=i><parameter= x\t>{'a': 'b\"'}</parameter>"
        "</function>",
        "<function=k><parameter=p>['a', \"b\", 3.5]</parameter><parameter=x>TrueFalse</parameter></function>",
    ]),
    ("gemma4_edges", lambda u: arena_gemma4_edges(), "peg-gemma4", [
        "~think~Hi <call:f{a:'x\"y',b:[1,'two',true,null,?],c:{'k k':false},d:{}}> bye",
        "<call:noargs><call:g{n:12}>",
        "<call:k{a\"b\\:1,'q\"':[]}>",
        "~only thinking",
    ]),
    ("minimax_edges", lambda u: arena_minimax_edges(), "peg-minimax-m3", [
        '~plan~Text<invoke f><a>"x\\y\n"</><n>42</><l>["p"|{<k>1</>}|[]]</><o>{<i>"j"</><e>{}</>}</></invoke>tail',
        "<invoke g></invoke><invoke h><z> 3 </></invoke>",
        '<invoke k><s>""</><arr>[]</></invoke>',
    ]),
]


@pytest.mark.parametrize("case", HAND_CASES, ids=[c[0] for c in HAND_CASES])
def test_hand_arenas(oracle: Any, upstream_parsers: dict[str, dict[str, Any]], case: Any) -> None:
    name, make, fmt, texts = case
    arena = make(upstream_parsers)
    finals = [final_message(check_stream(oracle, arena, fmt, text)) for text in texts]
    if name != "reasoning_content":  # guard against a broken arena making the comparison vacuous
        assert any(m["tool_calls"] for m in finals), "the case should produce tool calls"


# --- real arenas from the vendored templates -----------------------------------------------------


def _tool(name: str, properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    params = {"type": "object", "properties": properties, "required": required or list(properties)}
    return {"type": "function", "function": {"name": name, "description": name, "parameters": params}}


TOOLS = [
    _tool("special_function", {"arg1": {"type": "integer"}}),
    _tool("special_function_with_opt", {"arg1": {"type": "integer"}, "arg2": {"type": "integer"}}, ["arg1"]),
    _tool("get_time", {"city": {"type": "string"}}),
    _tool("empty_args", {}),
    _tool("toggle", {"enabled": {"type": "boolean"}}),
    _tool("set_nullable", {"value": {"type": "null"}}),
    _tool("set_config", {"config": {"type": "object"}}),
    _tool("todo_list", {"todos": {"type": "array"}}),
    _tool("python", {"code": {"type": "string"}}),
    _tool("imaginary_number", {"number": {"type": "object", "properties": {"real": {"type": "number"},
                                                                           "imaginary": {"type": "number"}}}}),
    _tool("nested_args", {"tags": {"type": "array", "items": {"type": "string"}},
                          "entries": {"type": "array", "items": {"type": "object", "properties": {
                              "id": {"type": "integer"}, "label": {"type": "string"}}}}}),
]

MM = "]<]minimax[>["
# (template, chat_apply inputs beyond messages and tools ("without": tools the template cannot render), outputs)
TEMPLATE_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("google-gemma-4-31B-it.jinja", {}, [
        "<|channel>thought\nI'm\nthinking<channel|>Hello, world!\nWhat's up?",
        '<|tool_call>call:get_time{city:<|"|>San "Francisco"<|"|>}<tool_call|>',
        "<|tool_call>call:empty_args{}<tool_call|>",
        'Hi<|tool_call>call:set_config{config:{theme:<|"|>dark<|"|>,count:3,n:null,b:true}}<tool_call|>',
        '<|tool_call>call:todo_list{todos:[<|"|>buy milk<|"|>,<|"|>walk dog<|"|>,[],{}]}<tool_call|>'
        "<|tool_call>call:special_function{arg1:-7}<tool_call|>",
    ]),
    ("MiniMax-M3.jinja", {}, [
        "<mm:think>I'm\nthinking</mm:think>Hello, world!",
        f"<mm:think>Let me check</mm:think>{MM}<tool_call>\n{MM}<invoke name=\"get_time\">{MM}<city>Tokyo"
        f"{MM}</city>{MM}</invoke>\n{MM}</tool_call>",
        f"</mm:think>Calling.{MM}<tool_call>\n{MM}<invoke name=\"imaginary_number\">{MM}<number>{MM}<real>1.5"
        f"{MM}</real>{MM}<imaginary>-2.5{MM}</imaginary>{MM}</number>{MM}</invoke>\n{MM}<invoke name=\"empty_args\">"
        f"{MM}</invoke>\n{MM}</tool_call>",
        f"</mm:think>{MM}<tool_call>\n{MM}<invoke name=\"nested_args\">{MM}<tags>{MM}<item>alpha{MM}</item>"
        f"{MM}<item>beta{MM}</item>{MM}</tags>{MM}<entries>{MM}<item>{MM}<id>1{MM}</id>{MM}<label>one{MM}</label>"
        f"{MM}</item>{MM}</entries>{MM}</invoke>\n{MM}</tool_call>",
    ]),
    ("Qwen3-Coder.jinja", {}, [
        "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>",
        "Let me call it.\n<function=python>\n<parameter=code>\nprint('hi')\nx = \"y\"\n</parameter>\n</function>\n"
        "</tool_call>\n<tool_call>\n<function=special_function_with_opt>\n<parameter=arg1>\n1\n</parameter>\n"
        "<parameter=arg2>\n2\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=set_config>\n<parameter=config>\n{'a': True, 'b': None}\n</parameter>\n</function>\n"
        "</tool_call>",
    ]),
    ("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", {"without": ["set_nullable"]}, [
        'Hello<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}</tool_call>',
        '<tool_call>\n{"name": "set_config", "arguments": {"config": {"a": {"b": "}"}}}}</tool_call>',
    ]),
    ("LFM2-8B-A1B.jinja", {}, [
        "<|tool_call_start|>[toggle(enabled=True), set_nullable(value=None)]<|tool_call_end|>",
        "Sure.<|tool_call_start|>[set_config(config={\"enabled\": True, 'note': 'it\\'s'})]<|tool_call_end|>",
        "<|tool_call_start|>[python(code=\"print(\\\"hi\\\")\\n\")]<|tool_call_end|>",
    ]),
    ("moonshotai-Kimi-K2.jinja", {}, [
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>"
        "{\"arg1\": 1}<|tool_call_end|><|tool_calls_section_end|>",
    ]),
    ("GLM-4.6.jinja", {}, [
        "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n</tool_call>",
        "<tool_call>get_time\n<arg_key>city</arg_key>\n<arg_value>New \"York\"</arg_value>\n</tool_call>",
    ]),
    ("Qwen-Qwen3-0.6B.jinja", {"reasoning_format": "deepseek"}, [
        "<think>\n\n</think>\n\nHello!",
        "<think>Hmm</think>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
    ]),
    ("openai-gpt-oss-120b.jinja", {"without": ["todo_list"]}, [
        "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final<|message|>Hi",
        "<|channel|>analysis<|message|>Hmm<|end|><|start|>assistant to=functions.special_function<|channel|>"
        "commentary <|constrain|>json<|message|>{\"arg1\": 1}",
    ]),
    ("deepseek-ai-DeepSeek-V3.1.jinja", {"reasoning_format": "deepseek", "enable_thinking": False}, [
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": \"XYZCITY\"}"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    ]),
]


@pytest.mark.parametrize("case", TEMPLATE_CASES, ids=[c[0].removesuffix(".jinja") for c in TEMPLATE_CASES])
def test_template_arenas(oracle: Any, case: Any) -> None:
    name, extra, outputs = case
    extra = dict(extra)
    without = extra.pop("without", [])
    inputs = {"messages": [{"role": "user", "content": "hi"}], "parallel_tool_calls": True, "reasoning_format": "auto",
              "tools": [t for t in TOOLS if t["function"]["name"] not in without], **extra}
    applied = oracle.request("chat_apply", template=(TEMPLATES / name).read_text(), inputs=inputs)
    assert not isinstance(applied, OracleError), applied
    assert applied["parser"], f"{name} has no PEG parser"
    finals = [final_message(check_stream(oracle, applied["parser"], applied["format"],
                                         applied["generation_prompt"] + out)) for out in outputs]
    assert any(m["tool_calls"] for m in finals)


# --- normalize_quotes_to_json and the argument helpers through the generic mapper ----------------


def _value_arena() -> dict[str, Any]:
    """<f:a=VALUE|: one named call whose argument "a" is VALUE as a tool-arg-value, never closed, so
    its arguments are exactly '{"a":' + normalize_quotes_to_json(VALUE)."""
    b = ArenaBuilder()
    call = b.seq(b.atag("tool-open", b.lit("<")), b.atag("tool-name", b.lit("f")), b.lit(":"),
                 b.atag("tool-arg-name", b.lit("a")), b.lit("="), b.tag("tool-arg-value", b.until("|")), b.lit("|"))
    return b.build(b.rule("root", call))


NORMALIZE_CASES = [
    "{'key': 'value'}", "{'code': 'print(\\'hello\\')'}", "{'msg': 'He said \"hi\"'}", '{"a": \'b\'}',
    "True", "False", "None", "Tr", "Fa", "N", "Truex", "TrueFalse", "xTrue", "_None", "[True, False, None]",
    "{'a': True}", '"True"', "'None'", "\\'x\\'", "'a\\\\b'", "'a\\nb'", "\"a\\\"b\"", "T", "Nope", "Fals",
    "été None", "'ü' True", "\\", "'\\", "\"\\", "{'a': 'b', \"c\": 'd\"e'}", "", "1e5", "Nan",
]


def _random_values(n: int) -> list[str]:
    rng = random.Random(1234)
    alphabet = list("\\\"'TFN{}[]:, x_1é") + ["True", "False", "None", "Tru", "Non"]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 14))) for _ in range(n)]


def test_normalize_quotes_to_json(oracle: Any) -> None:
    arena = _value_arena()
    for value in NORMALIZE_CASES + _random_values(1500):
        if "|" in value:
            continue
        msg = oracle.request("chat_parse", parser=arena, format="peg-native", text=f"<f:a={value}|")
        assert not isinstance(msg, OracleError), (value, msg)
        args = msg["tool_calls"][0]["arguments"]
        assert args.startswith('{"a":'), args
        assert normalize_quotes_to_json(value) == args[len('{"a":'):], value


def _close_arena() -> dict[str, Any]:
    """<f ARGS| : JSON-ish arguments that the tool close completes (braces, trailing space)."""
    b = ArenaBuilder()
    call = b.seq(b.atag("tool-open", b.lit("<")), b.atag("tool-name", b.lit("f")), b.lit(" "),
                 b.tag("tool-args", b.until("|")), b.atag("tool-close", b.lit("|")))
    return b.build(b.rule("root", call))


def test_brace_closing_and_trims(oracle: Any) -> None:
    arena = _close_arena()
    rng = random.Random(99)
    alphabet = list('{}"\\ \t\n\v\fxé:,')
    values = ["{" + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(1500)]
    values += ['{"a": {"b": "}"', '{"a": "\\"{"', "{ \v\f\r", "x{", '{"\\', '{"a": {}}}}']
    for value in values:
        text = f"<f {value}|"
        raw = oracle.request("peg_parse", parser=arena, text=text)
        expected = oracle.request("chat_parse", parser=arena, format="peg-native", text=text)
        assert not isinstance(expected, OracleError), (value, expected)
        nodes = [ast_from_json(n, text.encode()) for n in raw["nodes"]]
        assert map_generic(nodes).to_dict() == expected, value


# --- map_tags, the message type ------------------------------------------------------------------


def test_map_tags(oracle: Any, upstream_parsers: dict[str, dict[str, Any]]) -> None:
    arena = arena_tagged_args(upstream_parsers["python_value"])
    text = "Hi <function=f><parameter=n>1</parameter><parameter=s>a\nb</parameter></function>"
    raw = oracle.request("peg_parse", parser=arena, text=text)
    src = text.encode()
    # upstream's tag_based_peg_mapper from its own AST: last text per tag in pre-order, keys sorted
    expected: dict[str, str] = {}
    stack = list(reversed(raw["nodes"]))
    while stack:
        node = stack.pop()
        if node["tag"]:
            expected[node["tag"]] = src[node["start"]:node["end"]].decode()
        stack.extend(reversed(node["children"]))
    got = map_tags([ast_from_json(n, src) for n in raw["nodes"]])
    assert got == expected and list(got) == sorted(expected)
    assert got["tool-arg-string-value"] == "b" and got["tool-name"] == "f"


def test_mapper_for_format() -> None:
    assert mapper_for_format("peg-gemma4") is map_gemma4
    assert mapper_for_format("peg-minimax-m3") is map_minimax_m3
    for name in ("peg-native", "peg-simple", "Content-only", "anything"):
        assert mapper_for_format(name) is map_generic


def test_message_dict_round_trip(oracle: Any) -> None:
    msg = ChatMessage(role="assistant", content="c", content_parts=[ContentPart("text", "t")],
                      reasoning_content="r", tool_calls=[ToolCall("f", '{"a":1}', "id1")], tool_name="n",
                      tool_call_id="tc")
    assert ChatMessage.from_dict(msg.to_dict()) == msg
    assert not msg.empty() and ChatMessage(role="assistant").empty() and ChatMessage().role == ""
    # the shape (key order included) is the oracle's msg_to_json
    upstream = oracle.request("chat_parse", format="Content-only", text="x")
    assert list(ChatMessage().to_dict()) == list(upstream)
    assert ChatMessage.from_dict(upstream) == ChatMessage(role="assistant", content="x")
