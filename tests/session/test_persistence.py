"""ChatSession.save / ChatSession.load: the conversation and its KV cache on disk. A resumed session
evaluates only the new turn, and answers as the session that never stopped; what cannot be resumed
is refused with LlamaStateException and leaves the engine's cache empty."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llamact import (
    ChatSession,
    GenerationParams,
    LlamaEngine,
    LlamaStateException,
    ModelParams,
    TemplateTimeChatSession,
)

pytestmark = pytest.mark.model

PARAMS = GenerationParams(greedy=True, max_tokens=12)


@pytest.fixture(scope="module")
def second_engine(smollm2_path: Path):
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=1024, n_threads=1)) as eng:
        yield eng


def test_a_loaded_session_evaluates_only_the_new_turn_and_answers_as_the_original(
        engine: LlamaEngine, second_engine: LlamaEngine, tmp_path: Path) -> None:
    session = TemplateTimeChatSession(engine, "Be brief.", template_now=1_700_000_000, params=PARAMS)
    session.send("Name a colour.")
    session.send("Name a fruit.")
    saved = session.save(tmp_path / "chat")
    assert sorted(p.name for p in saved.iterdir()) == ["kv.state", "session.json"]

    resumed = ChatSession.load(second_engine, saved)
    assert isinstance(resumed, TemplateTimeChatSession) and resumed.template_now == 1_700_000_000
    assert resumed.history == session.history and resumed.system_prompt == "Be brief."
    assert resumed.params == PARAMS
    held = len(second_engine.context_tokens)
    assert held > 0 and second_engine.context_tokens == engine.context_tokens

    original = session.send("Name an animal.")
    again = resumed.send("Name an animal.")
    assert again.content == original.content
    assert again.timings is not None and original.timings is not None
    assert again.timings.cache_n == original.timings.cache_n > 0
    assert again.timings.prompt_n == original.timings.prompt_n
    # without the saved state the whole history is evaluated
    second_engine.context.memory_clear()
    cold = ChatSession(second_engine, "Be brief.", params=PARAMS, template_now=1_700_000_000)
    cold.history = [dict(m) for m in session.history[:-2]]
    reply = cold.send("Name an animal.", params=GenerationParams(greedy=True, max_tokens=12, cache_prompt=False))
    assert reply.timings is not None and reply.timings.prompt_n > again.timings.prompt_n


def test_what_cannot_be_resumed_is_refused(engine: LlamaEngine, second_engine: LlamaEngine, tmp_path: Path) -> None:
    session = ChatSession(engine, params=PARAMS)
    session.send("Hi.")
    saved = session.save(tmp_path / "chat")

    other_model = tmp_path / "other"
    other_model.mkdir()
    data = json.loads((saved / "session.json").read_text())
    data["model"]["size"] += 1
    (other_model / "session.json").write_text(json.dumps(data))
    (other_model / "kv.state").write_bytes((saved / "kv.state").read_bytes())
    with pytest.raises(LlamaStateException, match="saved with model"):
        ChatSession.load(second_engine, other_model)

    truncated = tmp_path / "truncated"
    truncated.mkdir()
    (truncated / "session.json").write_bytes((saved / "session.json").read_bytes())
    state = (saved / "kv.state").read_bytes()
    (truncated / "kv.state").write_bytes(state[: len(state) // 2])
    second_engine.complete("Hello", GenerationParams(greedy=True, max_tokens=2))
    with pytest.raises(LlamaStateException):
        ChatSession.load(second_engine, truncated)
    assert second_engine.context_tokens == ()   # nothing half-loaded stays

    with pytest.raises(LlamaStateException, match="not a saved session"):
        ChatSession.load(second_engine, tmp_path / "missing")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(LlamaStateException, match="not a saved session"):
        session.save(tmp_path / "busy")

    with_code = ChatSession(engine, params=PARAMS, chat_template_kwargs={"f": print})
    with pytest.raises(LlamaStateException, match="not plain JSON"):
        with_code.save(tmp_path / "code")


def _copy(saved: Path, to: Path, session_json: str) -> Path:
    to.mkdir()
    (to / "session.json").write_text(session_json)
    (to / "kv.state").write_bytes((saved / "kv.state").read_bytes())
    return to


def test_a_hostile_or_damaged_record_fails_the_load(engine: LlamaEngine, second_engine: LlamaEngine,
                                                    tmp_path: Path) -> None:
    """Issue 46: a session.json nested 100,000 deep raised RecursionError; bad generation settings
    loaded and failed only at the next send. Both are LlamaStateException at load, nothing loaded."""
    session = ChatSession(engine, params=PARAMS)
    session.send("Hi.")
    saved = session.save(tmp_path / "chat")
    data = json.loads((saved / "session.json").read_text())

    deep = json.dumps({**data, "history": "@"}).replace('"@"', "[" * 100_000 + "]" * 100_000)
    with pytest.raises(LlamaStateException, match="not a saved session"):
        ChatSession.load(second_engine, _copy(saved, tmp_path / "deep", deep))

    for i, bad in enumerate([{"temperature": "hot", "greedy": False}, {"top_k": "many", "greedy": False},
                             {"max_tokens": "lots"}, {"logit_bias": [[10**9, 1.0]]},
                             {"samplers": ["bogus"], "greedy": False}]):
        record = json.dumps({**data, "params": {**data["params"], **bad}})
        second_engine.complete("Hello", GenerationParams(greedy=True, max_tokens=2))
        before = second_engine.context_tokens
        with pytest.raises(LlamaStateException, match="damaged"):
            ChatSession.load(second_engine, _copy(saved, tmp_path / f"bad{i}", record))
        assert second_engine.context_tokens == before, bad   # refused before the KV cache was touched
