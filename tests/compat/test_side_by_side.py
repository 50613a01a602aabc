"""The same requests through llama-cpp-python (the peer, in its own venv: peer_runner.py) and through
llamact.compat.Llama, greedy, on SmolLM2 with its own chat template (the peer picks the GGUF's
``tokenizer.chat_template`` when chat_format is None and the template is none it knows by heart:
its ``chat_format`` is then "chat_template.default", checked below). Both sides reset before each
request, so that neither reuses an evaluated prefix the other does not.

The peer is the oracle for values: equal text, finish reasons and token counts; a stream's chunks
equal key for key (the same keys at every level and the same value types; id, created and model
aside). Where llamact answers differently on purpose, the test says so and asserts llamact's answer.

The peer's llama.cpp is not llamact's pin (ggml 0.25.3 against 0.25.1): the first token's logprobs
agree to 1e-4, later ones (single-token decodes) drift by up to ~0.25 on SmolLM2, so a greedy
choice between two near-equal tokens can go either way. Where the texts differ, each side's twin
request with top-2 logprobs says where and by how much: the test passes only if the texts agree up
to a token where the two candidates' logprob margins, the one each library preferred, add up to
less than NEAR_TIE, and it warns with the numbers (the report of every run shows them).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from compat_peer import peer_version
from compat_shapes import key_tree

from llamact.compat import Llama
from llamact.parity.server_cases import ONE_TOOL, WEATHER_CALLS

pytestmark = pytest.mark.model

LLAMA = {"n_ctx": 1024, "n_threads": 2}  # the same for both
PLANETS = "Q: Name the planets in the solar system? A: "
GREEDY = {"temperature": 0}
# the largest sum of the two margins (logprobs) a greedy divergence may have (see the docstring)
NEAR_TIE = 0.5

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
HERMES = "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"  # a template of the vendored tree (models/templates)
SMALL_TALK = [{"role": "user", "content": "Hi! How are you?"}]  # nothing that calls for a tool
STREAMED = ("france", "turns")  # the completion and the chat streamed
EMBED_TEXTS = ["Hello, world!", "Goodbye, world!"]
EMBED_INPUTS: list[Any] = [EMBED_TEXTS[0], EMBED_TEXTS]


def _case(model: str, method: str, *args: Any, llama: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    return {"model": model, "llama": {**LLAMA, **(llama or {})}, "method": method, "args": list(args),
            "kwargs": kwargs}


def _cases() -> dict[str, dict[str, Any]]:
    """Every request, by name; "smollm2" / "gemma3" stand for the models' paths."""
    cases = {"info": _case("smollm2", "_info"), "n_ctx": _case("smollm2", "n_ctx"),
             "metadata": _case("smollm2", "_attr", "metadata")}
    for name, (prompt, kwargs) in COMPLETIONS.items():
        cases[f"completion/{name}"] = _case("smollm2", "create_completion", prompt, **kwargs)
        # the twin with logprobs (the peer needs logits_all for them); without echo, which llamact
        # refuses with logprobs (it has no logprobs for the prompt's own tokens)
        twin = {k: v for k, v in kwargs.items() if k != "echo"}
        cases[f"completion/{name}/logprobs"] = _case("smollm2", "create_completion", prompt, logprobs=2, **twin,
                                                     llama={"logits_all": True})
    # the streams repeat a plain request (each side's stream must say what its plain answer said)
    cases["completion-stream"] = _case("smollm2", "create_completion", COMPLETIONS[STREAMED[0]][0],
                                       **COMPLETIONS[STREAMED[0]][1], stream=True)
    for name, (messages, kwargs) in CHATS.items():
        cases[f"chat/{name}"] = _case("smollm2", "create_chat_completion", messages=messages, **kwargs)
        cases[f"chat/{name}/logprobs"] = _case("smollm2", "create_chat_completion", messages=messages, logprobs=True,
                                               top_logprobs=2, **kwargs, llama={"logits_all": True})
    cases["chat-stream"] = _case("smollm2", "create_chat_completion", messages=CHATS[STREAMED[1]][0],
                                 **CHATS[STREAMED[1]][1], stream=True)
    forced = {"type": "function", "function": {"name": "UserDetail"}}
    cases["tool/forced"] = _case("smollm2", "create_chat_completion", messages=TOOL_MESSAGES, tools=[USER_DETAIL],
                                 tool_choice=forced, max_tokens=48, **GREEDY)
    cases["tool/forced-stream"] = _case("smollm2", "create_chat_completion", messages=TOOL_MESSAGES,
                                        tools=[USER_DETAIL], tool_choice=forced, max_tokens=48, stream=True, **GREEDY)
    # a template with a tool-call format (SmolLM2 calls tools through Hermes 3's, greedy), flash
    # attention on for both: with it off, llamact's logits put "<tool_response>" a near tie ahead
    hermes = {"chat_template_file": HERMES, "flash_attn": True}
    cases["tool/auto-hermes"] = _case("smollm2", "create_chat_completion", messages=WEATHER_CALLS, tools=ONE_TOOL,
                                      tool_choice="auto", max_tokens=40, **GREEDY, llama=hermes)
    cases["tool/required-hermes"] = _case("smollm2", "create_chat_completion", messages=SMALL_TALK, tools=ONE_TOOL,
                                          tool_choice="required", max_tokens=40, **GREEDY, llama=hermes)
    for model in ("smollm2", "gemma3"):
        for text in TOKENIZE_TEXTS:
            for add_bos in (True, False):
                for special in (True, False):
                    cases[f"tokenize/{model}/{text!r}/{add_bos}/{special}"] = _case(
                        model, "tokenize", {"$bytes": text}, add_bos=add_bos, special=special)
    for i, given in enumerate(EMBED_INPUTS):
        cases[f"embedding/{i}"] = _case("smollm2", "create_embedding", given, llama={"embedding": True})
        cases[f"embed/{i}"] = _case("smollm2", "embed", given, llama={"embedding": True})
    for j, text in enumerate(EMBED_TEXTS):
        cases[f"embed-alone/{j}"] = _case("smollm2", "embed", text, llama={"embedding": True})
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def paths(smollm2_path: Path, gemma3_path: Path) -> dict[str, str]:
    return {"smollm2": str(smollm2_path), "gemma3": str(gemma3_path)}


@pytest.fixture(scope="module")
def hermes_template(repo_root: Path) -> Path:
    path = repo_root / "vendor" / "llama.cpp" / "models" / "templates" / f"{HERMES}.jinja"
    if not path.is_file():
        pytest.fail(f"{path} is missing: run scripts/vendor_llama_cpp.py")
    return path


@pytest.fixture(scope="module")
def peer_answers(peer: Any, paths: dict[str, str], hermes_template: Path) -> dict[str, Any]:
    """The peer's answer to every case, from one run."""
    def located(llama: dict[str, Any]) -> dict[str, Any]:
        return {**llama, "chat_template_file": str(hermes_template)} if "chat_template_file" in llama else llama

    cases = {name: {**case, "model": paths[case["model"]], "llama": located(case["llama"])}
             for name, case in CASES.items()}
    return dict(zip(cases, peer(list(cases.values())), strict=True))


@pytest.fixture(scope="module")
def llms(paths: dict[str, str], hermes_template: Path) -> dict[tuple[str, bool], Llama]:
    """llamact.compat's Llama for each model (and SmolLM2 with embedding=True, and with Hermes 3's
    template: llamact takes the Jinja source as chat_template), loaded once."""
    llms = {(name, embedding): Llama(model_path=path, verbose=False, embedding=embedding, **LLAMA)
            for name, path in paths.items() for embedding in (False, True) if name == "smollm2" or not embedding}
    llms[("hermes", False)] = Llama(model_path=paths["smollm2"], verbose=False, flash_attn=True,
                                    chat_template=hermes_template.read_text(), **LLAMA)
    return llms


def _ours(llms: dict[tuple[str, bool], Llama], case: dict[str, Any]) -> Any:
    """llamact's answer to a case, as the peer's runner calls it."""
    # logits_all: llamact gives logprobs without it (one Llama serves both)
    model = "hermes" if "chat_template_file" in case["llama"] else case["model"]
    llm = llms[(model, bool(case["llama"].get("embedding")))]
    args = [a["$bytes"].encode() if isinstance(a, dict) else a for a in case["args"]]
    if case["method"] == "_attr":
        return getattr(llm, args[0])
    llm.reset()  # as the peer's runner does
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
def test_completion(name: str, peer_answers: dict[str, Any], llms: dict[tuple[str, bool], Llama]) -> None:
    theirs = _peer(peer_answers, f"completion/{name}")
    ours = _ours(llms, CASES[f"completion/{name}"])
    assert key_tree(_texts_aside(ours)) == key_tree(_texts_aside(theirs))
    assert ours["usage"]["prompt_tokens"] == theirs["usage"]["prompt_tokens"]
    twins = _ours(llms, CASES[f"completion/{name}/logprobs"]), _peer(peer_answers, f"completion/{name}/logprobs")
    if _same_text(ours, theirs, lambda r: r["choices"][0]["text"], _completion_tokens, *twins):
        assert _without(ours, "id", "created") == _without(theirs, "id", "created")


def test_completion_stream(peer_answers: dict[str, Any], llms: dict[tuple[str, bool], Llama]) -> None:
    theirs = _peer(peer_answers, "completion-stream")
    ours = _ours(llms, CASES["completion-stream"])
    plain = _ours(llms, CASES[f"completion/{STREAMED[0]}"]), _peer(peer_answers, f"completion/{STREAMED[0]}")
    _same_stream(ours, theirs, lambda chunk: chunk["choices"][0]["text"], [r["choices"][0]["text"] for r in plain])


# -- chat completions ------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(CHATS))
def test_chat_completion(name: str, peer_answers: dict[str, Any], llms: dict[tuple[str, bool], Llama]) -> None:
    theirs = _peer(peer_answers, f"chat/{name}")
    ours = _ours(llms, CASES[f"chat/{name}"])
    assert key_tree(_texts_aside(ours)) == key_tree(_texts_aside(theirs))
    assert ours["usage"]["prompt_tokens"] == theirs["usage"]["prompt_tokens"]  # the same prompt
    twins = _ours(llms, CASES[f"chat/{name}/logprobs"]), _peer(peer_answers, f"chat/{name}/logprobs")
    if _same_text(ours, theirs, lambda r: r["choices"][0]["message"]["content"], _chat_tokens, *twins):
        assert _without(ours, "id", "created") == _without(theirs, "id", "created")


def test_chat_completion_stream(peer_answers: dict[str, Any], llms: dict[tuple[str, bool], Llama]) -> None:
    theirs = _peer(peer_answers, "chat-stream")
    ours = _ours(llms, CASES["chat-stream"])
    plain = _ours(llms, CASES[f"chat/{STREAMED[1]}"]), _peer(peer_answers, f"chat/{STREAMED[1]}")
    _same_stream(ours, theirs, lambda chunk: chunk["choices"][0]["delta"].get("content") or "",
                 [r["choices"][0]["message"]["content"] for r in plain])


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

    # The opening chunk, the calls' chunks and the closing one have the same delta keys as the
    # peer's (not chunk for chunk: the peer sends one per token, some with "" arguments, llamact one
    # per piece of text). The peer spells out the keys it leaves empty, as None.
    def keys(chunks: list[dict[str, Any]]) -> tuple[Any, ...]:
        deltas = [sorted(c["choices"][0]["delta"]) for c in chunks]
        return deltas[0], sorted({tuple(d) for d in deltas[1:-1]}), deltas[-1]

    assert keys(ours) == keys(theirs)
    assert ours[-1]["choices"][0]["finish_reason"] == theirs[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert set(json.loads(arguments(ours))) == set(json.loads(arguments(theirs))) == {"name", "age"}


def test_tool_call_parsed_where_the_peer_returns_text(peer_answers: dict[str, Any],
                                                     llms: dict[tuple[str, bool], Llama]) -> None:
    """llamact's improvement: a tool call the model makes is parsed into tool_calls. The peer's
    handler for a GGUF (or Jinja) template returns it as text: its text says what the call was."""
    theirs = _peer(peer_answers, "tool/auto-hermes")["choices"][0]
    ours = _ours(llms, CASES["tool/auto-hermes"])["choices"][0]
    assert "tool_calls" not in theirs["message"] and theirs["finish_reason"] == "stop"
    said = theirs["message"]["content"].strip()
    assert said.startswith("<tool_call>") and said.endswith("</tool_call>"), said
    call = json.loads(said.removeprefix("<tool_call>").removesuffix("</tool_call>"))
    assert ours["finish_reason"] == "tool_calls" and not ours["message"]["content"]
    (parsed,) = ours["message"]["tool_calls"]
    assert parsed["function"]["name"] == call["name"]
    assert json.loads(parsed["function"]["arguments"]) == call["arguments"]


def test_required_tool_choice_is_the_engines(peer_answers: dict[str, Any], llms: dict[tuple[str, bool], Llama]) -> None:
    """tool_choice="required": the peer honours only a named choice (its reply is free, here small
    talk). llamact's is the engine's: by deviation 19 the grammar is upstream's with its content taken
    out (``root ::= ... tool-call (space tool-call)*``), so the model must open with the call; within 40
    tokens it writes one and begins a second, the budget runs out ("length"), and a cut-short reply
    carries no call (deviation 5), in the shim as in the engine."""
    theirs = _peer(peer_answers, "tool/required-hermes")["choices"][0]
    assert "tool_calls" not in theirs["message"] and theirs["message"]["content"]
    case = CASES["tool/required-hermes"]
    ours = _ours(llms, case)["choices"][0]
    llm = llms[("hermes", False)]
    llm.reset()
    engine = llm.engine.complete_chat(case["kwargs"]["messages"], tools=case["kwargs"]["tools"], tool_choice="required",
                                      max_tokens=case["kwargs"]["max_tokens"], temperature=0, repeat_penalty=1.0)
    assert engine.text.startswith("<tool_call>"), engine.text
    assert (ours["message"]["content"], ours["finish_reason"]) == (engine.content, engine.finish_reason)
    assert "tool_calls" not in ours["message"] and not engine.tool_calls
    grammar = llm.engine.chat_template(case["kwargs"]["messages"], tools=case["kwargs"]["tools"],
                                       tool_choice="required").grammar
    assert grammar is not None and next(line for line in grammar.splitlines()
                                        if line.startswith("root ::=")).endswith("tool-calls")


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
    ours_embed = _ours(llms, CASES[f"embed/{i}"])
    assert key_tree(ours_embed) == key_tree(_peer(peer_answers, f"embed/{i}"))
    # The values, against the peer's embedding of each text alone: llama-cpp-python 0.3.36 reads a
    # batch's per-token rows at a wrong offset after the first text (pos += n_tokens, not
    # n_tokens * n_embd), so its second text's rows are the first text's, shifted. They agree as
    # far as two llama.cpp versions' kernels may: each vector's direction.
    alone = [_peer(peer_answers, f"embed-alone/{j}") for j in range(len(EMBED_TEXTS))]
    expected = alone[0] if i == 0 else alone
    for a, b in zip(_vectors(ours_embed), _vectors(expected), strict=True):
        assert float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))) > 0.999


def _vectors(embedding: Any) -> list[np.ndarray]:
    """Every vector of an embed() result (a vector, vectors per text, or per token per text)."""
    array = np.asarray(embedding, dtype=object if isinstance(embedding[0], list) and
                       isinstance(embedding[0][0], list) else float)
    if array.dtype == object:  # per text, a matrix of per-token rows (lengths differ)
        return [np.asarray(row, dtype=float) for matrix in embedding for row in matrix]
    return list(array.reshape(-1, array.shape[-1]))


# -- helpers: equal texts, with the reason when they are not; streams ------------------------

def _same_stream(ours: list[dict[str, Any]], theirs: list[dict[str, Any]], text: Any, plain: list[str]) -> None:
    """Each side's stream says what its plain answer to the same request said (``plain``: llamact's,
    the peer's); then chunk for chunk the same keys and value types, and the same finish reasons."""
    assert ["".join(map(text, ours)), "".join(map(text, theirs))] == plain
    assert plain[0] == plain[1], "streamed a request whose plain answers differ: pick one they agree on"
    assert [c["choices"][0]["finish_reason"] for c in ours] == [c["choices"][0]["finish_reason"] for c in theirs]
    assert [key_tree(c) for c in ours] == [key_tree(c) for c in theirs]
    assert len({c["id"] for c in ours}) == 1


def _texts_aside(value: Any) -> Any:
    """``value`` with every text (a str under "text" or "content") emptied: the structure two
    results share even when a near tie made their texts differ."""
    if isinstance(value, dict):
        return {k: "" if k in ("text", "content") and isinstance(v, str) else _texts_aside(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_texts_aside(v) for v in value]
    return value


def _completion_tokens(result: dict[str, Any]) -> list[tuple[str, dict[str, float]]]:
    logprobs = result["choices"][0]["logprobs"]
    return list(zip(logprobs["tokens"], logprobs["top_logprobs"], strict=True))


def _chat_tokens(result: dict[str, Any]) -> list[tuple[str, dict[str, float]]]:
    return [(entry["token"], {top["token"]: top["logprob"] for top in entry["top_logprobs"]})
            for entry in result["choices"][0]["logprobs"]["content"]]


def _same_text(ours: dict[str, Any], theirs: dict[str, Any], text: Any, tokens: Any,
               ours_lp: dict[str, Any], theirs_lp: dict[str, Any]) -> bool:
    """True when the texts are equal; else the divergence must be a near tie (see the docstring),
    warned about, and False."""
    # the twin requests (with logprobs, no echo) answer what the plain ones did
    assert text(ours).endswith(text(ours_lp)) and text(theirs).endswith(text(theirs_lp))
    if text(ours) == text(theirs):
        return True
    mine, peer = tokens(ours_lp), tokens(theirs_lp)
    i = next((i for i, (a, b) in enumerate(zip(mine, peer, strict=False)) if a[0] != b[0]), None)
    assert i is not None, f"the same tokens, different texts: {text(ours)!r} / {text(theirs)!r}"
    (a, our_top), (b, their_top) = mine[i], peer[i]
    # each library's margin for its own choice over the other's (absent from its top 2: not close)
    our_margin = our_top[a] - our_top.get(b, -np.inf)
    their_margin = their_top[b] - their_top.get(a, -np.inf)
    where = (f"greedy texts differ at generated token {i} (after {''.join(t for t, _ in mine[:i])!r}): llamact "
             f"{a!r} by {our_margin:.4f} over {b!r}, llama-cpp-python {b!r} by {their_margin:.4f}\n"
             f"  llamact:          {text(ours)!r}\n  llama-cpp-python: {text(theirs)!r}")
    assert our_margin + their_margin < NEAR_TIE, "not a near tie: " + where
    warnings.warn("near tie: " + where, stacklevel=2)
    return False
