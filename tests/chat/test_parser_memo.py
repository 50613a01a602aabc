"""The parser memo (chat/parser_memo.py): a chat's next turn reuses the parser and grammar its tools
decided, and a reused parser is always the one a fresh build gives.

The parity tests run with ``LLAMACT_PARSER_MEMO=verify`` (tests/conftest.py): every reuse there is
rebuilt and compared; the others run it ``on``. These tests switch the memo on for real, and
compare with it off.
"""

from __future__ import annotations

from typing import Any

import pytest
from stream_checks import TEMPLATES_DIR

from llamact.chat import parser_memo
from llamact.chat.apply import ChatTemplateInputs
from llamact.chat.oai import parse_messages, parse_tools
from llamact.chat.peg_builder import build_chat_peg_parser
from llamact.chat.pipeline import apply_templates
from llamact.chat.templates import load_chat_templates

TOOLS = [{"type": "function", "function": {
    "name": f"tool_{i}", "description": f"Tool {i}.",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
        "required": ["query"]}}} for i in range(3)]


def _conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for turn in range(turns):
        call = {"id": f"call_{turn}", "type": "function",
                "function": {"name": "tool_0", "arguments": f'{{"query": "q{turn}"}}'}}
        messages += [{"role": "user", "content": f"Question {turn}?"},
                     {"role": "assistant", "content": "", "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": call["id"], "name": "tool_0", "content": f"answer {turn}"}]
    messages.append({"role": "user", "content": "And now?"})
    return messages


def _inputs(messages: list[dict[str, Any]], **extra: Any) -> ChatTemplateInputs:
    fields: dict[str, Any] = {"tools": tuple(parse_tools(TOOLS)), "reasoning_format": "deepseek",
                              "parallel_tool_calls": True}
    fields.update(extra)
    return ChatTemplateInputs(messages=tuple(parse_messages(messages)), now=1768478400, **fields)


def _answer(templates: Any, inputs: ChatTemplateInputs) -> Any:
    try:
        return apply_templates(templates, inputs).to_json()
    except Exception as exc:  # noqa: BLE001 - an error is an answer to compare too
        return {"error": type(exc).__name__, "message": str(exc)}


# requests that share tools but differ where a parser might look: the conversation, a continued
# assistant message (its generation prompt is built by hand), thinking off, a response format
VARIANTS: list[tuple[list[dict[str, Any]], dict[str, Any]]] = [
    (_conversation(1), {}),
    (_conversation(3), {}),
    (_conversation(1) + [{"role": "assistant", "content": "Partly"}], {"continue_final_message": "auto"}),
    (_conversation(2), {"enable_thinking": False}),
    (_conversation(1), {"tool_choice": "required"}),
    (_conversation(1), {"tools": (), "json_schema": {"type": "object", "properties": {"a": {"type": "string"}}}}),
]


@pytest.mark.parametrize("path", sorted(TEMPLATES_DIR.glob("*.jinja")), ids=lambda p: p.stem)
def test_memoised_applies_equal_fresh_ones(path, monkeypatch) -> None:
    """Every vendored template, requests in an order where later ones can reuse earlier parsers:
    the answers with the memo on equal those with it off."""
    templates = load_chat_templates(path.read_text(encoding="utf-8"), bos_token="<s>", eos_token="</s>",
                                    origin="corpus template")
    requests = [_inputs(messages, **extra) for messages, extra in VARIANTS]
    monkeypatch.setenv("LLAMACT_PARSER_MEMO", "off")
    fresh = [_answer(templates, r) for r in requests]
    monkeypatch.setenv("LLAMACT_PARSER_MEMO", "on")
    parser_memo.clear_parser_memo()
    memoised = [_answer(templates, r) for r in requests]
    memoised_again = [_answer(templates, r) for r in reversed(requests)][::-1]
    assert memoised == fresh
    assert memoised_again == fresh


@pytest.mark.parametrize("stem", ["Qwen-Qwen3-0.6B", "LFM2-8B-A1B", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"])
def test_next_turn_reuses_the_parser_and_grammar(stem, monkeypatch) -> None:
    """A chat's next turn (same tools, one more exchange) gets the same arena object, and its grammar
    is not rebuilt; a change of tools builds a new one."""
    monkeypatch.setenv("LLAMACT_PARSER_MEMO", "on")
    parser_memo.clear_parser_memo()
    templates = load_chat_templates((TEMPLATES_DIR / f"{stem}.jinja").read_text(encoding="utf-8"),
                                    bos_token="<s>", eos_token="</s>", origin="corpus template")
    first = apply_templates(templates, _inputs(_conversation(1)))
    hits = parser_memo.stats.hits
    second = apply_templates(templates, _inputs(_conversation(2)))
    assert second.parser is first.parser
    assert parser_memo.stats.hits > hits
    assert second.grammar == first.grammar and second.grammar
    other_tools = apply_templates(templates, _inputs(_conversation(2), tools=tuple(parse_tools(TOOLS[:2]))))
    assert other_tools.parser is not first.parser
    assert other_tools.grammar != first.grammar


def test_closure_key_sees_captured_values() -> None:
    def root_for(word: str, flag: bool):
        return lambda p: p.literal(word) if flag else p.eps()

    assert parser_memo.closure_key(root_for("a", True)) == parser_memo.closure_key(root_for("a", True))
    assert parser_memo.closure_key(root_for("a", True)) != parser_memo.closure_key(root_for("b", True))
    assert parser_memo.closure_key(root_for("a", True)) != parser_memo.closure_key(root_for("a", False))


def test_equal_code_from_two_modules_is_two_keys() -> None:
    """Code objects compare by value, and two modules' identical lambdas read their own globals."""
    source = "root = lambda p: p.literal(WORD)\n"
    first: dict[str, Any] = {"WORD": "one"}
    second: dict[str, Any] = {"WORD": "two"}
    exec(compile(source, "first.py", "exec"), first)  # noqa: S102 - two modules' worth of the same code
    exec(compile(source, "second.py", "exec"), second)  # noqa: S102
    assert first["root"].__code__ == second["root"].__code__
    assert parser_memo.closure_key(first["root"]) != parser_memo.closure_key(second["root"])
    assert build_chat_peg_parser(first["root"]) != build_chat_peg_parser(second["root"])


def test_code_that_reads_messages_or_unknown_objects_is_never_memoised(monkeypatch) -> None:
    class Holder:
        messages = ["x"]

    holder = Holder()
    reads_messages = lambda p: p.literal(holder.messages[0])  # noqa: E731
    opaque = object()
    captures_unknown = lambda p: p.literal(str(opaque)[:1])  # noqa: E731
    assert parser_memo.closure_key(reads_messages) is None
    assert parser_memo.closure_key(captures_unknown) is None
    monkeypatch.setenv("LLAMACT_PARSER_MEMO", "on")
    assert build_chat_peg_parser(reads_messages) is not build_chat_peg_parser(reads_messages)


def test_verify_mode_catches_a_key_that_misses_an_input(monkeypatch) -> None:
    """A root that reads state its key cannot see: verify mode rebuilds it and raises."""
    monkeypatch.setenv("LLAMACT_PARSER_MEMO", "verify")
    parser_memo.clear_parser_memo()
    state = {"word": "one"}

    def root(p):
        return p.literal(_lookup(state_ref))

    state_ref = "word"
    _STATE.update(state)
    build_chat_peg_parser(root)
    _STATE["word"] = "two"
    with pytest.raises(RuntimeError, match="differs from a fresh build"):
        build_chat_peg_parser(root)


_STATE: dict[str, str] = {}


def _lookup(name: str) -> str:
    return _STATE[name]
