"""ChatSession: the history a conversation builds, continuation, reset, the fixed template clock,
and the prompts of a 6-turn session with tool exchanges against upstream's apply (the oracle)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from session_templates import template

from llamact import ChatSession, GenerationParams, LlamaEngine, TemplateTimeChatSession
from llamact.errors import LlamaRequestException
from llamact.parity.components import ORACLE_NOW
from llamact.parity.oracle import OracleClient, OracleError

pytestmark = pytest.mark.model

GREEDY = GenerationParams(greedy=True, max_tokens=12)
WEATHER = {"type": "function", "function": {"name": "weather", "description": "The weather in a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}


def test_send_records_the_turns_and_continue_extends_the_last(engine: LlamaEngine) -> None:
    session = ChatSession(engine, "Be brief.", params=GREEDY)
    reply = session.send("What is 2+2?")
    assert reply.content and session.history == [{"role": "user", "content": "What is 2+2?"},
                                                 {"role": "assistant", "content": reply.content}]
    assert session.last_request_fit_context is True and session.last_request_dropped == 0
    more = session.send(None, continue_previous_turn=True, params=GenerationParams(greedy=True, max_tokens=4))
    assert len(session.history) == 2
    assert session.history[-1]["content"] == more.content and more.content.startswith(reply.content)
    with pytest.raises(LlamaRequestException, match="pass no content"):
        session.send("x", continue_previous_turn=True)
    session.reset()
    assert session.history == [] and session.system_prompt == "Be brief."


def test_a_stream_closed_early_adds_no_reply(engine: LlamaEngine) -> None:
    session = ChatSession(engine, params=GREEDY)
    with session.create("Hello") as stream:
        next(iter(stream))
    assert session.history == [{"role": "user", "content": "Hello"}]


def test_template_time_session_fixes_the_clock(engine: LlamaEngine) -> None:
    llama31 = template("meta-llama-Llama-3.1-8B-Instruct")  # renders "Today Date: <strftime_now>"
    session = TemplateTimeChatSession(engine, "Be brief.", template_now=ORACLE_NOW, custom_template=llama31)
    session.add_message({"role": "user", "content": "Hi"})
    assert "Today Date: 15 Jan 2026" in session.request_template().prompt
    session.template_now = ORACLE_NOW + 86400
    session.reset()
    session.add_message({"role": "user", "content": "Hi"})
    assert "Today Date: 16 Jan 2026" in session.request_template().prompt


def _call(i: int, city: str) -> dict[str, Any]:
    return {"id": f"call{i:05d}", "type": "function",
            "function": {"name": "weather", "arguments": f'{{"city": "{city}"}}'}}


SIX_TURNS: list[list[dict[str, Any]]] = [
    [{"role": "assistant", "content": "", "tool_calls": [_call(1, "Paris")]},
     {"role": "tool", "tool_call_id": "call00001", "name": "weather", "content": "Sunny"},
     {"role": "assistant", "content": "It is sunny in Paris."}],
    [{"role": "assistant", "content": "Hello!"}],
    [{"role": "assistant", "content": "", "tool_calls": [_call(2, "Rome"), _call(3, "Oslo")]},
     {"role": "tool", "tool_call_id": "call00002", "name": "weather", "content": "Rain"},
     {"role": "tool", "tool_call_id": "call00003", "name": "weather", "content": "{\"snow\": true}"},
     {"role": "assistant", "content": "Rain in Rome, snow in Oslo."}],
    [{"role": "assistant", "content": "Let me check.", "tool_calls": [_call(4, "Lima")]},
     {"role": "tool", "tool_call_id": "call00004", "name": "weather", "content": "Fog"},
     {"role": "assistant", "content": "Foggy."}],
    [{"role": "assistant", "content": "Anything else?"}],
    [],
]


@pytest.mark.parity
@pytest.mark.parametrize("name", ["Qwen-Qwen2.5-7B-Instruct", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"])
def test_six_turn_prompts_equal_upstreams_apply(oracle: OracleClient, engine: LlamaEngine, smollm2_path: Path,
                                                name: str) -> None:
    source = template(name)
    session = TemplateTimeChatSession(engine, "You answer weather questions.", template_now=ORACLE_NOW,
                                      custom_template=source)
    for turn, replies in enumerate(SIX_TURNS):
        session.add_message({"role": "user", "content": f"Turn {turn}: what about the weather?"})
        ours = session.request_template(tools=[WEATHER]).to_json()
        assert session.last_request_dropped == 0
        expected = oracle.request("chat_apply", model=str(smollm2_path), template=source, now=ORACLE_NOW,
                                  inputs={"messages": session.messages, "tools": [WEATHER],
                                          "tool_choice": "auto", "reasoning_format": "deepseek"})
        assert not isinstance(expected, OracleError), expected
        assert ours == expected, f"turn {turn}"
        for reply in replies:
            session.add_message(reply)
