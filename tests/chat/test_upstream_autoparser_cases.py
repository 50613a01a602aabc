"""Upstream's vendor/llama.cpp/tests/test-chat-auto-parser.cpp, re-expressed against the oracle.

Every case first asserts llamact equal to the oracle, which runs upstream's own code:

* the string helpers (segments, ``calculate_diff_split``, ``until_common_prefix``,
  ``after_common_suffix``) and ``compare_variants`` through the oracle's ``autoparser_helper`` op;
* the per-template analyses (Seed-OSS diffs, Nemotron, Laguna x3, Cohere, SmolLM3, Bailing V3, the
  role-marker table over every autoparser template) through ``autoparser_helper`` /
  ``analyze``, the whole analysis compared, not only the fields upstream checks;
* the chat-PEG cases (``standard_json_tools`` in three layouts, tagged arguments with embedded
  quotes, ``normalize_quotes_to_json``) through ``peg_build`` (upstream's helper, node for node)
  and ``chat_parse`` (upstream's parser and mapper run on our arena).

Upstream's own expectations are asserted on top, as literals from the .cpp (they are upstream's
assertions, kept to show the re-expression is faithful; the oracle is the reference). Not
re-expressed: the debug-dump mode of the program, and the second half of the Bailing V3 case
(``autoparser::build_parser``, the generator, which is not part of the analysis).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llamact.chat.autoparser.analysis import run_analysis
from llamact.chat.autoparser.diff_split import calculate_diff_split, segmentize_markers
from llamact.chat.autoparser.helpers import after_common_suffix, until_common_prefix
from llamact.chat.autoparser.model import AutoparserAnalysis
from llamact.chat.autoparser.variants import TemplateParams, TemplateProbe
from llamact.chat.output_parser import parse_chat_output
from llamact.chat.peg_builder import ChatPegBuilder, build_chat_peg_parser
from llamact.chat.peg_mappers import normalize_quotes_to_json
from llamact.chat.templates import compile_chat_template, load_chat_templates
from llamact.json_types import Json
from llamact.parity.oracle import OracleClient, OracleError

pytestmark = pytest.mark.parity

TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"


def helper(oracle: OracleClient, name: str, **fields: Any) -> Json:
    answer = oracle.request("autoparser_helper", helper=name, **fields)
    assert not isinstance(answer, OracleError), answer
    return answer


def split_json(left: str, right: str) -> dict[str, str]:
    d = calculate_diff_split(left, right)
    return {"prefix": d.prefix, "suffix": d.suffix, "left": d.left, "right": d.right}


# --- segments (test_marker_separation) -----------------------------------------------------------

SEGMENT_CASES = {
    "pre_marker[marker]post_marker": [("TEXT", "pre_marker"), ("MARKER", "[marker]"), ("TEXT", "post_marker")],
    "pre_marker<marker>post_marker": [("TEXT", "pre_marker"), ("MARKER", "<marker>"), ("TEXT", "post_marker")],
    "<hello>world</hello>": [("MARKER", "<hello>"), ("TEXT", "world"), ("MARKER", "</hello>")],
    "<hello>[hello]<world>[world]": [("MARKER", "<hello>"), ("MARKER", "[hello]"), ("MARKER", "<world>"),
                                     ("MARKER", "[world]")],
    "im<blue>daba<dee>da[hey]": [("TEXT", "im"), ("MARKER", "<blue>"), ("TEXT", "daba"), ("MARKER", "<dee>"),
                                 ("TEXT", "da"), ("MARKER", "[hey]")],
}


@pytest.mark.parametrize("text", list(SEGMENT_CASES))
def test_marker_separation(oracle: OracleClient, text: str) -> None:
    ours = [{"type": s.type, "value": s.value} for s in segmentize_markers(text)]
    assert ours == helper(oracle, "segmentize_markers", text=text)
    assert [(s["type"], s["value"]) for s in ours] == SEGMENT_CASES[text]  # upstream's assertions


# --- calculate_diff_split ------------------------------------------------------------------------

# (left, right, upstream's expected (prefix, left, right, suffix) where it asserts all four, else None)
_COHERE_PREFIX = "SOME_PREFIX"
_COHERE_SUFFIX = "|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
_COHERE_LEFT = "<|START_RESPONSE|>Let me help you.<|END_RESPONSE"
_COHERE_RIGHT = ('<|START_THINKING|><|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": '
                 '"test_function_name", "parameters": {"param1": "value1", "param2": "value2"}}\n]<|END_ACTION')
_CHATML_LEFT = "<|im_start|>user\nHello<|im_end|>\n"
_TOOL_RESPONSE_COMMON = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nSearch for files<|im_end|>\n"
    "<|im_start|>assistant\n<think>\nLet me search.\n</think>\n\n<tool_call>\n<function=search>\n</function>\n"
    "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nNo files found\n</tool_response><|im_end|>\n")

DIFF_SPLIT_CASES: list[tuple[str, str, tuple[str, str, str, str] | None]] = [
    # basic
    ("hello world", "hello test", ("hello ", "world", "test", "")),
    ("abc", "xyz", ("", "abc", "xyz", "")),
    ("prefixA suffix", "prefixB suffix", ("prefix", "A", "B", " suffix")),
    # identical
    ("hello", "hello", ("hello", "", "", "")),
    ("", "", ("", "", "", "")),
    ("a", "a", ("a", "", "", "")),
    ("<row><row><row><your><boat><gently>", "<row><row><row><your><boat><gently>",
     ("<row><row><row><your><boat><gently>", "", "", "")),
    # common prefix
    ("abcdef", "abcxyz", ("abc", "def", "xyz", "")),
    ("same", "sameagain", ("same", "", "again", "")),
    ("test", "testing", ("test", "", "ing", "")),
    # common suffix
    ("123end", "456end", ("", "123", "456", "end")),
    ("start", "end", ("", "start", "end", "")),
    ("abcsuffix", "xyzsuffix", ("", "abc", "xyz", "suffix")),
    # common both
    ("helloXworld", "helloYworld", ("hello", "X", "Y", "world")),
    ("ABCmiddleXYZ", "ABCdifferentXYZ", ("ABC", "middle", "different", "XYZ")),
    ("startAend", "startBend", ("start", "A", "B", "end")),
    ("aa", "ab", ("a", "a", "b", "")),
    # empty cases
    ("", "hello", ("", "", "hello", "")),
    ("hello", "", ("", "hello", "", "")),
    ("a", "", ("", "a", "", "")),
    ("", "a", ("", "", "a", "")),
    # no common
    ("left", "right", ("", "lef", "righ", "t")),
    ("123", "456", ("", "123", "456", "")),
    # single char
    ("a", "b", ("", "a", "b", "")),
    ("a", "ab", ("a", "", "b", "")),
    ("ab", "a", ("a", "b", "", "")),
    # overlaps
    ("testing", "test", ("test", "ing", "", "")),
    ("Xtest", "Ytest", ("", "X", "Y", "test")),
    ("testX", "testY", ("test", "X", "Y", "")),
    ("abc", "cba", ("", "abc", "cba", "")),
    # tag boundaries
    ("test<tag", "test>content", None),
    ("test[", "test]value", None),
    ("prefix<tag>", "prefix</tag>suffix", ("prefix", "<tag>", "</tag>suffix", "")),
    ("prefix<div>content</div>", "prefix<div>different</div>", ("prefix<div>", "cont", "differ", "ent</div>")),
    ("Hello <world>", "Hello test", None),
    ("test [array]", "test other", None),
    ("<tag>left</tag>", "<tag>righ</tag>", ("<tag>", "left", "righ", "</tag>")),
    ("PREFIX</think>Sure", "PREFIX<think>Lemme think</think>Sure",
     ("PREFIX", "", "<think>Lemme think", "</think>Sure")),
    (_COHERE_PREFIX + _COHERE_LEFT + _COHERE_SUFFIX, _COHERE_PREFIX + _COHERE_RIGHT + _COHERE_SUFFIX, None),
    # generation prompt
    (_CHATML_LEFT, _CHATML_LEFT + "<|im_start|>assistant\n<think>\n",
     (_CHATML_LEFT, "", "<|im_start|>assistant\n<think>\n", "")),
    (_TOOL_RESPONSE_COMMON, _TOOL_RESPONSE_COMMON + "<|im_start|>assistant\n<think>\n", None),
]


@pytest.mark.parametrize(("left", "right", "upstream"), DIFF_SPLIT_CASES,
                         ids=[f"{i}" for i in range(len(DIFF_SPLIT_CASES))])
def test_calculate_diff_split(oracle: OracleClient, left: str, right: str,
                              upstream: tuple[str, str, str, str] | None) -> None:
    ours = split_json(left, right)
    assert ours == helper(oracle, "calculate_diff_split", left=left, right=right)
    if upstream is not None:
        assert (ours["prefix"], ours["left"], ours["right"], ours["suffix"]) == upstream


def test_calculate_diff_split_partial_expectations(oracle: OracleClient) -> None:
    """The cases where upstream asserts properties rather than all four parts."""
    d = split_json("test<tag", "test>content")
    assert d["prefix"].startswith("test") and (d["left"] or d["right"] or d["suffix"])
    d = split_json("test[", "test]value")
    assert d["left"] or d["right"] or d["suffix"]
    d = split_json("Hello <world>", "Hello test")
    assert (d["prefix"], d["right"], d["suffix"]) == ("Hello ", "test", "") and "<world>" in d["left"]
    d = split_json("test [array]", "test other")
    assert (d["prefix"], d["right"], d["suffix"]) == ("test ", "other", "") and "[array]" in d["left"]
    d = split_json(_COHERE_PREFIX + _COHERE_LEFT + _COHERE_SUFFIX, _COHERE_PREFIX + _COHERE_RIGHT + _COHERE_SUFFIX)
    assert d["prefix"] == _COHERE_PREFIX
    assert d["left"] == "<|START_RESPONSE|>Let me help you.<|END_RESPONSE|>"
    assert "<|END_ACTION|>" in d["right"]
    assert d["suffix"] == "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
    d = split_json(_TOOL_RESPONSE_COMMON, _TOOL_RESPONSE_COMMON + "<|im_start|>assistant\n<think>\n")
    assert (d["left"], d["right"]) == ("", "<|im_start|>assistant\n<think>\n")


# --- until_common_prefix / after_common_suffix ---------------------------------------------------

UNTIL_CASES = [
    ("<function name=foo><arg name=bar>", "<arg name=bar>", "<arg name=baz>", "<function name=foo>"),
    ("prefix<test>suffix", "<test>different", "<test>other", "prefix"),
    ("<common>rest", "<common>left", "<common>right", ""),
    ("something", "left", "right", ""),
    ("test", "", "right", ""),
    ("abcXYZ<shared_prefix>rest", "<shared_prefix>left", "<shared_prefix>right", "abcXYZ"),
]

AFTER_CASES = [
    ("<function name=foo><arg name=bar>100</arg></function>", "<arg name=bar>100</arg>", "<arg name=baz>535</arg>",
     "</function>"),
    ("rest<common>", "left<common>", "right<common>", ""),
    ("test", "left", "", ""),
    ("<outer><inner>value</inner></outer>", "<inner>value</inner>", "<inner>different</inner>", "</outer>"),
    ("prefix<shared>rest</shared>", "prefix<shared>left</shared>", "prefix<shared>right</shared>", ""),
    ("<tag>content</tag><extra>", "<tag>value</tag>", "<tag>other</tag>", "<extra>"),
    ("start<middle>end</middle>", "prefix<middle>left</middle>", "prefix<middle>right</middle>", ""),
]


@pytest.mark.parametrize(("full", "left", "right", "upstream"), UNTIL_CASES)
def test_until_common_prefix(oracle: OracleClient, full: str, left: str, right: str, upstream: str) -> None:
    ours = until_common_prefix(full, left, right)
    assert ours == helper(oracle, "until_common_prefix", full=full, left=left, right=right)
    assert ours == upstream


@pytest.mark.parametrize(("full", "left", "right", "upstream"), AFTER_CASES)
def test_after_common_suffix(oracle: OracleClient, full: str, left: str, right: str, upstream: str) -> None:
    ours = after_common_suffix(full, left, right)
    assert ours == helper(oracle, "after_common_suffix", full=full, left=left, right=right)
    assert ours == upstream


# --- compare_variants ----------------------------------------------------------------------------


def params_json(p: TemplateParams) -> Json:
    out: Json = {"messages": p.messages, "add_generation_prompt": p.add_generation_prompt,
                 "enable_thinking": p.enable_thinking}
    if p.tools is not None:
        out["tools"] = p.tools
    if p.extra_context is not None:
        out["extra_context"] = p.extra_context
    return out


def checked_compare(oracle: OracleClient, source: str, a: TemplateParams, b: TemplateParams) -> Json:
    """Our compare_variants, asserted equal to upstream's; the result as the oracle shapes it."""
    expected = helper(oracle, "compare_variants", template=source, a=params_json(a), b=params_json(b))
    tmpl = load_chat_templates(source).default
    cmp = TemplateProbe(tmpl).compare(a, **{k: getattr(b, k) for k in ("messages", "tools", "add_generation_prompt",
                                                                        "enable_thinking", "extra_context")})
    ours = None if cmp is None else {
        "diff": {"prefix": cmp.diff.prefix, "suffix": cmp.diff.suffix, "left": cmp.diff.left,
                 "right": cmp.diff.right},
        "output_A": cmp.output_a, "output_B": cmp.output_b}
    assert ours == expected
    return ours


ECHO = "{{ messages[0]['content'] }}"
ROLES = "{% for message in messages %}{{ message['role'] }}:{{ message['content'] }}{% endfor %}"


def test_compare_variants_basic(oracle: OracleClient) -> None:
    a = TemplateParams(messages=[{"role": "user", "content": "Hello"}])
    r = checked_compare(oracle, ECHO, a, TemplateParams(messages=[{"role": "user", "content": "World"}]))
    assert r is not None and (r["diff"]["prefix"] or r["diff"]["left"])


def test_compare_variants_messages_modifier(oracle: OracleClient) -> None:
    a = TemplateParams(messages=[{"role": "user", "content": "A"}])
    r = checked_compare(oracle, ROLES, a, TemplateParams(messages=[{"role": "user", "content": "B"}]))
    assert (r["diff"]["left"], r["diff"]["right"]) == ("A", "B")


def test_compare_variants_tools_modifier(oracle: OracleClient) -> None:
    # upstream leaves messages unset: JSON null
    a = TemplateParams(messages=None, tools=[{"name": "foo"}])
    r = checked_compare(oracle, "{% for tool in tools %}{{ tool['name'] }}{% endfor %}", a,
                        TemplateParams(messages=None, tools=[{"name": "bar"}]))
    assert (r["diff"]["left"], r["diff"]["right"]) == ("foo", "bar")


def test_compare_variants_both_modifiers(oracle: OracleClient) -> None:
    a = TemplateParams(messages=[{"role": "user", "content": "A"}])
    r = checked_compare(oracle, ROLES, a, TemplateParams(messages=[{"role": "newuser", "content": "B"}]))
    assert (r["diff"]["left"], r["diff"]["right"]) == ("user:A", "newuser:B")


def test_compare_variants_template_failure(oracle: OracleClient) -> None:
    a = TemplateParams(messages=[{"role": "user", "content": "Hello"}])
    r = checked_compare(oracle, "{{ messages.cahoot()[0]['nonexistent_field'] }}", a,
                        TemplateParams(messages=[{"role": "user", "content": "World"}]))
    assert r is None


def test_compare_variants_identity(oracle: OracleClient) -> None:
    a = TemplateParams(messages=[{"role": "user", "content": "Hello"}])
    r = checked_compare(oracle, ECHO, a, a)
    assert r["diff"] == {"prefix": "Hello", "suffix": "", "left": "", "right": ""}


# --- Seed-OSS diffs (test_seed_oss_tool_analysis) ------------------------------------------------


def _call(name: str, args: Json, call_id: str = "call_001") -> Json:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def _tool(name: str, description: str, properties: dict[str, str], required: list[str]) -> Json:
    props = {k: {"type": "string", "description": v} for k, v in properties.items()}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": props, "required": required}}}


SEED_TOOLS = [_tool("test_function_name", "A test function for debugging",
                    {"param1": "First parameter", "param2": "Second parameter"}, ["param1", "param2"])]
SEED_USER = {"role": "user", "content": "Hello, please help me."}


def _asst(calls: list[Json] | None = None, content: str | None = None, **extra: Any) -> Json:
    msg: Json = {"role": "assistant", "content": content}
    if calls is not None:
        msg["tool_calls"] = calls
    msg.update(extra)
    return msg


def _seed_compare(oracle: OracleClient, a_msgs: list[Json], b_msgs: list[Json], tools: Json = None) -> Json:
    source = (TEMPLATES / "ByteDance-Seed-OSS.jinja").read_text()
    a = TemplateParams(messages=a_msgs, tools=SEED_TOOLS if tools is None else tools)
    r = checked_compare(oracle, source, a, TemplateParams(messages=b_msgs, tools=a.tools))
    assert r is not None
    return r["diff"]


def test_seed_oss_tool_presence(oracle: OracleClient) -> None:
    call = _call("test_function_name", {"param1": "value1", "param2": "value2"})
    d = _seed_compare(oracle, [SEED_USER, _asst(content="Let me help you.")], [SEED_USER, _asst([call])])
    assert all(s in d["prefix"] for s in ("system", "user", "assistant"))
    assert d["left"] == "Let me help you."
    for s in ("<seed:tool_call>", "<function=test_function_name>", "<parameter=param1>", "<parameter=param2>",
              "value1", "value2", "</seed:tool_call>"):
        assert s in d["right"]
    assert d["suffix"] == "<seed:eos>"


def test_seed_oss_call_count(oracle: OracleClient) -> None:
    first = _call("test_function_name", {"param1": "value1", "param2": "value2"})
    second = _call("test_function_name", {"param1": "value3", "param2": "value4"}, "call_002")
    d = _seed_compare(oracle, [SEED_USER, _asst([first])], [SEED_USER, _asst([first, second])])
    assert all(s in d["prefix"] for s in ("<seed:tool_call>", "<function=test_function_name>", "value1", "value2",
                                          "</seed:tool_call>"))
    assert d["left"] == ""
    assert all(s in d["right"] for s in ("<seed:tool_call>", "<function=test_function_name>", "value3", "value4",
                                         "</seed:tool_call>"))
    assert d["suffix"][-10:] == "<seed:eos>"


def test_seed_oss_function_names(oracle: OracleClient) -> None:
    tools = [_tool(n, d, {"arg1": "Argument 1"}, ["arg1"]) for n, d in (("func_alpha", "First function"),
                                                                      ("func_beta", "Second function"))]
    user = {"role": "user", "content": "Hello"}
    d = _seed_compare(oracle, [user, _asst([_call("func_alpha", {"arg1": "test_value"})])],
                      [user, _asst([_call("func_beta", {"arg1": "test_value"})])], tools)
    assert "func_alpha" in d["left"] or "func_alpha" in d["prefix"]
    assert "func_beta" in d["right"] or "func_beta" in d["prefix"] or "func_beta" in d["suffix"]
    assert "test_value" in d["prefix"] or "test_value" in d["suffix"]


def test_seed_oss_argument_count(oracle: OracleClient) -> None:
    tools = [_tool("test_func", "Test function", {"arg1": "Argument 1", "arg2": "Argument 2"}, ["arg1", "arg2"])]
    user = {"role": "user", "content": "Hello"}
    zero, one = _call("test_func", {}), _call("test_func", {"arg1": "value1"})
    two = _call("test_func", {"arg1": "value1", "arg2": "value2"})
    d = _seed_compare(oracle, [user, _asst([zero])], [user, _asst([one])], tools)
    assert d["left"] == "" and "arg1" in d["right"]
    d = _seed_compare(oracle, [user, _asst([one])], [user, _asst([two])], tools)
    assert "arg1" in d["left"] or "arg1" in d["prefix"]
    assert "arg1" in d["right"] or "arg1" in d["prefix"]
    assert "arg2" in d["right"] or "arg2" in d["prefix"] or "arg2" in d["suffix"]


def _in(needle: str, d: Json, *parts: str) -> bool:
    return any(needle in d[part] for part in parts)


def test_seed_oss_args_presence(oracle: OracleClient) -> None:
    same = _call("test_function_name", {"param1": "value1"})
    other = _call("test_function_name", {"param2": "value2"})
    both = _call("test_function_name", {"param1": "value1", "param2": "value2"})
    user = {"role": "user", "content": "Hello"}
    d = _seed_compare(oracle, [user, _asst([same])], [user, _asst([other])])
    assert _in("param1", d, "left", "prefix", "suffix") and _in("value1", d, "left", "prefix")
    assert _in("param2", d, "right", "prefix", "suffix") and _in("value2", d, "right", "prefix", "suffix")
    d = _seed_compare(oracle, [user, _asst([same])], [user, _asst([both])])
    assert _in("param1", d, "left", "prefix", "suffix") and _in("param1", d, "right", "prefix", "suffix")
    assert _in("param2", d, "right", "prefix", "suffix")


def test_seed_oss_tool_with_reasoning(oracle: OracleClient) -> None:
    call = _call("test_function_name", {"param1": "value1", "param2": "value2"})
    d = _seed_compare(oracle, [SEED_USER, _asst([call])],
                      [SEED_USER, _asst([call], reasoning_content="I need to call the tool first.")])
    assert d["left"] == ""
    assert all(s in d["right"] for s in ("<seed:think>", "I need to call the tool first.", "</seed:think>"))
    assert "assistant" in d["prefix"]
    assert all(s in d["suffix"] for s in ("<seed:tool_call>", "test_function_name", "<seed:eos>"))


# --- per-template analyses -------------------------------------------------------------------------


def checked_analysis(oracle: OracleClient, source: str) -> AutoparserAnalysis:
    """Our whole analysis of ``source`` (tokens "" as upstream's tests), equal to upstream's."""
    expected = oracle.request("analyze", template=source, bos_token="", eos_token="")
    assert not isinstance(expected, OracleError), expected
    ours = run_analysis(load_chat_templates(source).default)
    assert ours.to_json() == expected
    return ours


def analysis_of(oracle: OracleClient, name: str) -> AutoparserAnalysis:
    return checked_analysis(oracle, (TEMPLATES / name).read_text())


def test_nemotron_analysis(oracle: OracleClient) -> None:
    a = analysis_of(oracle, "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja")
    assert (a.reasoning.start, a.reasoning.end, a.reasoning.mode) == ("<think>\n", "\n</think>\n", "TAG_BASED")
    assert (a.content.start, a.content.end, a.content.mode) == ("", "", "PLAIN")
    fmt, fn, args = a.tools.format, a.tools.function, a.tools.arguments
    assert (fmt.section_start, fmt.section_end, fmt.per_call_start, fmt.per_call_end) == (
        "", "", "<tool_call>\n", "</tool_call>")
    assert a.jinja_caps["supports_parallel_tool_calls"] and a.jinja_caps["supports_tools"]
    assert (fn.name_prefix, fn.name_suffix, fn.close) == ("<function=", ">\n", "</function>\n")
    assert (args.name_prefix, args.name_suffix, args.value_suffix) == ("<parameter=", ">\n", "\n</parameter>\n")
    assert fmt.mode == "TAG_WITH_TAGGED"


@pytest.mark.parametrize("name", ["poolside-Laguna-XS-2.1.jinja", "poolside-Laguna-S-2.1.jinja",
                                  "poolside-Laguna-XS.2.jinja"])
def test_laguna_analysis(oracle: OracleClient, name: str) -> None:
    a = analysis_of(oracle, name)
    assert (a.reasoning.start, a.reasoning.end, a.reasoning.mode) == ("<think>", "</think>", "TAG_BASED")
    assert a.tools.arguments.value_suffix == "</arg_value>"
    if name == "poolside-Laguna-XS-2.1.jinja":
        assert "</assistant>" in a.additional_stops
    if name == "poolside-Laguna-S-2.1.jinja":
        source = (TEMPLATES / name).read_text()
        caps = oracle.request("caps", template=source)
        assert compile_chat_template(source).caps.to_map() == caps
        assert caps["supports_preserve_reasoning"]


def test_cohere_analysis(oracle: OracleClient) -> None:
    a = analysis_of(oracle, "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja")
    assert (a.reasoning.start, a.reasoning.end, a.reasoning.mode) == (
        "<|START_THINKING|>", "<|END_THINKING|>", "TOOLS_ONLY")
    assert (a.content.start, a.content.end, a.content.mode) == (
        "<|START_RESPONSE|>", "<|END_RESPONSE|>", "ALWAYS_WRAPPED")


def test_cohere_tool_format(oracle: OracleClient) -> None:
    """Upstream's test_tool_format_cohere (defined upstream but not registered there; its
    expectations hold at the pin)."""
    a = analysis_of(oracle, "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja")
    fmt, fn, args = a.tools.format, a.tools.function, a.tools.arguments
    assert (fmt.section_start, fmt.section_end, fmt.per_call_start, fmt.per_call_end) == (
        "<|START_ACTION|>", "<|END_ACTION|>", "", "")
    assert (fn.name_prefix, fn.name_suffix, fn.close) == ("", "", "")
    assert (args.start, args.end, args.name_prefix, args.name_suffix, args.value_prefix, args.value_suffix,
            args.separator) == ("",) * 7
    assert (fmt.name_field, fmt.args_field, fmt.id_field, fmt.mode) == ("tool_name", "parameters", "", "JSON_NATIVE")
    assert a.jinja_caps["supports_tools"] and a.jinja_caps["supports_parallel_tool_calls"]
    assert not a.content.requires_nonnull_content and fmt.tools_array_wrapped


def test_smollm3_analysis(oracle: OracleClient) -> None:
    a = analysis_of(oracle, "HuggingFaceTB-SmolLM3-3B.jinja")
    assert (a.reasoning.start, a.reasoning.end, a.reasoning.mode) == ("<think>", "</think>", "TAG_BASED")
    assert (a.content.start, a.content.end, a.content.mode) == ("", "", "PLAIN")
    assert "<think>" in a.preserved_tokens and "</think>" in a.preserved_tokens


BAILING_V3 = """
{# Bailing V3 chat template #}
{%- if tools %}{{ tools | tojson }}{%- endif %}
{%- for message in messages %}
    {%- if message.role == "user" %}
        {{- '<role>HUMAN</role>' + message.content + '<|role_end|>' }}
    {%- elif message.role == "assistant" %}
        {{- '<role>ASSISTANT</role>' }}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- set tc = tool_call.function %}
                {{- '<tool_call>' + tc.name }}
                {%- for k, v in tc.arguments.items() %}
                    {{- '<arg_key>' + k + '</arg_key>' }}
                    {{- '\\n<arg_value>' + v + '</arg_value>' }}
                {%- endfor %}
                {{- '\\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|role_end|>' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<role>ASSISTANT</role>' }}{%- endif %}
"""


def test_bailing_v3_tool_format(oracle: OracleClient) -> None:
    a = checked_analysis(oracle, BAILING_V3)
    assert a.tools.arguments.value_suffix == "</arg_value>"
    assert a.tools.arguments.tolerate_intertag_whitespace


ROLE_MARKERS = [
    ("Bielik-11B-v3.0-Instruct.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("HuggingFaceTB-SmolLM3-3B.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("MiMo-VL.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("Qwen3.5-4B.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("Qwen3-Coder.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("Qwen-Qwen2.5-7B-Instruct.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("Qwen-Qwen3-0.6B.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("Qwen-QwQ-32B.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("StepFun3.5-Flash.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "<｜User｜>", "<｜Assistant｜>"),
    ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "<｜User｜>", "<｜Assistant｜>"),
    ("deepseek-ai-DeepSeek-V3.1.jinja", "<｜User｜>", "<｜Assistant｜>"),
    ("llama-cpp-deepseek-r1.jinja", "<｜User｜>", "<｜Assistant｜>"),
    ("meetkai-functionary-medium-v3.1.jinja", "<|start_header_id|>user<|end_header_id|>",
     "<|start_header_id|>assistant<|end_header_id|>"),
    ("meta-llama-Llama-3.1-8B-Instruct.jinja", "<|start_header_id|>user<|end_header_id|>",
     "<|start_header_id|>assistant<|end_header_id|>"),
    ("meta-llama-Llama-3.2-3B-Instruct.jinja", "<|start_header_id|>user<|end_header_id|>",
     "<|start_header_id|>assistant<|end_header_id|>"),
    ("meta-llama-Llama-3.3-70B-Instruct.jinja", "<|start_header_id|>user<|end_header_id|>",
     "<|start_header_id|>assistant<|end_header_id|>"),
    ("fireworks-ai-llama-3-firefunction-v2.jinja", "<|start_header_id|>user<|end_header_id|>",
     "<|start_header_id|>assistant<|end_header_id|>"),
    ("microsoft-Phi-3.5-mini-instruct.jinja", "<|user|>", "<|assistant|>"),
    ("GLM-4.6.jinja", "<|user|>", "<|assistant|>"),
    ("unsloth-Apriel-1.5.jinja", "<|user|>", "<|assistant|>"),
    ("GLM-4.7-Flash.jinja", "<|user|>", "<|assistant|>"),
    ("google-gemma-2-2b-it.jinja", "<start_of_turn>user", "<start_of_turn>model"),
    ("ibm-granite-granite-3.3-2B-Instruct.jinja", "<|start_of_role|>user<|end_of_role|>",
     "<|start_of_role|>assistant<|end_of_role|>"),
    ("ibm-granite-granite-4.0.jinja", "<|start_of_role|>user<|end_of_role|>",
     "<|start_of_role|>assistant<|end_of_role|>"),
    ("CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>",
     "<|START_RESPONSE|>"),
    ("CohereForAI-c4ai-command-r-plus-tool_use.jinja", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>",
     "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"),
    ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "[INST]", ""),
    ("Mistral-Small-3.2-24B-Instruct-2506.jinja", "[INST]", ""),
    ("Apertus-8B-Instruct.jinja", "<|user_start|>", "<|assistant_start|>"),
    ("Apriel-1.6-15b-Thinker-fixed.jinja", "<|begin_user|>", "<|begin_assistant|>"),
    ("ByteDance-Seed-OSS.jinja", "<seed:bos>user", "<seed:bos>assistant"),
    ("GigaChat3.1-10B-A1.8B.jinja", "user<|role_sep|>", "assistant<|role_sep|>"),
    ("MiniMax-M2.jinja", "]~b]user", "]~b]ai"),
    ("tencent-Hy3.jinja", "<｜hy_User:opensource｜>", "<｜hy_Assistant:opensource｜>"),
    ("NVIDIA-Nemotron-Nano-v2.jinja", "<SPECIAL_11>User", "<SPECIAL_11>Assistant"),
    ("Reka-Edge.jinja", "human:", "assistant:"),
    ("llama-cpp-rwkv-world.jinja", "User:", "Assistant:"),
    ("upstage-Solar-Open-100B.jinja", "<|begin|>user<|content|>", "<|begin|>assistant"),
]


@pytest.mark.parametrize(("name", "user_start", "assistant_start"), ROLE_MARKERS, ids=[c[0] for c in ROLE_MARKERS])
def test_role_markers(oracle: OracleClient, name: str, user_start: str, assistant_start: str) -> None:
    a = analysis_of(oracle, name)
    assert (a.user_start, a.assistant_start) == (user_start, assistant_start)


# --- chat PEG cases: standard_json_tools, tagged arguments, normalize_quotes ---------------------

WEATHER_TOOLS = [{"type": "function", "function": {
    "name": "get_current_weather", "description": "Get the current weather in a given location",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "The city and state"},
        "unit": {"type": "string", "description": "Temperature unit", "enum": ["celsius", "fahrenheit"]}},
        "required": ["location"]}}}]

# (upstream's standard_json_tools arguments, content marker, input, expected name, expected id, content start)
JSON_TOOL_LAYOUTS = {
    "openai": ({"section_start": "<tool_call>", "section_end": "</tool_call>", "name_key": "function.name",
                "args_key": "function.arguments", "call_id_key": "id"}, "<tool_call>",
               'Let me check the weather.<tool_call>{"id": "call_abc123", "function": {"name": '
               '"get_current_weather", "arguments": {"location": "NYC"}}}</tool_call>',
               "call_abc123", "Let me check the weather"),
    "cohere": ({"section_start": "<|START_ACTION|>[", "section_end": "]<|END_ACTION|>", "name_key": "tool_name",
                "args_key": "parameters", "gen_call_id_key": "tool_call_id",
                "parameters_order": ["tool_call_id", "tool_name", "parameters"]}, "<|START_ACTION|>",
               'Let me search for that.<|START_ACTION|>[{"tool_call_id": 0, "tool_name": "get_current_weather", '
               '"parameters": {"location": "NYC", "unit": "celsius"}}]<|END_ACTION|>', "0", "Let me search"),
    "function_key": ({"section_start": "<tool_calls>[", "section_end": "]</tool_calls>", "args_key": "args",
                      "function_is_key": True, "call_id_key": "id"}, "<tool_calls>",
                     "I'll call the weather function.<tool_calls>[{\"get_current_weather\": {\"id\": \"call-0001\", "
                     "\"args\": {\"location\": \"NYC\", \"unit\": \"celsius\"}}}]</tool_calls>",
                     "call-0001", "I'll call the weather"),
}


@pytest.mark.parametrize("layout", list(JSON_TOOL_LAYOUTS))
def test_standard_json_tools(oracle: OracleClient, layout: str) -> None:
    kwargs, marker, text, call_id, content_start = JSON_TOOL_LAYOUTS[layout]
    # the helper alone, node for node with upstream's
    expected = oracle.request("peg_build", helper="standard_json_tools", tools=WEATHER_TOOLS,
                              parallel_tool_calls=True, force_tool_calls=False, **kwargs)
    assert not isinstance(expected, OracleError), expected
    helper_arena = build_chat_peg_parser(lambda p: p.standard_json_tools(
        tools=WEATHER_TOOLS, parallel_tool_calls=True, force_tool_calls=False, **kwargs))
    assert helper_arena.to_json() == expected["parser"]

    def build(p: ChatPegBuilder) -> Any:
        tool_call = p.standard_json_tools(tools=WEATHER_TOOLS, parallel_tool_calls=True, force_tool_calls=False,
                                          **kwargs)
        return p.content(p.until(marker)) + p.optional(tool_call) + p.end()
    arena = build_chat_peg_parser(build)
    upstream = oracle.request("chat_parse", parser=arena.to_json(), format="peg-native", text=text, is_partial=False)
    assert not isinstance(upstream, OracleError), upstream
    ours = parse_chat_output(text, False, arena, "peg-native").to_dict()
    assert ours == upstream
    assert [(c["name"], c["id"]) for c in ours["tool_calls"]] == [("get_current_weather", call_id)]
    assert content_start in ours["content"]


EDIT_TOOL = {"name": "edit", "properties": ["filename", "oldString", "newString"]}


def test_tagged_args_with_embedded_quotes(oracle: OracleClient) -> None:
    def build(p: ChatPegBuilder) -> Any:
        args_seq = p.eps()
        for i, param in enumerate(EDIT_TOOL["properties"]):
            arg = p.tool_arg(p.tool_arg_open(p.literal("<parameter=") + p.tool_arg_name(p.literal(param))
                                             + p.literal(">"))
                             + p.space() + p.tool_arg_string_value(p.until("</parameter>")) + p.space()
                             + p.tool_arg_close(p.literal("</parameter>")))
            if i > 0:
                args_seq = args_seq + p.space()
            args_seq = args_seq + p.optional(p.rule("arg-" + param, arg))
        func = (p.tool_open(p.literal("<function=") + p.tool_name(p.literal("edit")) + p.literal(">"))
                + p.space() + args_seq + p.space() + p.tool_close(p.literal("</function>")))
        tool_choice = p.choice() | p.rule("tool-edit", p.tool(func))
        section = p.literal("<seed:tool_call>") + p.space() + tool_choice + p.space() + p.literal("</seed:tool_call>")
        return p.content(p.until("<seed:tool_call>")) + p.optional(section) + p.end()
    arena = build_chat_peg_parser(build)
    text = ("<seed:tool_call>\n<function=edit>\n<parameter=filename>foo.cpp</parameter>\n"
            "<parameter=oldString>def foo(arg = \"14\"):\n    return arg + \"bar\"\n\n</parameter>\n"
            "<parameter=newString>def foo(arg = \"15\"):\n    pass\n\n</parameter>\n</function>\n</seed:tool_call>")
    upstream = oracle.request("chat_parse", parser=arena.to_json(), format="peg-native", text=text, is_partial=False)
    assert not isinstance(upstream, OracleError), upstream
    ours = parse_chat_output(text, False, arena, "peg-native").to_dict()
    assert ours == upstream
    assert [c["name"] for c in ours["tool_calls"]] == ["edit"]
    args = json.loads(ours["tool_calls"][0]["arguments"])
    assert args["filename"] == "foo.cpp"
    assert '"14"' in args["oldString"] and '"bar"' in args["oldString"] and '"15"' in args["newString"]


NORMALIZE_QUOTES = [
    ("{'key': 'value'}", '{"key": "value"}'),
    ("{'code': 'print(\\'hello\\')'}", '{"code": "print(\'hello\')"}'),
    ("{'msg': 'He said \"hi\"'}", '{"msg": "He said \\"hi\\""}'),
    ("{'path': 'C:\\\\Users\\\\test'}", '{"path": "C:\\\\Users\\\\test"}'),
    ("{'text': 'line1\\nline2'}", '{"text": "line1\\nline2"}'),
    ("{\"already_double\": 'single_value'}", '{"already_double": "single_value"}'),
    ("{'filename': 'foo.cpp', 'oldString': 'def foo(arg = \"14\"):\\n    return arg + \"bar\"\\n', "
     "'newString': 'def foo(arg = \"15\"):\\n    pass\\n'}",
     '{"filename": "foo.cpp", "oldString": "def foo(arg = \\"14\\"):\\n    return arg + \\"bar\\"\\n", '
     '"newString": "def foo(arg = \\"15\\"):\\n    pass\\n"}'),
]


@pytest.mark.parametrize(("value", "upstream"), NORMALIZE_QUOTES)
def test_normalize_quotes_to_json(oracle: OracleClient, value: str, upstream: str) -> None:
    """Upstream tests a copy of its static normalize_quotes_to_json; the oracle reaches the real one
    through the generic mapper: an unclosed tool-arg-value's arguments are '{"a":' + normalized."""
    arena = build_chat_peg_parser(lambda p: (
        p.tool_open(p.literal("<")) + p.tool_name(p.literal("f")) + p.literal(":")
        + p.tool_arg_name(p.literal("a")) + p.literal("=") + p.tool_arg_value(p.until("|")) + p.literal("|")))
    text = f"<f:a={value}|"
    msg = oracle.request("chat_parse", parser=arena.to_json(), format="peg-native", text=text, is_partial=False)
    assert not isinstance(msg, OracleError), msg
    args = msg["tool_calls"][0]["arguments"]
    assert args.startswith('{"a":')
    assert normalize_quotes_to_json(value) == args[len('{"a":'):]
    assert normalize_quotes_to_json(value) == upstream
