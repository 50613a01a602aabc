"""The real SmolLM2-135M-Instruct as a LiteRT-LM bundle (146 MB, built by scripts/litert/build_bundles.py
--real into LLAMACT_CACHE/litert): it answers, greedily, and both paths agree. Skipped where the
bundle is not built (the build needs the several-GB conversion toolchain; the default suite does not)."""

from __future__ import annotations

import pytest
from litert_bundles import REAL, needs_real_bundle, needs_runtime

from llamact import ChatSession, LlamaEngine

pytestmark = [needs_runtime, needs_real_bundle, pytest.mark.slow, pytest.mark.model]

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def real_engine():
    with LlamaEngine.load(REAL, n_threads=2) as engine:
        yield engine


def test_the_real_model_answers(real_engine: LlamaEngine) -> None:
    reply = real_engine.complete_chat(QUESTION, temperature=0, max_tokens=40)
    assert "Paris" in reply.content and reply.finish_reason == "stop"


def test_both_paths_agree_on_the_real_model(real_engine: LlamaEngine) -> None:
    source = real_engine.templates().default.source
    with real_engine.create(QUESTION, temperature=0, max_tokens=40) as conversation:
        by_conversation = conversation.completion()
    with real_engine.create(QUESTION, temperature=0, max_tokens=40, custom_template=source) as rendered:
        by_rendering = rendered.completion()
    assert by_conversation.text == by_rendering.text and by_conversation.message == by_rendering.message
    assert (conversation.generation.path, rendered.generation.path) == ("conversation", "rendered")


def test_a_real_session_sends_its_history_as_the_conversation_preface(real_engine: LlamaEngine) -> None:
    session = ChatSession(real_engine, system_prompt="You are a helpful assistant.")
    first = session.send("My name is Ada.", temperature=0, max_tokens=30)
    prompt = session.request_template().prompt
    with session.create("What is my name?", temperature=0, max_tokens=30) as stream:
        second = stream.completion()
    assert stream.stream.generation.path == "conversation" and second.content
    assert "My name is Ada." in prompt and first.content.strip() in prompt
    assert [m["role"] for m in session.history] == ["user", "assistant", "user", "assistant"]
