"""Each scoring rule of the scoreboard, held by a test of its own (fake components and cases, no oracle)."""

from __future__ import annotations

from typing import Any

import pytest

from llamact.chat.output_parser import ChatParseError
from llamact.errors import LlamaUnsupportedException
from llamact.jinja import JinjaRuntimeError, JinjaSyntaxError
from llamact.parity.compare import first_difference, same
from llamact.parity.components import Component, skipped
from llamact.parity.corpus import Case
from llamact.parity.error_kinds import ERROR_KINDS, MessageRule, match_error
from llamact.parity.scoreboard import render_table, score_component, summary_json


def _case(expected: Any, component: str = "fake", case_id: str = "fake/1") -> Case:
    return Case(component, case_id, "g", {"x": 1}, expected)


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"kind": kind, "message": message}}


def _score(runner: Any, *cases: Case, name: str = "fake", **options: Any) -> Any:
    return score_component(Component(name, "a fake component", runner, **options), list(cases))


# -- values are compared strictly --------------------------------------------------------------------


@pytest.mark.parametrize("expected,got", [
    (True, 1), (1, True), (1, 1.0), (1.0, 1), (False, 0), (0, None), ("1", 1), (0.0, -0.0),
    ([1, 2], [2, 1]), ([1], (1,)), ({"a": True}, {"a": 1}), ([{"a": [1.0]}], [{"a": [1]}]),
    ({"a": 1}, {"a": 1, "b": 2}), ([1, 2], [1, 2, 3]),
])
def test_values_of_another_type_or_shape_are_different(expected: Any, got: Any) -> None:
    assert not same(expected, got)
    row = _score(lambda case: got, _case(expected))
    assert (row.equal, row.different) == (0, 1)
    assert row.differences[0]["why"].startswith("$")


def test_identical_values_are_equal() -> None:
    value = {"a": [1, 1.5, -0.0, True, None, "x", {"b": []}]}
    row = _score(lambda case: {"a": [1, 1.5, -0.0, True, None, "x", {"b": []}]}, _case(value))
    assert (row.equal, row.different) == (1, 0)


def test_key_order_counts_only_where_the_component_is_ordered() -> None:
    expected, got = {"a": 1, "b": 2}, {"b": 2, "a": 1}
    assert _score(lambda case: got, _case(expected)).equal == 1
    ordered = _score(lambda case: got, _case(expected), ordered=True)
    assert ordered.different == 1 and "key order" in ordered.differences[0]["why"]
    # nested objects too
    assert not same({"x": {"a": 1, "b": 2}}, {"x": {"b": 2, "a": 1}}, ordered=True)


def test_ordered_keys_apply_under_the_named_top_level_keys_only() -> None:
    expected = {"format": "f", "parser": {"a": 1, "b": 2}, "other": {"c": 1, "d": 2}}
    other_order = {"other": {"d": 2, "c": 1}, "parser": {"a": 1, "b": 2}, "format": "f"}
    assert same(expected, other_order, ordered={"parser"})
    parser_order = {"format": "f", "parser": {"b": 2, "a": 1}, "other": {"c": 1, "d": 2}}
    assert "$.parser" in (first_difference(expected, parser_order, ordered={"parser"}) or "")


def test_paths_without_an_upstream_order_stay_unordered_inside_ordered_values() -> None:
    # a PEG arena's rules come from a std::unordered_map: their order is a hash table's
    expected = {"parser": {"parsers": [{"type": "a", "x": 1}], "rules": {"r1": 0, "r2": 1}, "root": 0}}
    rules_swapped = {"parser": {"parsers": [{"type": "a", "x": 1}], "rules": {"r2": 1, "r1": 0}, "root": 0}}
    assert same(expected, rules_swapped, ordered={"parser"}, unordered={"$.parser.rules"})
    node_swapped = {"parser": {"parsers": [{"x": 1, "type": "a"}], "rules": {"r1": 0, "r2": 1}, "root": 0}}
    assert not same(expected, node_swapped, ordered={"parser"}, unordered={"$.parser.rules"})
    row = _score(lambda case: rules_swapped, _case(expected), ordered={"parser"},
                 unordered=frozenset({"$.parser.rules"}))
    assert row.equal == 1


# -- errors ---------------------------------------------------------------------------------------------


def _raise(exc: BaseException) -> Any:
    def runner(case: Case) -> Any:
        raise exc
    return runner


def test_an_error_of_the_same_kind_and_text_is_equal() -> None:
    row = _score(_raise(JinjaRuntimeError("Jinja Exception: no", "tmpl", 3)),
                 _case(_error("exception", "Jinja Exception: no")), name="template_jinja")
    assert (row.equal, row.different) == (1, 0)


def test_an_error_with_other_text_is_different() -> None:
    row = _score(_raise(JinjaRuntimeError("Jinja Exception: yes")), _case(_error("exception", "Jinja Exception: no")),
                 name="template_jinja")
    assert (row.equal, row.different) == (0, 1)
    assert "other text" in row.differences[0]["why"]


def test_an_error_of_another_kind_is_different() -> None:
    # a chat parse error is not the kind upstream's template error is
    row = _score(_raise(ChatParseError("The model produced output ...")),
                 _case(_error("runtime_error", "The model produced output ...")), name="template_jinja")
    assert (row.equal, row.different) == (0, 1)
    assert "not that kind" in row.differences[0]["why"]


def test_a_template_upstream_cannot_compile_for_a_number_is_a_syntax_error_of_kind_exception() -> None:
    # std::stoll / std::stod refuse a number literal with std::out_of_range: the oracle's "exception"
    # kind, met by llamact's compile-time JinjaSyntaxError with the same text (not by a render error)
    row = _score(_raise(JinjaSyntaxError("stoll")), _case(_error("exception", "stoll")), name="template_jinja")
    assert (row.equal, row.different) == (1, 0)
    row = _score(_raise(JinjaSyntaxError("stod")), _case(_error("exception", "stoll")), name="template_jinja")
    assert (row.equal, row.different) == (0, 1)


def test_without_co_positions_a_template_error_is_compared_without_upstreams_location(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the deliberate difference on Python 3.10 (error_kinds' docstring); 3.11+ compares it all
    from llamact.parity import error_kinds

    located = ("\n------------\nWhile executing CallExpression at line 3, column 9 in source:\n...x...\n   ^\n"
               "Error: Jinja Exception: no")
    bare = JinjaRuntimeError("Jinja Exception: no")
    assert match_error("template_jinja", {"kind": "exception", "message": located}, bare) is not None
    monkeypatch.setattr(error_kinds, "LOCATED", False)
    assert match_error("template_jinja", {"kind": "exception", "message": located}, bare) is None
    assert match_error("template_jinja", {"kind": "exception", "message": located},
                       JinjaRuntimeError("Jinja Exception: yes")) is not None
    assert match_error("json_schema", {"kind": "exception", "message": located}, bare) is not None


def test_an_error_kind_the_table_does_not_pair_with_anything_is_different() -> None:
    for kind in ("bad_request", "oracle_failed", "unknown"):
        row = _score(_raise(LlamaUnsupportedException("x")), _case(_error(kind, "x")), name="json_schema")
        assert (row.equal, row.different) == (0, 1), kind


def test_a_location_line_is_allowed_only_where_the_table_says() -> None:
    upstream = "JSON schema conversion failed:\nJSON schema error at #: unrecognized type kaboom"
    ours = LlamaUnsupportedException(upstream + "\n(keyword 'type' at #/type)")
    assert _score(_raise(ours), _case(_error("invalid_argument", upstream)), name="json_schema").equal == 1
    more = LlamaUnsupportedException(upstream + "\nand something else")
    assert _score(_raise(more), _case(_error("invalid_argument", upstream)), name="json_schema").different == 1
    jinja = JinjaRuntimeError("boom\n(at #/x)")
    assert _score(_raise(jinja), _case(_error("runtime_error", "boom")), name="jinja").different == 1


def test_llamact_raising_where_upstream_answered_is_an_error() -> None:
    row = _score(_raise(LlamaUnsupportedException("nope")), _case("a grammar"))
    assert (row.equal, row.error, row.different) == (0, 1, 0)


def test_an_answer_where_upstream_failed_is_different() -> None:
    row = _score(lambda case: "rendered", _case(_error("runtime_error", "boom")), name="jinja")
    assert (row.equal, row.different) == (0, 1)


@pytest.mark.parametrize("exc", [IndexError("list index out of range"), ZeroDivisionError("division by zero"),
                                 KeyError("k"), TypeError("unhashable"), RecursionError("deep"), AssertionError()])
def test_internal_exceptions_are_crashes_never_equal(exc: BaseException) -> None:
    # even where upstream itself failed: "both raised" is not equality
    row = _score(_raise(exc), _case(_error("runtime_error", "boom")), _case("value", case_id="fake/2"), name="jinja")
    assert (row.equal, row.crash, row.different, row.error) == (0, 2, 0, 0)
    crash = row.differences[0]["got"]["crash"]
    assert crash["exception"] == type(exc).__name__
    assert crash["traceback"] and "test_scoring_rules.py" in crash["traceback"][-1]
    assert row.failing
    assert match_error("jinja", {"kind": "runtime_error", "message": "boom"}, exc) is not None


def test_a_crash_does_not_end_the_run() -> None:
    calls = []

    def runner(case: Case) -> Any:
        calls.append(case.id)
        if case.id == "fake/1":
            raise IndexError("oops")
        return case.expected

    row = _score(runner, _case(1), _case(2, case_id="fake/2"), _case(3, case_id="fake/3"))
    assert calls == ["fake/1", "fake/2", "fake/3"]
    assert (row.crash, row.equal) == (1, 2)
    assert "crash" in render_table([row]).splitlines()[0]


def test_a_skipped_step_is_different() -> None:
    row = _score(lambda case: skipped("no parse ending at 7"), _case({"content": "x"}), _case(_error("parse", "x")))
    assert (row.equal, row.different) == (0, 2)


# -- rows ---------------------------------------------------------------------------------------------


def test_zero_cases_is_an_error_not_a_hundred_percent() -> None:
    row = _score(lambda case: None)
    assert row.problem and row.failing
    assert "100" not in render_table([row]) and "ERROR" in render_table([row])


def test_not_implemented_and_excluded_rows_do_not_fail() -> None:
    row = score_component(Component("later", "not yet"), [_case(1)])
    assert row.not_implemented and not row.failing


def test_round_trip_rows_are_listed_apart_from_parity() -> None:
    parity = _score(lambda case: case.expected, _case(1), name="peg_parse")
    trip = _score(lambda case: case.expected, _case(1), name="peg_arena", check="round-trip")
    table = render_table([parity, trip])
    assert table.index("peg_parse") < table.index("round-trip") < table.index("peg_arena")
    summary = summary_json([parity, trip])
    assert set(summary["components"]) == {"peg_parse"} and set(summary["round_trips"]) == {"peg_arena"}


def test_the_error_table_is_one_documented_place() -> None:
    for entry in ERROR_KINDS:
        assert entry.upstream and entry.components and entry.llamact
        assert isinstance(entry.message, MessageRule)


# -- known differences are named, not excused ------------------------------------------------------


def _raised(message: str) -> dict[str, Any]:
    return {"raised": {"exception": "JinjaRuntimeError", "message": message}}


def test_no_difference_is_excused_as_known() -> None:
    """Every known difference is fixed: the shapes that once were known are different now, as any
    other difference is (a fix that regresses shows as a difference, not as a known one)."""
    from llamact.parity.known_differences import KNOWN_DIFFERENCES, known_difference

    located = ("\n------------\nWhile executing CallExpression at line 3, column 9 in source:\n...x...\n   ^\n"
               "Error: Jinja Exception: no")
    assert known_difference("template_jinja", _error("exception", located), _raised("Jinja Exception: no")) is None
    hinted = located.replace("Jinja Exception: no", "Callee is not a function: got Undefined (hint: 'items')")
    assert known_difference("template_jinja", _error("runtime_error", hinted),
                            _raised("Callee is not a function: got Undefined")) is None
    syntax = {"raised": {"exception": "JinjaSyntaxError", "message": "tag name expected"}}
    assert known_difference("caps", _error("runtime_error", "Unknown statement"), syntax) is None
    assert KNOWN_DIFFERENCES == {}
