"""The conveniences a Python user reaches for on llamact's own API (issue 28, part 2): sampling
keywords as a shortcut for GenerationParams, ``to_openai()`` without arguments, ``complete_chat()``
(one name per idea: the old aliases are gone, issue 41), native warnings kept off a terminal nobody
configured."""

from __future__ import annotations

import pytest
from child_process import run_child

from llamact import ChatRequest, GenerationParams, LlamaEngine, ModelParams
from llamact.chat.oai import ChatRequestError
from llamact.errors import LlamaModelException, LlamaRequestException

pytestmark = pytest.mark.model

ASK = [{"role": "user", "content": "Name a colour."}]


@pytest.fixture(scope="module")
def engine(smollm2_path):
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=512, n_threads=2)) as eng:
        yield eng


def test_sampling_keywords_are_generation_params(engine):
    by_keywords = engine.complete_chat(ASK, temperature=0, max_tokens=6)
    by_params = engine.complete_chat(ASK, params=GenerationParams(temperature=0, max_tokens=6))
    assert by_keywords.content == by_params.content and by_keywords.usage.completion_tokens == 6
    # a keyword wins over the same field of params; the other fields of params stay
    capped = engine.complete_chat(ASK, params=GenerationParams(greedy=True, max_tokens=50), max_tokens=2)
    assert capped.usage.completion_tokens == 2 and capped.finish_reason == "length"
    assert engine.complete("The sky is", max_tokens=3, temperature=0).text == \
        engine.complete("The sky is", GenerationParams(max_tokens=3, temperature=0)).text


def test_a_misspelt_keyword_names_the_nearest_of_either_kind(engine):
    with pytest.raises(ChatRequestError, match="did you mean 'temperature'"):
        engine.create(ASK, temprature=0)
    with pytest.raises(ChatRequestError, match="did you mean 'tool_choice'"):
        engine.create(ASK, tool_choise="auto")
    with pytest.raises(LlamaRequestException, match="did you mean 'max_tokens'"):
        engine.complete("x", max_token=3)


def test_the_request_keeps_its_own_logprobs_and_grammar(engine):
    """logprobs / top_logprobs / grammar are a chat request's fields: the keywords reach the request."""
    reply = engine.complete_chat(ASK, max_tokens=2, greedy=True, logprobs=True, top_logprobs=2,
                                 grammar='root ::= "red" | "blue"')
    assert reply.content in ("red", "blue") and reply.logprobs and len(reply.logprobs[0].top_logprobs) == 2


def test_to_openai_defaults_to_the_replys_own_id_model_and_time(engine):
    reply = engine.complete_chat(ChatRequest(ASK), max_tokens=3, greedy=True)
    first, again = reply.to_openai(), reply.to_openai()
    assert first["id"] == again["id"] == reply.id and first["id"].startswith("chatcmpl-")
    assert first["model"] == engine.model_name and first["created"] == reply.created
    assert reply.to_openai("x", "m", 7)["id"] == "x"

    chunks = list(engine.create(ASK, max_tokens=3, greedy=True).openai_chunks(include_usage=True))
    assert len({c["id"] for c in chunks}) == 1 and {c["model"] for c in chunks} == {engine.model_name}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 3
    with engine.create(ASK, max_tokens=1, greedy=True) as stream:
        lone = next(stream).to_openai()
    assert lone[0]["object"] == "chat.completion.chunk" and lone[0]["id"].startswith("chatcmpl-")


def test_a_generation_params_grammar_in_a_chat_request_is_refused(engine):
    """A chat request's grammar is its own option (issue 41: the deprecated fold-in is gone); a
    GenerationParams.grammar there is refused by name, never dropped without a word."""
    for call in (lambda: engine.create(ASK, params=GenerationParams(grammar='root ::= "red"')),
                 lambda: engine.complete_chat(ASK, params=GenerationParams(grammar='root ::= "red"')),
                 lambda: engine.prepare_chat(ChatRequest(ASK), GenerationParams(grammar='root ::= "red"'))):
        with pytest.raises(ChatRequestError, match=r"create\(messages, grammar=\.\.\.\)"):
            call()
    assert engine.complete_chat(ASK, grammar='root ::= "red"', max_tokens=4, greedy=True).content == "red"


def test_one_name_per_idea():
    """The chat verbs of a 0.1 package, without aliases (docs/design.md, "The engine's API")."""
    from llamact import AsyncLlamaEngine

    gone = {"chat", "chat_prompt", "chat_template_set", "create_completion", "acreate", "media_prompt"}
    assert gone.isdisjoint(dir(LlamaEngine)) and not hasattr(AsyncLlamaEngine, "create_completion")


NATIVE_WARNING = """
import logging, sys
if sys.argv[2] == "configured":
    logging.basicConfig()
from llamact import LlamaEngine, ModelParams
with LlamaEngine.load(sys.argv[1], ModelParams(n_ctx=128, n_threads=1)) as engine:
    engine.embed(["hi"])   # SmolLM2 pools none: llama.cpp warns about the mean pooling asked for
"""


@pytest.mark.parametrize("logging_setup", ["none", "configured"])
def test_native_warnings_reach_only_a_configured_logging(smollm2_path, logging_setup, tmp_path):
    run = run_child(NATIVE_WARNING, str(smollm2_path), logging_setup, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr
    assert ("pooling_type" in run.stderr) == (logging_setup == "configured"), run.stderr


def test_a_session_takes_the_sampling_keywords_too(engine):
    from llamact import ChatSession

    session = ChatSession(engine, "Be brief.")
    reply = session.send("Name a colour.", max_tokens=3, temperature=0)
    assert reply.usage.completion_tokens == 3 and session.history[-1]["role"] == "assistant"


def test_model_path_is_loads_other_name_and_stream_is_explained(smollm2_path, engine):
    from llamact.errors import LlamaModelException

    with LlamaEngine.load(model_path=smollm2_path, params=ModelParams(n_ctx=128, n_threads=1)) as other:
        assert other.model_name == engine.model_name
    with pytest.raises(LlamaModelException, match="once"):
        LlamaEngine.load(smollm2_path, model_path=smollm2_path)
    with pytest.raises(ChatRequestError, match="complete_chat"):
        engine.create(ASK, stream=True)


def test_load_takes_model_params_keywords(smollm2_path):
    with LlamaEngine.load(smollm2_path, n_ctx=256, n_threads=1, adaptive_threads=False) as small:
        assert small.n_ctx == 256 and small.context.governor is None
    # a keyword wins over the same field of params; the other fields of params stay
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=512, n_threads=1), n_ctx=768) as mixed:
        assert mixed.n_ctx == 768 and mixed.params.n_threads == 1
    with pytest.raises(LlamaModelException, match="'n_ctxx' is not a ModelParams field; did you mean 'n_ctx'"):
        LlamaEngine.load(smollm2_path, n_ctxx=256)


def test_get_metadata_takes_a_key(engine):
    whole = engine.get_metadata()
    assert engine.get_metadata("tokenizer.chat_template") == whole["tokenizer.chat_template"]
    assert engine.get_metadata("no.such.key") is None and engine.get_metadata("no.such.key", "x") == "x"
