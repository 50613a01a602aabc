"""History trimming: the request keeps the longest suffix that fits, cut only where a user message
starts (a tool exchange is never split), the system prompt always kept; found by binary search."""

from __future__ import annotations

from typing import Any

import pytest
from session_templates import template

from llamact import ChatSession, GenerationParams, LlamaEngine
from llamact.errors import LlamaContextException
from llamact.session import fit_history
from llamact.session.trimming import cut_points

QWEN25 = template("Qwen-Qwen2.5-7B-Instruct")
WEATHER = {"type": "function", "function": {"name": "weather", "description": "The weather in a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}


def _call(i: int, city: str) -> dict[str, Any]:
    return {"id": f"call{i}", "type": "function", "function": {"name": "weather", "arguments": f'{{"city": "{city}"}}'}}


def conversation(turns: int) -> list[dict[str, Any]]:
    """``turns`` user turns; every other one answered through a two-call tool exchange."""
    out: list[dict[str, Any]] = []
    for t in range(turns):
        out.append({"role": "user", "content": f"Question {t}: how is the weather in Paris and in Rome today?"})
        if t % 2 == 0:
            calls = [_call(2 * t, "Paris"), _call(2 * t + 1, "Rome")]
            out.append({"role": "assistant", "content": "", "tool_calls": calls})
            out.append({"role": "tool", "tool_call_id": f"call{2 * t}", "name": "weather", "content": "Sunny, 21 C"})
            out.append({"role": "tool", "tool_call_id": f"call{2 * t + 1}", "name": "weather", "content": "Rain, 14 C"})
        out.append({"role": "assistant", "content": f"Answer {t}: sunny in Paris, rainy in Rome."})
    out.append({"role": "user", "content": "And tomorrow?"})
    return out


def assert_exchanges_whole(messages: list[dict[str, Any]]) -> None:
    """Every tool result answers a call of the assistant message just before its run of results."""
    assert messages[0]["role"] == "user"
    open_ids: set[str] = set()
    for m in messages:
        if m["role"] == "assistant":
            assert not open_ids, "an assistant turn before all its calls were answered"
            open_ids = {c["id"] for c in m.get("tool_calls", [])}
        elif m["role"] == "tool":
            assert m["tool_call_id"] in open_ids
            open_ids.discard(m["tool_call_id"])
        else:
            assert not open_ids


def test_binary_search_finds_the_longest_fitting_suffix_in_few_renders() -> None:
    history = conversation(40)
    rendered: list[int] = []

    def count(messages: Any) -> int:
        rendered.append(len(messages))
        return sum(len(m["content"]) + 10 for m in messages)

    points = cut_points(history)
    for budget in (300, 1000, 2500):
        rendered.clear()
        fit = fit_history(history, count, budget)
        assert fit.fits and fit.start in points and fit.n_tokens <= budget
        assert count(history[fit.start:]) == fit.n_tokens
        earlier = points[points.index(fit.start) - 1]
        assert count(history[earlier:]) > budget  # one more turn would not fit
        assert_exchanges_whole(history[fit.start:])
        assert len(rendered) <= 2 + 2 + len(points).bit_length()  # full, last, then log2 of the cut points


def test_nothing_fits() -> None:
    fit = fit_history(conversation(3), lambda m: 1000, 10)
    assert not fit.fits and fit.start == cut_points(conversation(3))[-1]


@pytest.mark.model
def test_a_session_request_is_trimmed_to_fit(engine: LlamaEngine) -> None:
    params = GenerationParams(max_tokens=64)
    session = ChatSession(engine, "You are a weather bot.", max_context_tokens=400, params=params,
                          custom_template=QWEN25)
    for m in conversation(8):
        session.add_message(m)
    result = session.request_template(tools=[WEATHER])
    n_prompt = len(engine.tokenize(result.prompt))
    assert session.last_request_fit_context is True
    assert session.last_request_dropped > 0
    assert n_prompt == session.last_request_tokens <= 400 - 64
    kept = session.history[session.last_request_dropped:]
    assert_exchanges_whole(kept)
    assert result.prompt.startswith("<|im_start|>system\nYou are a weather bot.")
    assert result.prompt == engine.chat_template([{"role": "system", "content": "You are a weather bot."}, *kept],
                                                 tools=[WEATHER], custom_template=QWEN25).prompt
    # one more turn (from the previous cut point) would not have fit
    earlier = [i for i in cut_points(session.history) if i < session.last_request_dropped][-1]
    longer = engine.chat_template([{"role": "system", "content": "You are a weather bot."},
                                   *session.history[earlier:]], tools=[WEATHER], custom_template=QWEN25).prompt
    assert len(engine.tokenize(longer)) > 400 - 64
    assert len(session.history) == len(conversation(8))  # trimming leaves the history alone


@pytest.mark.model
def test_a_turn_that_cannot_fit_is_refused_before_generation(engine: LlamaEngine) -> None:
    session = ChatSession(engine, "Be brief.", max_context_tokens=60, params=GenerationParams(max_tokens=16))
    with pytest.raises(LlamaContextException, match="raise n_ctx"):
        session.send("Tell me everything about " + "the weather in Paris, " * 20)
    assert session.last_request_fit_context is False
    assert session.history[-1]["role"] == "user"
