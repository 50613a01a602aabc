"""The server_e2e comparator and answer reader, on answers built here (no server, no model).

These check the harness's own logic: which differences are reported first, which deviations may
explain which differences, and that upstream_compat admits none. The answers are OpenAI JSON as both
sides produce it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from llamact.json_types import Json
from llamact.parity.chat_answer import ChatAnswer, answer_from_openai, reassemble
from llamact.parity.server_cases import (
    FAMILIES,
    NAMED_WEATHER,
    OWN_TEMPLATE,
    TOOLS,
    WEATHER_CALLS,
    E2ECase,
    e2e_cases,
)
from llamact.parity.server_compare import (
    DEMANDED_CALL_REFUSED,
    DOUBLE_BRACES,
    NAMED_TOOL_CHOICE,
    QWEN_XML,
    REASONING_TRIM,
    RECOVERY,
    REQUIRED_CALLS,
    STREAMING,
    call_is_valid,
    compare,
    first_difference,
)

CASE = E2ECase("smollm2/test/required", "smollm2", "Qwen3-Coder", WEATHER_CALLS, TOOLS, "required")
AUTO = E2ECase("smollm2/test/auto", "smollm2", "Qwen3-Coder", WEATHER_CALLS, TOOLS, "auto")


def _chunk(delta: Json, finish: str | None = None, **extra: Json) -> Json:
    return {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def _call_delta(index: int, call_id: str | None, name: str | None, arguments: str) -> Json:
    part: Json = {"index": index}
    if call_id:
        part.update(id=call_id, type="function")
    function: Json = {}
    if name:
        function["name"] = name
    if arguments:
        function["arguments"] = arguments
    part["function"] = function
    return {"tool_calls": [part]}


USAGE = {"completion_tokens": 4, "prompt_tokens": 3, "total_tokens": 7, "prompt_tokens_details": {"cached_tokens": 0}}
TIMINGS = {"cache_n": 0, "prompt_n": 3, "prompt_ms": 1.0, "predicted_n": 4, "predicted_ms": 2.0,
           "predicted_per_second": 2000.0}


def answer(deltas: list[Json], final: Json, *, finish: str = "stop", text: str = "", tokens: list[int] | None = None,
           call_id: str = "abc", timings: Json = None) -> ChatAnswer:
    """An answer from the given deltas and final message, as a server with the given call id would send."""
    chunks = [_chunk({"role": "assistant", "content": None})] + [_chunk(d) for d in deltas]
    chunks.append(_chunk({}, finish))
    chunks.append({"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
                   "usage": USAGE, "timings": timings or TIMINGS})
    final = copy.deepcopy(final)
    for call in final.get("tool_calls", []):
        call["id"] = call_id
    completion = {"object": "chat.completion", "choices": [{"index": 0, "message": final, "finish_reason": finish}]}
    return answer_from_openai(chunks, completion, prompt="<p>", prompt_tokens=[1, 2, 3],
                              tokens=tokens or [5, 6, 7, 8], text=text)


CALL_TEXT = '<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n</function>\n</tool_call>'
CALL_FINAL = {"role": "assistant", "content": "", "tool_calls": [
    {"type": "function", "id": "", "function": {"name": "get_weather", "arguments": '{"location":"Paris"}'}}]}


def call_answer(call_id: str = "abc") -> ChatAnswer:
    return answer([_call_delta(0, call_id, "get_weather", '{"location":"Paris"}')], CALL_FINAL, finish="tool_calls",
                  text=CALL_TEXT, call_id=call_id)


def test_reassembly_follows_openai_rules_and_renames_ids() -> None:
    a = answer([{"reasoning_content": "th"}, {"reasoning_content": "ink"}, {"content": "Hi"},
                _call_delta(0, "xyz", "get_weather", '{"loc'), _call_delta(0, None, None, 'ation":"P"}'),
                _call_delta(1, "qqq", "get_weather", "{}")],
               {"role": "assistant", "content": "Hi", "reasoning_content": "think", "tool_calls": []})
    assert a.message == {"content": "Hi", "reasoning_content": "think", "tool_calls": [
        {"id": "call#0", "name": "get_weather", "arguments": '{"location":"P"}'},
        {"id": "call#1", "name": "get_weather", "arguments": "{}"}]}
    assert a.finish_reason == "stop" and a.usage == USAGE and a.timings == TIMINGS and not a.problems
    assert reassemble([]) == {"content": "", "reasoning_content": "", "tool_calls": []}


def test_reader_reports_inconsistent_streams() -> None:
    a = answer([{"content": "x"}], {"role": "assistant", "content": "x"})
    chunks = list(a.raw_chunks)
    chunks[1] = {**chunks[1], "id": "chatcmpl-other"}
    b = answer_from_openai(chunks[:-1], {"choices": [{"message": {}}]}, prompt="", prompt_tokens=[], tokens=[],
                           text="")
    assert any("completion ids" in p for p in b.problems)
    assert any("no usage" in p for p in b.problems)


def test_answers_round_trip_through_json() -> None:
    a = call_answer()
    assert ChatAnswer.from_json(json.loads(json.dumps(a.to_json()))).to_json() == a.to_json()


def test_identical_answers_are_equal_whatever_the_ids_and_timings() -> None:
    server, llamact = call_answer("abc"), call_answer("zzz")
    llamact.timings = {**TIMINGS, "prompt_ms": 99.0, "predicted_per_second": 1.0}
    assert compare(CASE, server, llamact).kind == "equal"
    assert compare(CASE, server, llamact, upstream_compat=True).kind == "equal"


@pytest.mark.parametrize("field, value, where", [
    ("prompt", "<q>", "prompt"),
    ("prompt_tokens", [1, 2, 4], "prompt_tokens[2]"),
    ("tokens", [5, 6, 7], "tokens: lengths 4 != 3"),
    ("text", "other", "text"),
    ("usage", {**USAGE, "prompt_tokens_details": {"cached_tokens": 2}}, "usage.prompt_tokens_details.cached_tokens"),
    ("timings", {k: v for k, v in TIMINGS.items() if k != "predicted_per_second"}, "timings.keys"),
    ("timings", {**TIMINGS, "cache_n": 1}, "timings.cache_n"),
])
def test_the_first_difference_is_named_and_never_a_deviation(field: str, value: Json, where: str) -> None:
    """(A "required" case's tokens may differ by deviation 19's grammar: the test below.)"""
    server, llamact = call_answer(), call_answer()
    setattr(llamact, field, value)
    for compat in (False, True):
        verdict = compare(AUTO, server, llamact, upstream_compat=compat)
        assert verdict.kind == "different" and verdict.difference is not None
        assert verdict.difference.startswith(where), verdict.difference


def test_first_difference_walks_json() -> None:
    assert first_difference("m", {"a": [1, {"b": 2}]}, {"a": [1, {"b": 3}]}) == "m.a[1].b: server=2 llamact=3"
    assert first_difference("m", {"a": 1}, {"a": 1, "c": 0}) == 'm.c: server="<absent>" llamact=0'
    assert first_difference("m", 1, 1.0) is not None   # JSON 1 and 1.0 print differently
    assert first_difference("m", {"a": [1]}, {"a": [1]}) is None


def test_errors_on_both_sides_are_equal_on_one_side_different() -> None:
    assert compare(CASE, "HTTP 400", RuntimeError("refused")).kind == "equal"
    verdict = compare(CASE, "HTTP 400: bad template", call_answer())
    assert verdict.kind == "different" and "only the server failed" in str(verdict.difference)


def test_inconsistent_answers_are_different() -> None:
    llamact = call_answer()
    llamact.problems.append("chunk 3: a second usage")
    assert compare(CASE, call_answer(), llamact).kind == "different"


def test_reasoning_trim_is_deviation_4_only_outside_compat_mode() -> None:
    case = E2ECase("t", "smollm2", "Qwen-Qwen3-0.6B")
    server = answer([{"reasoning_content": "  a\\nb \n"}, {"content": "x"}],
                    {"role": "assistant", "content": "x", "reasoning_content": "  a\\nb \n"})
    llamact = answer([{"reasoning_content": "a\nb"}, {"content": "x"}],
                     {"role": "assistant", "content": "x", "reasoning_content": "a\nb"})
    assert compare(case, server, llamact).deviations == (REASONING_TRIM,)
    assert compare(case, server, llamact, upstream_compat=True).kind == "different"
    # other text in the reasoning is not whitespace
    other = answer([{"content": "x"}], {"role": "assistant", "content": "x", "reasoning_content": "a c"})
    assert compare(case, server, other).kind == "different"


def test_reasoning_escapes_are_kept_for_qwen3_coder() -> None:
    server = answer([], {"role": "assistant", "content": "", "reasoning_content": "a\\nb"})
    llamact = answer([], {"role": "assistant", "content": "", "reasoning_content": "a\nb"})
    assert compare(CASE, server, llamact).kind == "different"


def test_stream_differences_are_deviation_5_when_llamacts_stream_equals_its_final() -> None:
    final = {"role": "assistant", "content": "a b"}
    server = answer([{"content": "a "}, {"content": "b"}], final)
    llamact = answer([{"content": "a"}, {"content": " b"}], final)
    assert compare(CASE, server, llamact).deviations == (STREAMING,)
    assert compare(CASE, server, llamact, upstream_compat=True).kind == "different"
    # a stream that does not add up to llamact's own final message is wrong in any mode
    broken = answer([{"content": "a"}], final)
    assert compare(CASE, server, broken).kind == "different"


def test_withheld_unfinished_call_on_length_is_deviation_5() -> None:
    partial = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": '{"loc'}}]}
    server = answer([_call_delta(0, "abc", "get_weather", '{"loc')], partial, finish="length",
                    text="<tool_call>\n<function=get_weather>\n<parameter=loc")
    llamact = answer([], {"role": "assistant", "content": ""}, finish="length",
                     text="<tool_call>\n<function=get_weather>\n<parameter=loc")
    assert compare(CASE, server, llamact).deviations == (STREAMING,)
    assert compare(CASE, server, llamact, upstream_compat=True).kind == "different"


def test_withheld_unreadable_call_text_on_length_is_deviation_5() -> None:
    """Cut inside a call that upstream's final parse cannot read: the server's final message gives the
    unread tail of the output as content (its stream does not), llamact withholds it (the last partial
    parse stands). Only a tail of the raw output may be withheld so: other content is a difference."""
    text = 'Sure.\n<tool_call>\n{"name": "'
    server = answer([{"content": "Sure."}], {"role": "assistant", "content": "Sure.\n<tool_call>\n{\"name\": \""},
                    finish="length", text=text)
    llamact = answer([{"content": "Sure."}], {"role": "assistant", "content": "Sure."}, finish="length", text=text)
    assert compare(CASE, server, llamact).deviations == (STREAMING,)
    assert compare(CASE, server, llamact, upstream_compat=True).kind == "different"
    # what llamact keeps must be the server's content up to the withheld tail
    other = answer([{"content": "Sure!"}], {"role": "assistant", "content": "Sure!"}, finish="length", text=text)
    assert compare(CASE, server, other).kind == "different"
    # and the withheld text must be a tail of the output, not any text
    invented = answer([{"content": "Sure."}], {"role": "assistant", "content": "Sure.\n<tool_call>"}, finish="length",
                      text=text)
    assert compare(CASE, invented, llamact).kind == "different"
    # not when generation ended: then the final parse read the whole output
    ended = answer([{"content": "Sure."}], {"role": "assistant", "content": "Sure.\n<tool_call>\n{\"name\": \""},
                   finish="stop", text=text)
    ended_llamact = answer([{"content": "Sure."}], {"role": "assistant", "content": "Sure."}, finish="stop", text=text)
    assert compare(CASE, ended, ended_llamact).kind == "different"


def test_qwen_xml_validation_drops_invalid_calls_and_keeps_strings_as_strings() -> None:
    text = ('<tool_call>\n<function=search_flights>\n<parameter=origin>\n123\n</parameter>\n<parameter=destination>\n'
            'Rome\n</parameter>\n<parameter=passengers>\n2\n</parameter>\n</function>\n</tool_call>')
    server_final = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "search_flights",
                                          "arguments": '{"origin":123,"destination":"Rome","passengers":2}'}},
        {"type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]}
    llamact_final = {"role": "assistant", "content": "<tool_call>...", "tool_calls": [
        {"type": "function", "function": {"name": "search_flights",
                                          "arguments": '{"origin":"123","destination":"Rome","passengers":2}'}}]}
    server = answer([], server_final, finish="tool_calls", text=text)
    llamact = answer([], llamact_final, finish="tool_calls", text=text)
    llamact.message = llamact.final   # llamact's stream adds up to its final message
    assert compare(CASE, server, llamact).deviations == (QWEN_XML,)
    assert compare(CASE, server, llamact, upstream_compat=True).kind == "different"
    # the deviation needs Qwen XML in the raw output
    assert compare(CASE, answer([], server_final, finish="tool_calls", text="x"),
                   answer([], llamact_final, finish="tool_calls", text="x")).kind == "different"


def test_double_brace_calls_extracted_are_deviation_3() -> None:
    text = '<tool_call>\n{{"name": "get_weather", "arguments": {"location": "Paris"}}}\n</tool_call>'
    server = answer([{"content": text}], {"role": "assistant", "content": text}, text=text)
    llamact_final = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'}}]}
    llamact = answer([_call_delta(0, "a", "get_weather", '{"location": "Paris"}')], llamact_final,
                     finish="tool_calls", text=text)
    assert compare(CASE, server, llamact).deviations == (DOUBLE_BRACES,)
    assert compare(CASE, server, llamact, upstream_compat=True).kind == "different"


def test_named_tool_choice_wants_one_valid_call_of_that_function() -> None:
    case = E2ECase("n", "smollm2", "Qwen-Qwen3-0.6B", WEATHER_CALLS, TOOLS, NAMED_WEATHER)
    server = answer([{"content": "Sunny"}], {"role": "assistant", "content": "Sunny"}, tokens=[9])
    assert compare(case, server, call_answer()).deviations == (NAMED_TOOL_CHOICE,)
    wrong = answer([], {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "search_flights", "arguments": "{}"}}]}, finish="tool_calls")
    assert compare(case, server, wrong).kind == "different"
    assert compare(case, server, answer([], {"role": "assistant", "content": "Sunny"})).kind == "different"
    # with upstream_compat the named choice is "auto", as on the server: the tokens must agree
    assert compare(case, server, call_answer(), upstream_compat=True).kind == "different"


def test_required_calls_alone_are_deviation_19_where_the_tokens_differ() -> None:
    """The server's "required" grammar let the model write text first; llamact's (deviation 19) admits
    calls alone: its answer must be valid calls and no content, or a reply cut inside a call."""
    server = answer([{"content": "Sunny"}], {"role": "assistant", "content": "Sunny"}, tokens=[9], finish="length")
    assert compare(CASE, server, call_answer()).deviations == (REQUIRED_CALLS,)
    assert compare(CASE, server, call_answer(), upstream_compat=True).kind == "different"
    wrong = answer([], {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": '{"when": "now"}'}}]},
        finish="tool_calls")
    assert compare(CASE, server, wrong).kind == "different"
    with_content = answer([], {**CALL_FINAL, "content": "Sure."}, finish="tool_calls", text="Sure." + CALL_TEXT)
    assert compare(CASE, server, with_content).kind == "different"
    assert compare(CASE, server, answer([], {"role": "assistant", "content": "Sunny"})).kind == "different"
    cut = answer([], {"role": "assistant", "content": ""}, finish="length", text="<tool_call>\n<function=get")
    assert compare(CASE, server, cut).deviations == (REQUIRED_CALLS,)
    # the same tokens: compared as ever (here: equal)
    assert compare(CASE, call_answer(), call_answer()).kind == "equal"
    assert compare(AUTO, server, call_answer()).kind == "different"   # not for "auto"


def test_named_tool_choice_where_the_server_failed_or_llamact_refused() -> None:
    from llamact.errors import LlamaInferenceException, LlamaUnsupportedException

    case = E2ECase("n", "gemma3", "meta-llama-Llama-3.2-3B-Instruct", WEATHER_CALLS, TOOLS, NAMED_WEATHER)
    parse_failed = "/v1/chat/completions: error event: the model produced output that does not match the format"
    # the server ran it as "auto" and could not parse the free output: llamact's forced call still must be one
    assert compare(case, parse_failed, call_answer()).deviations == (NAMED_TOOL_CHOICE,)
    assert compare(case, parse_failed, answer([], {"role": "assistant", "content": "Sunny"})).kind == "different"
    assert compare(case, parse_failed, call_answer(), upstream_compat=True).kind == "different"
    # llamact refused: its template has no tool-call format to force (chat/named_tool.py)
    server = answer([{"content": "Sunny"}], {"role": "assistant", "content": "Sunny"})
    refused = LlamaUnsupportedException("no tool-call format", {"tool_choice": "get_weather"})
    assert compare(case, server, refused).deviations == (NAMED_TOOL_CHOICE,)
    assert compare(case, server, refused, upstream_compat=True).kind == "different"
    for other in (LlamaUnsupportedException("no", {"tool_choice": "search_flights"}), LlamaUnsupportedException("no"),
                  LlamaInferenceException("no", {"tool_choice": "get_weather"}), "refused"):
        assert compare(case, server, other).kind == "different"
    # not for other tool choices
    assert compare(CASE, server, refused).kind == "different"
    assert compare(CASE, parse_failed, call_answer()).kind == "different"


def test_required_refused_through_a_template_without_a_call_format_is_deviation_15() -> None:
    """llama-server answers "required" through SmolLM2's own template with text (the tools dropped);
    llamact refuses it (deviation 15), in both modes. Only that refusal, only "required", and only
    where the server made no call."""
    from llamact.errors import LlamaUnsupportedException

    case = E2ECase("r", "smollm2", OWN_TEMPLATE, WEATHER_CALLS, TOOLS, "required")
    server = answer([{"content": "Sunny"}], {"role": "assistant", "content": "Sunny"})
    refused = LlamaUnsupportedException("no tool-call format", {"tool_choice": "required", "family": "autoparser"})
    for compat in (False, True):
        assert compare(case, server, refused, upstream_compat=compat).deviations == (DEMANDED_CALL_REFUSED,)
    assert compare(case, server, LlamaUnsupportedException("no", {"tool_choice": "auto"})).kind == "different"
    assert compare(case, call_answer(), refused).kind == "different"   # the server did call: no excuse
    assert compare(CASE, server, refused).kind == "different"          # a template with a call format


def test_the_row_judges_llamact_errors_as_the_exceptions_raised() -> None:
    from dataclasses import asdict

    from llamact.parity.corpus import Case
    from llamact.parity.server_e2e import judge

    case = E2ECase("n", "smollm2", OWN_TEMPLATE, WEATHER_CALLS, TOOLS, NAMED_WEATHER)
    server = answer([{"content": "Sunny"}], {"role": "assistant", "content": "Sunny"})
    record = {"case_id": "n", "template_now": 0.0, "seconds": 0.0, "error": None, "answer": server.to_json()}
    row_case = Case("server_e2e", "n", case.template, json.loads(json.dumps(asdict(case))), record)
    error = {"exception": "LlamaUnsupportedException", "message": "no", "details": {"tool_choice": "get_weather"}}
    assert judge(row_case, {"error": error}).kind == "deviation"
    assert judge(row_case, {"raised": error}).kind == "deviation"
    assert judge(row_case, {"error": {**error, "exception": "ValueError"}}).kind == "different"


def test_call_validation_follows_the_tool_schemas() -> None:
    def call(name: str, args: Json) -> Json:
        return {"name": name, "arguments": json.dumps(args)}

    assert call_is_valid(CASE, call("get_weather", {"location": "Paris", "unit": "celsius"}))
    assert not call_is_valid(CASE, call("get_weather", {"location": "Paris", "unit": "kelvin"}))
    assert not call_is_valid(CASE, call("get_weather", {}))
    assert not call_is_valid(CASE, call("get_weather", {"location": "Paris", "when": "now"}))
    assert not call_is_valid(CASE, call("search_flights", {"origin": "A", "destination": "B", "passengers": "2"}))
    assert not call_is_valid(CASE, call("search_flights", {"origin": "A", "destination": "B", "passengers": True}))
    assert not call_is_valid(CASE, call("unknown", {}))
    assert not call_is_valid(CASE, {"name": "get_weather", "arguments": "{not json"})


def test_the_case_matrix_is_data_with_unique_ids() -> None:
    cases = e2e_cases()
    assert len({c.id for c in cases}) == len(cases)
    assert {c.model for c in cases} == {"smollm2", "gemma3"}
    for case in cases:
        body = case.request_body(stream=True)
        assert body["temperature"] == 0.0 and body["cache_prompt"] is False and body["stream"] is True
        assert json.loads(json.dumps(body)) == body
        assert not case.request_body(stream=False)["stream"]


def test_the_case_matrix_covers_what_the_row_promises(repo_root: Path) -> None:
    cases = e2e_cases()
    llama_cpp = repo_root / "vendor" / "llama.cpp"
    for case in cases:
        path = case.template_path(llama_cpp)
        assert path is None or path.is_file(), case.id
    required = {(c.model, c.template) for c in cases if c.tool_choice == "required"}
    for template in FAMILIES:
        assert {("smollm2", template), ("gemma3", template)} <= required, template
    assert any(c.template == OWN_TEMPLATE and c.model == m for c in cases for m in ("smollm2", "gemma3"))
    assert any(c.named_tool_choice for c in cases)
    assert any(not c.enable_thinking for c in cases)
    assert any(c.response_format for c in cases) and any(c.stop for c in cases)
    assert any(c.tools and c.max_tokens <= 14 for c in cases)   # cut inside a call
    assert {"deepseek", "none", "deepseek-legacy"} <= {c.reasoning_format for c in cases}


def test_scoreboard_row_counts_the_comparators_verdicts() -> None:
    from dataclasses import asdict

    from llamact.parity.components import Component
    from llamact.parity.corpus import Case
    from llamact.parity.scoreboard import score_component
    from llamact.parity.server_e2e import judge

    def row_case(name: str, server: ChatAnswer | None, error: str | None = None) -> Case:
        record = {"case_id": name, "template_now": 0.0, "seconds": 0.0, "error": error,
                  "answer": server.to_json() if server else None}
        return Case("server_e2e", name, AUTO.template, json.loads(json.dumps(asdict(AUTO))), record)

    other_tokens = call_answer()
    other_tokens.tokens = [1]
    cases = [row_case("same", call_answer()), row_case("tokens", other_tokens), row_case("both-fail", None, "HTTP 400")]
    answers = {"same": call_answer("q").to_json(), "tokens": call_answer().to_json(),
               "both-fail": {"error": {"message": "refused"}}}
    component = Component("server_e2e", "", lambda case: answers[case.id], judge=lambda c, g: judge(c, g).kind)
    row = score_component(component, cases)
    assert (row.equal, row.different, row.error, row.deviation) == (2, 1, 0, 0)
    assert row.differences[0]["id"] == "tokens"


def test_the_scoreboard_says_why_the_row_is_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from llamact.parity.__main__ import server_e2e_exclusion

    def args(**kw: Json) -> argparse.Namespace:
        return argparse.Namespace(**{"no_server": False, "no_models": False, "server": None, **kw})

    models = {"smollm2": tmp_path / "m.gguf"}
    assert server_e2e_exclusion(args(no_server=True), models, None) == "--no-server"
    assert server_e2e_exclusion(args(no_models=True), {}, None) == "--no-models"
    assert server_e2e_exclusion(args(), {}, None) == "no model available"
    assert server_e2e_exclusion(args(), models, ["Qwen-Qwen3-0.6B"]).startswith("--templates")
    # no installed llama-server: left out, saying where it was looked for
    monkeypatch.setenv("LLAMACT_BIN_DIR", str(tmp_path))
    monkeypatch.setattr("llamact.parity.llama_server.__file__", str(tmp_path / "parity" / "llama_server.py"))
    why = server_e2e_exclusion(args(), models, None)
    assert why.startswith("llama-server not found") and str(tmp_path) in why
    # one named on the command line that is not there is an error, not a quiet exclusion
    with pytest.raises(SystemExit, match="--server"):
        server_e2e_exclusion(args(server=str(tmp_path / "nope")), models, None)


FENCED_TEXT = '```json\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n```'


def recovered_answer(report: Json, text: str = FENCED_TEXT, arguments: str = '{"location": "Paris"}') -> ChatAnswer:
    final = {"role": "assistant", "content": "", "llamact": report, "tool_calls": [
        {"type": "function", "id": "", "function": {"name": "get_weather", "arguments": arguments}}]}
    return answer([_call_delta(0, "abc", "get_weather", arguments)], final, finish="tool_calls", text=text)


def test_a_recovered_call_is_deviation_17() -> None:
    """The server leaves a fenced call as content (or its final parse fails: a 500); llamact answers
    with the call and its report, a call valid for its tool. Not in upstream_compat; not an invalid call."""
    case = E2ECase("smollm2/test/auto", "smollm2", "Qwen-Qwen2.5-7B-Instruct", WEATHER_CALLS, TOOLS, "auto")
    server = answer([{"content": FENCED_TEXT}], {"role": "assistant", "content": FENCED_TEXT}, text=FENCED_TEXT)
    report = {"parse_error": None, "recovered": ["fenced_block"]}
    assert compare(case, server, recovered_answer(report)).deviations == (RECOVERY,)
    assert compare(case, server, recovered_answer(report), upstream_compat=True).kind == "different"
    assert compare(case, server, recovered_answer(report, arguments='{"town": "Paris"}')).kind == "different"
    failed = {"parse_error": "The model produced output that does not match the expected peg-native format",
              "recovered": ["stray_text"]}
    server_500 = "The model produced output that does not match the expected peg-native format"
    assert compare(case, server_500, recovered_answer(failed)).deviations == (RECOVERY,)
    assert compare(case, server_500, recovered_answer(report)).kind == "different"   # no parse error reported
    assert compare(case, server_500, recovered_answer(failed), upstream_compat=True).kind == "different"
