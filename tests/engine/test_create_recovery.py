"""docs/design.md deviation 17 through the engine: ``create()``, ``complete_chat()``, a session and
the llama-cpp-python shim, given outputs word for word (``scripted_model``: the prompt is the real
one, only sampling is replaced) -- a call in a fenced block, a parse that fails -- and what
``upstream_compat=True`` does with the same outputs (llama-server's: content, or the parse error)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scripted_model import SCRIPT, scripted

from llamact import ChatSession, LlamaEngine, ModelParams
from llamact.chat.output_parser import ChatParseError
from llamact.compat import Llama

TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"
QWEN25 = (TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8")
WEATHER: dict[str, Any] = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
FENCED = 'Let me check.\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'
STRAY = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\nDone.'
PARSE_ERROR = "The model produced output that does not match the expected peg-native format"


def ask(output: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": SCRIPT + output}]


@pytest.fixture(scope="module")
def engine(smollm2_path: Path) -> Iterator[LlamaEngine]:
    with scripted(), LlamaEngine.load(smollm2_path, ModelParams(n_ctx=2048, n_threads=1, chat_template=QWEN25)) as eng:
        yield eng


def test_create_streams_the_recovered_call_and_reports_it(engine: LlamaEngine) -> None:
    with engine.create(ask(FENCED), tools=[WEATHER]) as stream:
        chunks = list(stream)
    assert stream.text == FENCED
    assert "".join(c.content or "" for c in chunks) == stream.message.content == "Let me check.\n"
    [call] = [c for chunk in chunks for c in chunk.tool_calls]
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"}) and call.id
    last = chunks[-1]
    assert last.finish_reason == "tool_calls"
    assert last.recovery is not None and last.recovery.to_json() == {"parse_error": None, "recovered": ["fenced_block"]}
    assert last.to_openai()[0]["choices"][0]["delta"]["llamact"] == last.recovery.to_json()
    assert all(c.recovery is None for c in chunks[:-1]) and not any(c.final_parse for c in chunks)


def test_complete_chat_answers_a_failed_parse_with_the_extension_field(engine: LlamaEngine) -> None:
    completion = engine.complete_chat(ask(STRAY), tools=[WEATHER])
    assert completion.finish_reason == "tool_calls" and completion.content == "Done."
    assert [(c.name, json.loads(c.arguments)) for c in completion.tool_calls] == [("get_weather", {"city": "Paris"})]
    body = completion.to_openai()
    assert body["choices"][0]["message"]["llamact"] == {"parse_error": PARSE_ERROR, "recovered": ["stray_text"]}
    with pytest.raises(ChatParseError):   # llama-server's answer: the parse error ends the request
        engine.complete_chat(ask(STRAY), tools=[WEATHER], upstream_compat=True)


def test_upstream_compat_leaves_the_fenced_call_as_text(engine: LlamaEngine) -> None:
    completion = engine.complete_chat(ask(FENCED), tools=[WEATHER], upstream_compat=True)
    assert completion.content == FENCED and completion.tool_calls == [] and completion.finish_reason == "stop"
    assert completion.recovery is None and "llamact" not in completion.to_openai()["choices"][0]["message"]


def test_a_reply_that_needs_nothing_has_no_extension_field(engine: LlamaEngine) -> None:
    completion = engine.complete_chat(ask("It is sunny."), tools=[WEATHER])
    assert completion.recovery is None and "llamact" not in completion.to_openai()["choices"][0]["message"]


def test_a_session_keeps_the_recovered_call_in_its_history(engine: LlamaEngine) -> None:
    session = ChatSession(engine)
    reply = session.send(SCRIPT + FENCED, tools=[WEATHER])
    assert reply.recovery is not None and reply.finish_reason == "tool_calls"
    last = session.history[-1]
    assert last["role"] == "assistant" and last["tool_calls"][0]["function"]["name"] == "get_weather"

    calls: list[str] = []

    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return "sunny"

    session = ChatSession(engine)
    # the script answers every round (its user message stays the last): the first round's call runs
    result = session.send_with_tools(SCRIPT + FENCED, [get_weather], max_rounds=2)
    assert calls == ["Paris"] and result.stop_reason == "max_rounds"


def test_the_llama_cpp_python_shim_carries_the_field(smollm2_path: Path) -> None:
    with scripted(), Llama(str(smollm2_path), n_ctx=1024, n_threads=1, verbose=False, chat_template=QWEN25) as llm:
        reply = llm.create_chat_completion(ask(STRAY), tools=[WEATHER])
        message = reply["choices"][0]["message"]
        assert message["tool_calls"][0]["function"]["name"] == "get_weather" and message["content"] == "Done."
        assert message["llamact"] == {"parse_error": PARSE_ERROR, "recovered": ["stray_text"]}
        chunks = list(llm.create_chat_completion(ask(FENCED), tools=[WEATHER], stream=True))
        assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
        assert chunks[-1]["choices"][0]["delta"]["llamact"] == {"parse_error": None, "recovered": ["fenced_block"]}
