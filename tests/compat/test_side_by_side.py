"""The same requests through llama-cpp-python (the peer, in its own venv: peer_runner.py) and through
llamact.compat.Llama, greedy, on SmolLM2 with its own chat template (the peer picks the GGUF's
``tokenizer.chat_template`` when chat_format is None and the template is none it knows by heart:
its ``chat_format`` is then "chat_template.default", checked below).

The peer is the oracle for values: equal text, finish reasons and token counts; a stream's chunks
equal key for key (the same keys at every level and the same value types; id, created and model
aside). Where llamact answers differently on purpose, the test says so and asserts llamact's answer.
When a greedy text differs, the message says where and what both engines' two best next tokens
were there (a near tie that two llama.cpp versions may break differently, or not).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from compat_peer import peer_version
from compat_shapes import key_tree

from llamact.compat import Llama

pytestmark = pytest.mark.model

LLAMA = {"n_ctx": 1024, "n_threads": 2}  # the same for both
PLANETS = "Q: Name the planets in the solar system? A: "
GREEDY = {"temperature": 0}

COMPLETIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "planets": (PLANETS, {"max_tokens": 32, "stop": ["Q:", "\n"], "echo": True, **GREEDY}),
    "france": ("The capital of France is", {"max_tokens": 20, **GREEDY}),
    "code": ("def fibonacci(n):", {"max_tokens": 24, **GREEDY}),
    # special-token text in a completion prompt is read as the special tokens, by both
    "chatml": ("<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", {"max_tokens": 16, **GREEDY}),
    # top_k=1 at the default temperature: the whole sampler chain, one candidate left
    "top_k": ("Once upon a time", {"max_tokens": 20, "top_k": 1}),
}
CHATS: dict[str, tuple[list[dict[str, str]], dict[str, Any]]] = {
    "france": ([{"role": "user", "content": "What is the capital of France?"}], {"max_tokens": 20, **GREEDY}),
    "system": ([{"role": "system", "content": "You are an assistant who perfectly describes images."},
                {"role": "user", "content": "Describe this image in detail please."}], {"max_tokens": 24, **GREEDY}),
    "turns": ([{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello! How can I help?"},
               {"role": "user", "content": "Name a color."}], {"max_tokens": 16, **GREEDY}),
    "penalty": ([{"role": "user", "content": "Count from one to ten."}],
                {"max_tokens": 24, "repeat_penalty": 1.3, **GREEDY}),
}
TOKENIZE_TEXTS = ["Hello, world!", " leading space", "<|im_start|>user\nhi<|im_end|>",
                  "<start_of_turn>user\nhi", "naïve café 🦙"]
USER_DETAIL = {"type": "function", "function": {"name": "UserDetail", "parameters": {
    "type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"]}}}
TOOL_MESSAGES = [{"role": "user", "content": "Extract Jason is 25 years old"}]
EMBED_INPUTS: list[Any] = ["Hello, world!", ["Hello, world!", "Goodbye, world!"]]


def _case(model: str, method: str, *args: Any, llama: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    return {"model": model, "llama": {**LLAMA, **(llama or {})}, "method": method, "args": list(args),
            "kwargs": kwargs}


def _cases() -> dict[str, dict[str, Any]]:
    """Every request, by name; "smollm2" / "gemma3" stand for the models' paths."""
    cases = {"info": _case("smollm2", "_info"), "n_ctx": _case("smollm2", "n_ctx"),
             "metadata": _case("smollm2", "_attr", "metadata")}
    for name, (prompt, kwargs) in COMPLETIONS.items():
        cases[f"completion/{name}"] = _case("smollm2", "create_completion", prompt, **kwargs)
    cases["completion-stream"] = _case("smollm2", "create_completion", PLANETS, max_tokens=20, stream=True, **GREEDY)
    for name, (messages, kwargs) in CHATS.items():
        cases[f"chat/{name}"] = _case("smollm2", "create_chat_completion", messages=messages, **kwargs)
    cases["chat-stream"] = _case("smollm2", "create_chat_completion", messages=CHATS["france"][0], max_tokens=20,
                                 stream=True, **GREEDY)
    forced = {"type": "function", "function": {"name": "UserDetail"}}
    cases["tool/forced"] = _case("smollm2", "create_chat_completion", messages=TOOL_MESSAGES, tools=[USER_DETAIL],
                                 tool_choice=forced, max_tokens=48, **GREEDY)
    cases["tool/forced-stream"] = _case("smollm2", "create_chat_completion", messages=TOOL_MESSAGES,
                                        tools=[USER_DETAIL], tool_choice=forced, max_tokens=48, stream=True, **GREEDY)
    for model in ("smollm2", "gemma3"):
        for text in TOKENIZE_TEXTS:
            for add_bos in (True, False):
                for special in (True, False):
                    cases[f"tokenize/{model}/{text!r}/{add_bos}/{special}"] = _case(
                        model, "tokenize", {"$bytes": text}, add_bos=add_bos, special=special)
    for i, given in enumerate(EMBED_INPUTS):
        cases[f"embedding/{i}"] = _case("smollm2", "create_embedding", given, llama={"embedding": True})
        cases[f"embed/{i}"] = _case("smollm2", "embed", given, llama={"embedding": True})
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def paths(smollm2_path: Path, gemma3_path: Path) -> dict[str, str]:
    return {"smollm2": str(smollm2_path), "gemma3": str(gemma3_path)}


@pytest.fixture(scope="module")
def peer_answers(peer: Any, paths: dict[str, str]) -> dict[str, Any]:
    """The peer's answer to every case, from one run."""
    cases = {name: {**case, "model": paths[case["model"]]} for name, case in CASES.items()}
    return dict(zip(cases, peer(list(cases.values())), strict=True))


@pytest.fixture(scope="module")
def llms(paths: dict[str, str]) -> dict[tuple[str, bool], Llama]:
    """llamact.compat's Llama for each model (and SmolLM2 with embedding=True), loaded once."""
    return {(name, embedding): Llama(model_path=path, verbose=False, embedding=embedding, **LLAMA)
            for name, path in paths.items() for embedding in (False, True) if name == "smollm2" or not embedding}


def _ours(llms: dict[tuple[str, bool], Llama], case: dict[str, Any]) -> Any:
    """llamact's answer to a case, as the peer's runner calls it."""
    llm = llms[(case["model"], bool(case["llama"].get("embedding")))]
    args = [a["$bytes"].encode() if isinstance(a, dict) else a for a in case["args"]]
    if case["method"] == "_attr":
        return getattr(llm, args[0])
    result = getattr(llm, case["method"])(*args, **case["kwargs"])
    return list(result) if case["kwargs"].get("stream") else result


def _peer(peer_answers: dict[str, Any], name: str) -> Any:
    answer = peer_answers[name]
    assert "ok" in answer, f"the peer failed on {name}: {answer['error']}"
    return answer["ok"]


def _without(result: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in keys}


# -- the peer and its setup ------------------------------------------------------------------

def test_peer_is_the_pinned_version_on_the_gguf_template(peer_answers: dict[str, Any]) -> None:
    info = _peer(peer_answers, "info")
    assert info["version"] == peer_version()
    # chat_format None: the GGUF's own template, not a guess (so both render the same template)
    assert info["chat_format"] == "chat_template.default"


def test_n_ctx_and_metadata(peer_answers: dict[str, Any], llms: dict[tuple[str, bool], Llama]) -> None:
    llm = llms[("smollm2", False)]
    assert llm.n_ctx() == _peer(peer_answers, "n_ctx")
    assert llm.metadata == _peer(peer_answers, "metadata")


# -- text completions ------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(COMPLETIONS))
def test_completion(name: str, peer_answers: dict[str, Any], llms: dict[tuple[str, bool], Llama],
                    peer: Any, paths: dict[str, str]) -> None:
    theirs = _peer(peer_answers, f"completion/{name}")
    ours = _ours(llms, CASES[f"completion/{name}"])
    assert key_tree(ours) == key_tree(theirs)
    prompt, kwargs = COMPLETIONS[name]
    _same_text(ours["choices"][0]["text"], theirs["choices"][0]["text"], llms, peer, paths,
               prompt_text=prompt, chat=None, echo=bool(kwargs.get("echo")))
    assert _without(ours, "id", "created") == _without(theirs, "id", "created")


def test_completion_stream(peer_answers: dict[str, Any], llms: dict[tuple[str, bool], Llama]) -> None:
    theirs = _peer(peer_answers, "completion-stream")
    ours = _ours(llms, CASES["completion-stream"])
    _same_stream(ours, theirs, lambda chunk: chunk["choices"][0]["text"])


# -- chat completions ------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(CHATS))
def test_chat_completion(name: str, peer_answers: dict[str, Any], llms: dict[tuple[str, bool], Llama],
                         peer: Any, paths: dict[str, str]) -> None:
    theirs = _peer(peer_answers, f"chat/{name}")
    ours = _ours(llms, CASES[f"chat/{name}"])
    assert key_tree(ours) == key_tree(theirs)
    _same_text(ours["choices"][0]["message"]["content"], theirs["choices"][0]["message"]["content"], llms, peer,
               paths, prompt_text=None, chat=CHATS[name][0], echo=False)
    assert _without(ours, "id", "created") == _without(theirs, "id", "created")


def test_chat_completion_stream(peer_answers: dict[str, Any], llms: dict[tuple[str, bool], Llama]) -> None:
    theirs = _peer(peer_answers, "chat-stream")
    ours = _ours(llms, CASES["chat-stream"])
    _same_stream(ours, theirs, lambda chunk: chunk["choices"][0]["delta"].get("content") or "")


def test_forced_tool_call(peer_answers: dict[str, Any], llms: dict[tuple[str, bool], Llama]) -> None:
    """Both constrain the reply to the tool's parameters and return it as the call."""
    theirs = _peer(peer_answers, "tool/forced")
    ours = _ours(llms, CASES["tool/forced"])
    assert key_tree(_without(ours, "usage")) == key_tree(_without(theirs, "usage"))
    for result in (ours, theirs):
        choice = result["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        (call,) = choice["message"]["tool_calls"]
        assert call["function"]["name"] == "UserDetail" and choice["message"]["function_call"] == call["function"]
        assert set(json.loads(call["function"]["arguments"])) == {"name", "age"}
    assert ours["choices"][0]["message"]["tool_calls"][0]["id"].startswith("call__0_UserDetail_")


def test_forced_tool_call_stream(peer_answers: dict[str, Any], llms: dict[tuple[str, bool], Llama]) -> None:
    theirs = _peer(peer_answers, "tool/forced-stream")
    ours = _ours(llms, CASES["tool/forced-stream"])

    def arguments(chunks: list[dict[str, Any]]) -> str:
        return "".join(c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                       for c in chunks if c["choices"][0]["delta"].get("tool_calls"))

    assert [sorted(c["choices"][0]["delta"]) for c in ours] == [sorted(c["choices"][0]["delta"]) for c in theirs]
    assert ours[-1]["choices"][0]["finish_reason"] == theirs[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert set(json.loads(arguments(ours))) == set(json.loads(arguments(theirs))) == {"name", "age"}


# -- tokenizer and embeddings ----------------------------------------------------------------

@pytest.mark.parametrize("model", ["smollm2", "gemma3"])
def test_tokenize(model: str, peer_answers: dict[str, Any], llms: dict[tuple[str, bool], Llama]) -> None:
    differences = []
    for name, case in CASES.items():
        if name.startswith(f"tokenize/{model}/"):
            ours, theirs = _ours(llms, case), _peer(peer_answers, name)
            if ours != theirs:
                differences.append(f"{name}: llamact {ours}, llama-cpp-python {theirs}")
            assert llms[(model, False)].detokenize(ours) == llms[(model, False)].detokenize(theirs)
    assert not differences, "\n".join(differences)


@pytest.mark.parametrize("i", range(len(EMBED_INPUTS)))
def test_embedding(i: int, peer_answers: dict[str, Any], llms: dict[tuple[str, bool], Llama]) -> None:
    theirs = _peer(peer_answers, f"embedding/{i}")
    ours = _ours(llms, CASES[f"embedding/{i}"])
    # the same nesting and lengths (per token for a model that pools nothing, as SmolLM2), usage
    assert key_tree(ours) == key_tree(theirs)
    assert ours["usage"] == theirs["usage"]
    ours_embed, theirs_embed = _ours(llms, CASES[f"embed/{i}"]), _peer(peer_answers, f"embed/{i}")
    assert key_tree(ours_embed) == key_tree(theirs_embed)
    # the values agree as far as two llama.cpp versions' kernels may: each vector's direction
    for a, b in zip(np.asarray(ours_embed).reshape(-1, np.shape(ours_embed)[-1]),
                    np.asarray(theirs_embed).reshape(-1, np.shape(theirs_embed)[-1]), strict=True):
        assert float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))) > 0.999


# -- helpers: equal texts, with the reason when they are not; streams ------------------------

def _same_stream(ours: list[dict[str, Any]], theirs: list[dict[str, Any]], text: Any) -> None:
    """Chunk for chunk the same keys and value types; the same text, the same finish reasons."""
    assert "".join(map(text, ours)) == "".join(map(text, theirs))
    assert [c["choices"][0]["finish_reason"] for c in ours] == [c["choices"][0]["finish_reason"] for c in theirs]
    assert [key_tree(c) for c in ours] == [key_tree(c) for c in theirs]
    assert len({c["id"] for c in ours}) == 1


def _same_text(ours: str, theirs: str, llms: dict[tuple[str, bool], Llama], peer: Any, paths: dict[str, str], *,
               prompt_text: str | None, chat: list[dict[str, str]] | None, echo: bool) -> None:
    if ours == theirs:
        return
    common = 0
    while common < min(len(ours), len(theirs)) and ours[common] == theirs[common]:
        common += 1
    pytest.fail(f"greedy texts differ after {common} characters:\n  llamact:          {ours!r}\n"
                f"  llama-cpp-python: {theirs!r}\n"
                + _top2_where(ours[:common], llms, peer, paths, prompt_text, chat, echo))


def _top2_where(common: str, llms: dict[tuple[str, bool], Llama], peer: Any, paths: dict[str, str],
                prompt_text: str | None, chat: list[dict[str, str]] | None, echo: bool) -> str:
    """Both engines' two best next tokens (raw logits) after the common prefix: how close the choice
    was. The prefix is re-tokenized, so this is a diagnosis, not a proof."""
    llm = llms[("smollm2", False)]
    if chat is not None:
        prompt = llm.engine.chat_prompt(chat)
    else:
        assert prompt_text is not None
        prompt, common = prompt_text, common[len(prompt_text):] if echo else common
    tokens = llm.tokenize((prompt + common).encode(), special=True)
    llm.engine.complete(tokens, max_tokens=1, greedy=True, cache_prompt=False)
    row = llm.engine.logits()
    ours = [[int(i), float(row[i])] for i in np.argsort(row)[::-1][:2]]
    (answer,) = peer([{"model": paths["smollm2"], "llama": LLAMA, "method": "_top2", "args": [tokens]}])
    theirs = answer.get("ok", answer.get("error"))

    def show(top: Any) -> str:
        if not isinstance(top, list):
            return str(top)
        (a, la), (b, lb) = top
        return (f"{llm.detokenize([a])!r} {la:.4f}, {llm.detokenize([b])!r} {lb:.4f} "
                f"(margin {la - lb:.4f})")

    return f"  next after the common part:\n    llamact:          {show(ours)}\n    llama-cpp-python: {show(theirs)}"
