"""llama-cpp-python's own high-level examples (its README and docs, 0.3.x) through llamact.compat,
unchanged but for the import and the model path: every result must have llama-cpp-python's
documented shape (compat_shapes.py, from its llama_types.py) and answer what the example asks
(JSON that parses, the forced tool call in message.tool_calls, the grammar's language...).

What the peer itself answers for the same requests is test_side_by_side.py's business.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from compat_shapes import (
    CHAT_CHUNK,
    CHAT_COMPLETION,
    COMPLETION,
    EMBEDDING_RESPONSE,
    Opt,
    assert_shape,
    shape_errors,
)

from llamact.compat import Llama, LlamaGrammar, LlamaState, LogitsProcessorList, StoppingCriteriaList
from llamact.errors import LlamaUnsupportedException

pytestmark = pytest.mark.model

PLANETS = "Q: Name the planets in the solar system? A: "
JSON_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant that outputs in JSON."},
    {"role": "user", "content": "Who won the world series in 2020"},
]
USER_DETAIL = {
    "type": "function",
    "function": {
        "name": "UserDetail",
        "parameters": {
            "type": "object",
            "title": "UserDetail",
            "properties": {"name": {"title": "Name", "type": "string"}, "age": {"title": "Age", "type": "integer"}},
            "required": ["name", "age"],
        },
    },
}


@pytest.fixture(scope="module")
def llm(smollm2_path: Path) -> Llama:
    # the README's constructor, its commented-out options set (seed: the sampled examples repeat)
    return Llama(model_path=str(smollm2_path), seed=1337, n_ctx=2048, n_threads=2, verbose=False)


def _content(response: dict) -> str:
    content = response["choices"][0]["message"]["content"]
    assert isinstance(content, str), response
    return content


def _json(response: dict) -> object:
    try:
        return json.loads(_content(response))
    except json.JSONDecodeError as exc:
        pytest.fail(f"not JSON ({exc}): {response}")


def test_shape_checker_finds_what_departs() -> None:
    """The checker itself: a shape check that could not fail would prove nothing."""
    good = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    usage = {"prompt_tokens": int, "completion_tokens": int, "total_tokens": int}
    assert shape_errors(good, usage) == []
    assert shape_errors({**good, "extra": 1}, usage) == ["$: unexpected key 'extra'"]
    assert shape_errors({"prompt_tokens": 1, "total_tokens": 3}, usage) == ["$: missing key 'completion_tokens'"]
    assert shape_errors({**good, "total_tokens": True}, usage)  # a bool is not an int
    assert shape_errors([np.float32(1.0)], [float])  # nor a numpy scalar a float
    assert shape_errors(None, Opt(int)) == [] and shape_errors("x", Opt(int))


# -- text completion (README: High-level API) ------------------------------------------------

def test_text_completion_readme_example(llm: Llama, smollm2_path: Path) -> None:
    output = llm(PLANETS, max_tokens=32, stop=["Q:", "\n"], echo=True)
    assert_shape(output, COMPLETION)
    choice = output["choices"][0]
    assert choice["text"].startswith(PLANETS)  # echo
    generated = choice["text"][len(PLANETS):]
    assert "\n" not in generated and "Q:" not in generated  # cut before a stop string
    assert output["model"] == str(smollm2_path)  # the model_path, as the README's output shows
    usage = output["usage"]
    assert usage["prompt_tokens"] == len(llm.tokenize(PLANETS.encode(), special=True))
    assert 0 < usage["completion_tokens"] <= 32
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert output["id"].startswith("cmpl-")


def test_create_completion_is_call(llm: Llama) -> None:
    by_call = llm(PLANETS, max_tokens=12, temperature=0)
    by_method = llm.create_completion(PLANETS, max_tokens=12, temperature=0)
    assert by_call["choices"] == by_method["choices"] and by_call["usage"] == by_method["usage"]
    assert by_method["choices"][0]["finish_reason"] == "length" and by_method["usage"]["completion_tokens"] == 12


def test_text_completion_stream(llm: Llama) -> None:
    llm.reset()  # each from a fresh evaluation: see test_chat_completion_stream
    whole = llm(PLANETS, max_tokens=12, temperature=0)
    llm.reset()
    chunks = list(llm(PLANETS, max_tokens=12, temperature=0, stream=True))
    assert len(chunks) > 1
    for chunk in chunks:
        assert_shape(chunk, COMPLETION)
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "length"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    assert len({c["id"] for c in chunks}) == 1


# -- chat completion -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gemma3_llm(gemma3_path: Path) -> Llama:
    return Llama(model_path=str(gemma3_path), n_ctx=2048, n_threads=2, verbose=False)


@pytest.mark.parametrize("model", ["llm", "gemma3_llm"])
def test_chat_completion_readme_example(model: str, request: pytest.FixtureRequest) -> None:
    # each GGUF's own template: SmolLM2's ChatML; this gemma3 GGUF has none (llama.cpp's default)
    llm = request.getfixturevalue(model)
    response = llm.create_chat_completion(
        messages=[
            {"role": "system", "content": "You are an assistant who perfectly describes images."},
            {"role": "user", "content": "Describe this image in detail please."},
        ],
        max_tokens=16,
    )
    assert_shape(response, CHAT_COMPLETION)
    choice = response["choices"][0]
    assert choice["message"]["role"] == "assistant" and _content(response).strip()
    assert "tool_calls" not in choice["message"]
    assert choice["finish_reason"] in ("stop", "length")
    assert response["id"].startswith("chat")
    usage = response["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > usage["prompt_tokens"]


def test_chat_completion_stream(llm: Llama) -> None:
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    # Each from a fresh evaluation: like llama-cpp-python, llamact reuses the evaluated prefix of a
    # repeated prompt, and logits computed in another batch split differ in their last bits (here
    # enough to flip a near tie of SmolLM2's).
    llm.reset()
    whole = llm.create_chat_completion(messages=messages, max_tokens=16, temperature=0)
    llm.reset()
    chunks = list(llm.create_chat_completion(messages=messages, max_tokens=16, temperature=0, stream=True))
    for chunk in chunks:
        assert_shape(chunk, CHAT_CHUNK)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0].get("role") == "assistant"
    assert "".join(d.get("content") or "" for d in deltas) == _content(whole)
    reasons = [c["choices"][0]["finish_reason"] for c in chunks]
    assert reasons[-1] == whole["choices"][0]["finish_reason"] and not any(reasons[:-1])
    assert len({c["id"] for c in chunks}) == 1


# -- JSON and JSON Schema mode ---------------------------------------------------------------

# The JSON examples sample (temperature 0.7): from a fresh evaluation, so that the seed alone decides
# (an evaluated prefix reused from the previous test changes the logits' last bits). max_tokens is
# the one addition, a guard: SmolLM2 can repeat a word inside a JSON string until the context ends
# (2,014 tokens, half a minute, seen here), which must fail (unparsable) rather than take the time.
JSON_GUARD = 128


def test_json_mode(llm: Llama) -> None:
    llm.reset()
    response = llm.create_chat_completion(messages=JSON_MESSAGES, response_format={"type": "json_object"},
                                          temperature=0.7, max_tokens=JSON_GUARD)
    assert_shape(response, CHAT_COMPLETION)
    assert isinstance(_json(response), dict)


def test_json_schema_mode(llm: Llama) -> None:
    llm.reset()
    response = llm.create_chat_completion(
        messages=JSON_MESSAGES,
        response_format={
            "type": "json_object",
            "schema": {"type": "object", "properties": {"team_name": {"type": "string"}}, "required": ["team_name"]},
        },
        temperature=0.7,
        max_tokens=JSON_GUARD,
    )
    assert_shape(response, CHAT_COMPLETION)
    value = _json(response)
    assert isinstance(value, dict) and isinstance(value["team_name"], str)


# -- function calling ------------------------------------------------------------------------

def test_function_calling_readme_example(llm: Llama, smollm2_path: Path) -> None:
    # The README's Llama(..., chat_format="chatml-function-calling") names one of llama-cpp-python's
    # hand-written formatters: llamact refuses it by name (the model's own template renders tools);
    # the migration drops the argument, and the call itself runs unchanged.
    with pytest.raises(LlamaUnsupportedException, match="chat_format"):
        Llama(model_path=str(smollm2_path), chat_format="chatml-function-calling", verbose=False)
    response = llm.create_chat_completion(
        messages=[
            {"role": "system", "content": "A chat between a curious user and an artificial intelligence assistant. "
             "The assistant gives helpful, detailed, and polite answers to the user's questions. The assistant "
             "calls functions with appropriate input when necessary"},
            {"role": "user", "content": "Extract Jason is 25 years old"},
        ],
        tools=[USER_DETAIL],
        tool_choice={"type": "function", "function": {"name": "UserDetail"}},
    )
    assert_shape(response, CHAT_COMPLETION)
    choice = response["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    calls = choice["message"]["tool_calls"]
    assert len(calls) == 1 and calls[0]["type"] == "function" and calls[0]["function"]["name"] == "UserDetail"
    arguments = json.loads(calls[0]["function"]["arguments"])
    assert isinstance(arguments["name"], str) and type(arguments["age"]) is int


# -- embeddings ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def embedder(smollm2_path: Path) -> Llama:
    return Llama(model_path=str(smollm2_path), embedding=True, n_threads=2, verbose=False)


def _n_embd(llm: Llama) -> int:
    return int(llm.metadata[f"{llm.metadata['general.architecture']}.embedding_length"])


def test_create_embedding_readme_example(embedder: Llama) -> None:
    one = embedder.create_embedding("Hello, world!")
    assert_shape(one, EMBEDDING_RESPONSE)
    two = embedder.create_embedding(["Hello, world!", "Goodbye, world!"])
    assert_shape(two, EMBEDDING_RESPONSE)
    assert [d["index"] for d in two["data"]] == [0, 1] and len(one["data"]) == 1
    assert two["data"][0]["embedding"] == one["data"][0]["embedding"]
    n_embd = _n_embd(embedder)
    for response, texts in ((one, ["Hello, world!"]), (two, ["Hello, world!", "Goodbye, world!"])):
        for item, text in zip(response["data"], texts, strict=True):
            vector = np.asarray(item["embedding"])  # one per text, or one per token (no pooling)
            assert vector.shape[-1] == n_embd and np.isfinite(vector).all()
            if vector.ndim == 2:
                assert vector.shape[0] == len(embedder.tokenize(text.encode()))
    assert two["usage"]["prompt_tokens"] == two["usage"]["total_tokens"] > one["usage"]["total_tokens"]


def test_embed(embedder: Llama) -> None:
    single = embedder.embed("Hello, world!")
    batch = embedder.embed(["Hello, world!", "Goodbye, world!"])
    assert isinstance(single, list) and isinstance(batch, list) and len(batch) == 2
    assert batch[0] == single
    assert np.asarray(single).shape[-1] == _n_embd(embedder)
    assert embedder.create_embedding("Hello, world!")["data"][0]["embedding"] == single


# -- tokenizer, state, context, metadata -----------------------------------------------------

def test_tokenize_detokenize(llm: Llama) -> None:
    text = b"Hello, world! \xc3\xa9"
    tokens = llm.tokenize(text)
    assert tokens and all(type(t) is int for t in tokens)
    assert llm.detokenize(tokens) == text
    marker = b"<|im_start|>"
    assert len(llm.tokenize(marker, add_bos=False, special=True)) == 1  # the special token
    assert len(llm.tokenize(marker, add_bos=False, special=False)) > 1  # its text, piece by piece


def test_save_state_load_state(llm: Llama) -> None:
    prompt = "The capital of France is"
    first = llm(prompt, max_tokens=8, temperature=0)
    state = llm.save_state()
    assert isinstance(state, LlamaState)
    # the state holds what was evaluated: the prompt and the generated tokens (the last one sampled,
    # not evaluated, at most)
    n_prompt, n_generated = first["usage"]["prompt_tokens"], first["usage"]["completion_tokens"]
    assert n_prompt + n_generated - 1 <= state.n_tokens <= n_prompt + n_generated
    assert isinstance(state.llama_state, bytes) and len(state.llama_state) == state.llama_state_size > 0
    state = pickle.loads(pickle.dumps(state))  # what llama-cpp-python's caches do with it
    llm(PLANETS, max_tokens=4, temperature=0)
    llm.load_state(state)
    again = llm(prompt, max_tokens=8, temperature=0)
    assert again["choices"] == first["choices"]


def test_reset(llm: Llama) -> None:
    first = llm("The capital of France is", max_tokens=6, temperature=0)
    llm.reset()
    assert llm("The capital of France is", max_tokens=6, temperature=0)["choices"] == first["choices"]


def test_n_ctx_and_metadata(llm: Llama) -> None:
    assert llm.n_ctx() == 2048
    assert isinstance(llm.metadata, dict) and llm.metadata
    assert all(type(k) is str and type(v) is str for k, v in llm.metadata.items())
    assert "<|im_start|>" in llm.metadata["tokenizer.chat_template"]


# -- grammars, logits processors, stopping criteria ------------------------------------------

def test_grammar_from_string(llm: Llama) -> None:
    grammar = LlamaGrammar.from_string('root ::= "yes" | "no"', verbose=False)
    output = llm("Q: Is the sky blue? A: ", grammar=grammar, max_tokens=8)
    assert output["choices"][0]["text"] in ("yes", "no")


def test_grammar_from_json_schema(llm: Llama) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
              "required": ["city", "population"]}
    grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    response = llm.create_chat_completion(
        messages=[{"role": "user", "content": "Name a big city and its population, as JSON."}],
        grammar=grammar, temperature=0, max_tokens=48)
    value = _json(response)
    assert isinstance(value, dict) and isinstance(value["city"], str) and type(value["population"]) is int


def test_logits_processor(llm: Llama) -> None:
    forced = llm.tokenize(b" yes", add_bos=False)[0]
    seen: list[tuple[type, type, int]] = []

    def only_yes(input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        seen.append((type(input_ids), type(scores), len(scores)))
        out = np.full_like(scores, -np.inf)
        out[forced] = scores[forced]
        return out

    output = llm("Q: Is the sky blue? A:", max_tokens=3, logits_processor=LogitsProcessorList([only_yes]))
    assert output["choices"][0]["text"] == llm.detokenize([forced] * 3).decode()
    # called with numpy arrays, the scores a whole row of the vocabulary's
    assert seen and all(t[:2] == (np.ndarray, np.ndarray) and t[2] == seen[0][2] > forced for t in seen)


def test_stopping_criteria(llm: Llama) -> None:
    n_prompt = len(llm.tokenize(PLANETS.encode(), special=True))

    def after_three(input_ids: np.ndarray, logits: np.ndarray) -> bool:
        return len(input_ids) >= n_prompt + 3

    output = llm(PLANETS, max_tokens=16, temperature=0, stopping_criteria=StoppingCriteriaList([after_three]))
    assert output["usage"]["completion_tokens"] == 3
    assert output["choices"][0]["finish_reason"] == "stop"


# -- from_pretrained, against the stand-in hub -----------------------------------------------

REPO_ID = "llamact-test/SmolLM2-GGUF"
FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# huggingface_hub reads HF_ENDPOINT when imported: the example runs in a child interpreter
FROM_PRETRAINED = r"""
import json, sys
from llamact.compat import Llama
llm = Llama.from_pretrained(repo_id=sys.argv[1], filename=sys.argv[2], verbose=False)
print(json.dumps(llm("The capital of France is", max_tokens=6, temperature=0)))
"""


def test_from_pretrained(smollm2_path: Path, llm: Llama, tmp_path: Path) -> None:
    from fake_hub import serve

    with serve({(REPO_ID, FILENAME): smollm2_path}) as hub:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
        env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / "hf"), HF_HUB_DISABLE_TELEMETRY="1")
        proc = subprocess.run([sys.executable, "-c", FROM_PRETRAINED, REPO_ID, FILENAME], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert ("GET", f"/{REPO_ID}/resolve/main/{FILENAME}") in hub.requests
    output = json.loads(proc.stdout.splitlines()[-1])
    assert_shape(output, COMPLETION)
    assert output["model"].endswith(FILENAME)
    local = llm("The capital of France is", max_tokens=6, temperature=0)
    assert output["choices"] == local["choices"]
