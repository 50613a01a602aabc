"""The tool loop on SmolLM2 with a vendored tool-calling template (Qwen 2.5's), constrained so the
tiny model's answers are decided by the grammar: the first round is a named tool choice, the city
an enum and the day an integer in 1..7. Every stop reason is reached here."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
import pytest
from pydantic import AfterValidator, Field
from session_templates import template

from llamact import ChatSession, GenerationParams, LlamaEngine, ModelParams, Tool, ToolCallRequest
from llamact.parity.oracle import OracleClient, OracleError
from llamact.session.tools import run_tool_loop

pytestmark = pytest.mark.model

QWEN25 = template("Qwen-Qwen2.5-7B-Instruct")
NAMED = {"type": "function", "function": {"name": "get_weather"}}
ASK = "What is the weather in Paris on day 3?"
Day = Annotated[int, Field(ge=1, le=7)]


def session_for(engine: LlamaEngine, max_tokens: int = 64, **kwargs: Any) -> ChatSession:
    return ChatSession(engine, "You are a helpful assistant.", custom_template=QWEN25,
                       params=GenerationParams(greedy=True, max_tokens=max_tokens), **kwargs)


CALLS: list[tuple[str, int]] = []


def get_weather(city: Literal["Paris", "London"], day: Day) -> str:
    """Get the weather forecast for a city.

    Args:
        city: The city.
        day: The day of the week, 1 to 7.
    """
    CALLS.append((city, day))
    return f"Sunny and 22 degrees in {city}."


async def failing_weather(city: Literal["Paris", "London"], day: Day) -> str:
    """Get the weather forecast for a city.

    Args:
        city: The city.
        day: The day of the week, 1 to 7.
    """
    await asyncio.sleep(0)
    raise RuntimeError(f"station {city} offline")


def _even(day: int) -> int:
    if day % 2:
        raise ValueError("only even days are forecast")
    return day


def even_weather(city: Literal["Paris", "London"], day: Annotated[Day, AfterValidator(_even)]) -> str:
    """Get the weather forecast for a city.

    Args:
        city: The city.
        day: The day of the week, 1 to 7.
    """
    raise AssertionError("must not run with invalid arguments")


def unrun_weather(city: Literal["Paris", "London"], day: Day) -> str:
    """Get the weather forecast for a city.

    Args:
        city: The city.
        day: The day of the week, 1 to 7.
    """
    raise AssertionError("must not run")


# the same tool (name, description, schema) to the model; different Python behind it
FAILING = Tool.from_function(failing_weather, name="get_weather")
EVEN = Tool.from_function(even_weather, name="get_weather")
UNRUN = Tool.from_function(unrun_weather, name="get_weather")


@pytest.mark.parity
def test_a_loop_that_completes(engine: LlamaEngine, oracle: OracleClient, smollm2_path: Path) -> None:
    CALLS.clear()
    session = session_for(engine)
    result = session.send_with_tools(ASK, [get_weather], tool_choice=NAMED, max_rounds=3)
    assert result.stop_reason == "completed", (result, result.completion and result.completion.text)
    assert result.rounds == 2 and not result.rolled_back
    assert CALLS == [("Paris", 3)] and type(CALLS[0][1]) is int
    user, call, tool, answer = result.messages
    assert user == {"role": "user", "content": ASK}
    assert [c["function"]["name"] for c in call["tool_calls"]] == ["get_weather"]
    assert tool == {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "name": "get_weather",
                    "content": "Sunny and 22 degrees in Paris."}
    assert answer["role"] == "assistant" and not answer.get("tool_calls") and answer["content"] == result.content
    assert session.history == result.messages
    # the tool result went back through the template exactly as upstream renders that conversation
    expected = oracle.request("chat_apply", model=str(smollm2_path), template=QWEN25,
                              inputs={"messages": [{"role": "system", "content": "You are a helpful assistant."},
                                                   user, call, tool],
                                      "tools": [Tool.from_function(get_weather).spec], "tool_choice": "auto",
                                      "reasoning_format": "deepseek"})
    assert not isinstance(expected, OracleError), expected
    assert result.completion.prompt == expected["prompt"]


def test_max_rounds_leaves_the_calls_pending(engine: LlamaEngine) -> None:
    session = session_for(engine)
    result = session.send_with_tools(ASK, [UNRUN], tool_choice=NAMED, max_rounds=1)
    assert result.stop_reason == "max_rounds" and result.rounds == 1 and not result.rolled_back
    (pending,) = result.pending_tool_calls
    assert pending.name == "get_weather" and pending.tool is UNRUN
    assert pending.id == session.history[-1]["tool_calls"][0]["id"]
    assert [m["role"] for m in session.history] == ["user", "assistant"]


def test_declared_tools_are_unhandled(engine: LlamaEngine) -> None:
    session = session_for(engine)
    result = session.send_with_tools(ASK, [UNRUN.spec], tool_choice=NAMED)
    assert result.stop_reason == "unhandled_tool_calls" and not result.rolled_back
    (pending,) = result.pending_tool_calls
    assert pending.name == "get_weather" and pending.tool is not None and pending.tool.function is None
    assert pending.arguments == session.history[-1]["tool_calls"][0]["function"]["arguments"]


def test_context_exceeded_before_generating(engine: LlamaEngine) -> None:
    session = session_for(engine, max_context_tokens=120)
    result = session.send_with_tools(ASK, [UNRUN], tool_choice=NAMED)
    assert result.stop_reason == "context_exceeded" and result.rounds == 0
    assert session.last_request_fit_context is False
    assert result.messages == [{"role": "user", "content": ASK}]


def test_truncated_rolls_the_round_back(engine: LlamaEngine) -> None:
    session = session_for(engine, max_tokens=3)
    result = session.send_with_tools(ASK, [UNRUN], tool_choice=NAMED)
    assert result.stop_reason == "truncated" and result.rolled_back
    assert result.completion.finish_reason == "length"
    assert session.history == result.messages == [{"role": "user", "content": ASK}]


def test_a_tool_error_is_returned_to_the_model_and_cancel_stops_the_loop(engine: LlamaEngine) -> None:
    session = session_for(engine)
    seen: list[ToolCallRequest] = []

    def on_tool_call(call: ToolCallRequest) -> None:
        seen.append(call)
        session.cancel()  # the tool still runs; the loop stops before the next round

    result = session.send_with_tools(ASK, [FAILING], tool_choice=NAMED, on_tool_call=on_tool_call)
    assert result.stop_reason == "cancelled" and result.rounds == 1 and not result.rolled_back
    assert [c.name for c in seen] == ["get_weather"]
    assert result.messages[-1] == {"role": "tool", "tool_call_id": seen[0].id, "name": "get_weather",
                                   "content": "Error: RuntimeError: station Paris offline"}


def test_invalid_arguments_go_to_on_tool_error(engine: LlamaEngine) -> None:
    errors: list[tuple[ToolCallRequest, BaseException]] = []

    def on_tool_error(call: ToolCallRequest, exc: BaseException) -> str:
        errors.append((call, exc))
        raise exc

    session = session_for(engine)
    with pytest.raises(pydantic.ValidationError, match="only even days"):
        session.send_with_tools(ASK, [EVEN], tool_choice=NAMED, on_tool_error=on_tool_error)
    assert len(errors) == 1 and errors[0][0].name == "get_weather"
    assert session.history == [{"role": "user", "content": ASK}]  # the round was rolled back


def test_a_cancel_during_generation_rolls_the_round_back(engine: LlamaEngine,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    session = session_for(engine)
    create = engine.create

    def create_then_cancel(*args: Any, **kwargs: Any) -> Any:
        stream = create(*args, **kwargs)
        session.cancel()  # the generation is requested: it ends cancelled, before its first decode
        return stream

    monkeypatch.setattr(engine, "create", create_then_cancel)
    result = session.send_with_tools(ASK, [UNRUN], tool_choice=NAMED)
    assert result.completion.finish_reason == "cancelled"
    assert result.stop_reason == "cancelled" and result.rolled_back and result.rounds == 1
    assert session.history == [{"role": "user", "content": ASK}]


def test_a_full_context_during_generation(smollm2_path: Path) -> None:
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=320, n_threads=1)) as small:
        n_ctx = small.context.n_ctx
        unlimited = GenerationParams(greedy=True, max_tokens=-1)
        words = 0
        while True:  # a system prompt that leaves room for only a few generated tokens
            session = ChatSession(small, "Hello " * words, custom_template=QWEN25, params=unlimited)
            session.add_message({"role": "user", "content": ASK})
            n_prompt = len(small.tokenize(session.request_template(tools=[UNRUN.spec], tool_choice=NAMED).prompt))
            if n_prompt >= n_ctx - 6:
                break
            words += max(1, (n_ctx - 6 - n_prompt) // 2)
        assert n_prompt < n_ctx  # it fits, but the forced call does not
        session.history.clear()
        result = session.send_with_tools(ASK, [UNRUN], tool_choice=NAMED)
    assert result.stop_reason == "context_exceeded" and result.rolled_back and result.rounds == 1
    assert result.completion.finish_reason == "length"


# -- the loop's bookkeeping, with scripted replies -------------------------------------------------

class _Scripted(ChatSession):
    """A session whose replies are given, to test the loop without a model."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:  # noqa: D107
        self.history = []
        self.params = GenerationParams(max_tokens=8)
        self._replies = replies

    def send(self, content: Any = None, **kwargs: Any) -> Any:
        reply = self._replies.pop(0)
        self.history.append(reply)

        class Done:
            finish_reason = "tool_calls" if reply.get("tool_calls") else "stop"
            content = reply.get("content", "")

        return Done()


def _c(i: int, name: str, args: str) -> dict[str, Any]:
    return {"id": f"id{i}", "type": "function", "function": {"name": name, "arguments": args}}


def test_parallel_calls_run_in_order_and_keep_their_ids() -> None:
    order: list[str] = []

    def first(x: int) -> int:
        order.append("first")
        return x + 1

    async def second(text: str) -> dict[str, str]:
        order.append("second")
        return {"echo": text}

    session = _Scripted([{"role": "assistant", "content": "", "tool_calls": [
        _c(7, "second", '{"text": "a"}'), _c(8, "first", '{"x": "41"}'), _c(9, "first", '{"x": "no"}')]},
        {"role": "assistant", "content": "done"}])
    result = run_tool_loop(session, "go", [first, second])
    assert result.stop_reason == "completed" and order == ["second", "first"]
    tools = [m for m in result.messages if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["name"]) for m in tools] == [("id7", "second"), ("id8", "first"), ("id9", "first")]
    assert tools[0]["content"] == '{"echo":"a"}' and tools[1]["content"] == "42"
    assert tools[2]["content"].startswith("Error: ValidationError:")


def test_unknown_function_names_are_unhandled() -> None:
    session = _Scripted([{"role": "assistant", "content": "", "tool_calls": [_c(1, "nope", "{}")]}])
    result = run_tool_loop(session, "go", [UNRUN])
    assert result.stop_reason == "unhandled_tool_calls" and result.pending_tool_calls[0].tool is None
