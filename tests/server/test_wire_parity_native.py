"""Wire parity of the raw routes: llama-server's native ``/completion`` / ``/completions`` and
``/infill``, and OpenAI's ``/v1/completions`` with what the pin reads there (``logprobs`` as
``n_probs``, ``echo`` taken and ignored, several prompts). The same requests go to llama-server and
to ``llamact serve`` (greedy, one slot, one thread, the same context); the bodies and events must be
equal once ids, timestamps, fingerprints and timings are removed, logprob values within 2e-3.

Each request carries ``seed: 0``: the parity llama-server runs with ``--seed 0`` and ``llamact
serve`` with llama-server's default (random), and ``generation_settings`` echoes the seed.
``/infill`` needs FIM tokens, which neither bundled model has: a copy of SmolLM2 names three of its
unused control tokens as FIM prefix / suffix / middle (and ``<file_sep>`` as the separator), and
both servers load that copy.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_live import LiveServer
from test_wire_parity import RAINBOW, SAY_YES, assert_equal_but_logprob_values

from llamact.json_types import Json
from llamact.parity.llama_server import HOST, LlamaServer, ServerConfig, find_llama_server

pytestmark = [pytest.mark.parity, pytest.mark.model, pytest.mark.slow]

BASE: Json = {"temperature": 0, "cache_prompt": False, "seed": 0}
DROPPED = ("id", "created", "system_fingerprint", "timings")   # differ by nature between two runs


def normalized(value: Json) -> Json:
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items() if k not in DROPPED}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def post(port: int, path: str, body: Json, headers: dict[str, str] | None = None) -> tuple[int, Json]:
    conn = http.client.HTTPConnection(HOST, port, timeout=300)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json",
                                                                    **(headers or {})})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def stream(port: int, path: str, body: Json, headers: dict[str, str] | None = None) -> list[Json]:
    """Every ``data:`` line of a streamed answer, parsed (``null`` too), and "[DONE]" if it is sent."""
    conn = http.client.HTTPConnection(HOST, port, timeout=300)
    try:
        conn.request("POST", path, body=json.dumps({**body, "stream": True}),
                     headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        assert response.status == 200, (response.status, response.read()[:300])
        lines = response.read().decode("utf-8").split("\n")
    finally:
        conn.close()
    return [line[6:] if line == "data: [DONE]" else normalized(json.loads(line[6:], parse_constant=_no_constant))
            for line in lines if line.startswith("data: ")]


def _no_constant(name: str) -> None:
    raise AssertionError(f"{name} is not JSON (a strict parser refuses it)")


def both_ways_equal(path: str, body: Json, ref: LlamaServer | LiveServer, ours: LiveServer) -> tuple[Json, list[Json]]:
    """The body streamed and not: llamact's equal to llama-server's; returns llama-server's."""
    body = {**BASE, **body}
    expected = stream(ref.port, path, body)
    assert_equal_but_logprob_values(stream(ours.port, path, body, ours.headers()), expected)
    status, whole = post(ref.port, path, body)
    got_status, got = post(ours.port, path, body, ours.headers())
    assert (got_status, status) == (200, 200), (got, whole)
    assert_equal_but_logprob_values(normalized(got), normalized(whole))
    return whole, expected


@pytest.fixture(scope="module")
def upstream(smollm2_path: Path) -> Iterator[LlamaServer]:
    server = LlamaServer(ServerConfig(smollm2_path), find_llama_server())
    server.start()
    try:
        yield server
    finally:
        server.stop()


SYMBOLS = 'root ::= "\U0001d538\U0001d539 ok"'   # characters SmolLM2 spells in several byte tokens
NATIVE_REQUESTS: dict[str, tuple[str, Json]] = {
    "plain": ("/completion", {"prompt": "Once upon a time", "n_predict": 12}),
    "stop": ("/completions", {"prompt": RAINBOW, "n_predict": 24, "stop": [","]}),
    # the end token has an object of its own (its id, an entry); stop_type "eos"
    "end_token_n_probs": ("/completion", {"prompt": SAY_YES, "n_predict": 30, "n_probs": 2, "return_tokens": True}),
    # not streamed, the stop string's token count of entries is left out; stop_type "word"
    "stop_n_probs": ("/completion", {"prompt": RAINBOW, "n_predict": 24, "stop": [" light"], "n_probs": 2}),
    # no object for a token that ends inside a UTF-8 character, the completing one shows the character
    "split_characters": ("/completion", {"prompt": "Write a symbol:", "grammar": SYMBOLS, "n_predict": 10,
                                         "n_probs": 1, "return_tokens": True}),
    "json_schema": ("/completion", {"prompt": "A person as JSON:", "n_predict": 24, "json_schema": {
        "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}),
    "token_ids": ("/completion", {"prompt": [12092, 28, 957, 314], "n_predict": 6, "return_tokens": True}),
    # ids and text in one prompt: only a first string gets BOS (tokenize_mixed)
    "mixed_prompt": ("/completion", {"prompt": [1, "user\nHi", 2, "\n"], "n_predict": 6}),
    # several prompts: a list of results; streamed, upstream's empty start result `null` between them
    "several_prompts": ("/completions", {"prompt": ["Hi", [12092, 28], {"prompt_string": "Once upon"}],
                                         "n_predict": 4, "n_probs": 1}),
    "new_line": ("/completion", {"prompt": "List three fruits:\n1.", "n_predict": 12, "logit_bias": [[28, -2.5]],
                                 "stop": ["4."]}),
    # a ban's bias is -inf, which JSON cannot hold: nlohmann writes null (issue 46: a 500 not streamed,
    # "-Infinity" streamed)
    "ignore_eos": ("/completion", {"prompt": SAY_YES, "n_predict": 6, "ignore_eos": True}),
    "bias_false": ("/completion", {"prompt": RAINBOW, "n_predict": 6, "logit_bias": [[28, False], [11, 1.5]]}),
}


@pytest.mark.parametrize("name", sorted(NATIVE_REQUESTS))
def test_native_completion_equals_llama_server(name: str, upstream: LlamaServer, server: LiveServer) -> None:
    path, body = NATIVE_REQUESTS[name]
    whole, events = both_ways_equal(path, body, upstream, server)
    assert "[DONE]" not in events and len(events) >= 3   # the native stream has no [DONE]
    if name == "several_prompts":
        assert [r["index"] for r in whole] == [0, 1, 2] and events.count(None) == 2
    else:
        assert whole["stop"] is True and whole["generation_settings"]["seed"] == 0


V1_REQUESTS: dict[str, Json] = {
    "logprobs_int": {"prompt": RAINBOW, "max_tokens": 8, "logprobs": 2},   # read as n_probs
    "logprobs_true": {"prompt": SAY_YES, "max_tokens": 8, "logprobs": True},   # a boolean read as 1
    "echo": {"prompt": "Once upon a time", "max_tokens": 6, "echo": True},   # taken, ignored at the pin
    # the choices in prompt order; the usage, id and the rest are the first prompt's
    "several_prompts": {"prompt": ["Hi", "Once upon a time", [12092, 28]], "max_tokens": 4},
}


@pytest.mark.parametrize("name", sorted(V1_REQUESTS))
def test_v1_completions_equal_llama_server(name: str, upstream: LlamaServer, server: LiveServer) -> None:
    whole, events = both_ways_equal("/v1/completions", V1_REQUESTS[name], upstream, server)
    assert events[-1] == "[DONE]"
    if name.startswith("logprobs"):
        entries = whole["choices"][0]["logprobs"]["content"]
        assert len(entries[0]["top_logprobs"]) == (2 if name == "logprobs_int" else 1)


# (route, body, message is upstream's): status, error type and -- where llamact writes upstream's own
# text -- the message are equal; a message llamact words itself starts from upstream's where it can
ERRORS: dict[str, tuple[str, Json, bool]] = {
    "no_prompt": ("/completion", {"n_predict": 2}, False),   # upstream: a JSON library's "key 'prompt' not found"
    "empty_list": ("/completion", {"prompt": []}, True),
    "bad_element": ("/completions", {"prompt": [{"text": "x"}]}, True),
    "bad_type": ("/completion", {"prompt": 5}, True),
    "invalid_token": ("/completion", {"prompt": [10**7]}, False),   # llamact adds the vocabulary's range
    "bad_flag": ("/completion", {"prompt": "Hi", "return_tokens": "yes"}, False),
    "n_predict_below_limit": ("/completion", {"prompt": "Hi", "n_predict": -5}, True),
    "v1_invalid_token": ("/v1/completions", {"prompt": ["Hi", [10**7]]}, False),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_refusals_equal_llama_server(name: str, upstream: LlamaServer, server: LiveServer) -> None:
    path, body, same_text = ERRORS[name]
    status, expected = post(upstream.port, path, {**BASE, **body})
    got_status, got = post(server.port, path, {**BASE, **body}, server.headers())
    assert (got_status, got["error"]["type"]) == (status, expected["error"]["type"]) == (400, "invalid_request_error")
    if same_text:
        assert got["error"]["message"] == expected["error"]["message"]
    elif name.endswith("invalid_token"):
        assert got["error"]["message"].startswith(expected["error"]["message"])


def test_a_later_prompt_refused_ends_the_stream_with_an_error_event(upstream: LlamaServer, server: LiveServer) -> None:
    """Upstream checks a prompt's ids when its slot starts: the first prompt's events, then an error
    event (no ``null`` start event for the refused one), and no [DONE]."""
    body = {**BASE, "prompt": ["Hi", [10**7]], "n_predict": 2}
    expected, got = stream(upstream.port, "/completion", body), stream(server.port, "/completion", body,
                                                                       server.headers())
    assert [e for e in got[:-1]] == expected[:-1] and None not in expected
    assert got[-1]["error"]["type"] == expected[-1]["error"]["type"] == "invalid_request_error"
    assert got[-1]["error"]["message"].startswith(expected[-1]["error"]["message"])


def test_infill_without_fim_tokens_is_refused_as_llama_server(upstream: LlamaServer, server: LiveServer) -> None:
    body = {"input_prefix": "def add(a, b):\n", "input_suffix": "\n"}
    assert post(server.port, "/infill", body, server.headers()) == post(upstream.port, "/infill", body)
    status, answer = post(upstream.port, "/infill", body)
    assert status == 501 and answer["error"]["type"] == "not_supported_error"


# -- deliberate deviations ---------------------------------------------------------------------------


@pytest.mark.parametrize("body", [{"prompt": "Hi", "n_probs": 21}, {"prompt": ""}, {"prompt": "Hi", "n_predict": 0}],
                         ids=["n_probs_above_20", "empty_prompt", "n_predict_0"])
def test_where_llamact_answers_otherwise(body: Json, upstream: LlamaServer, server: LiveServer) -> None:
    """llama-server answers 21 alternatives, an empty prompt with an empty result (``stop_type``
    "none", ``tokens_cached`` whatever the slot held) and ``n_predict: 0`` with one token (its limit
    is checked after a token); llamact refuses the first two (400) and generates none for the third,
    as upstream documents ``n_predict: 0``."""
    status, expected = post(upstream.port, "/completion", {**BASE, **body})
    got_status, got = post(server.port, "/completion", {**BASE, **body}, server.headers())
    assert status == 200
    if body.get("n_predict") == 0:
        assert got_status == 200 and expected["tokens_predicted"] == 1 and got["tokens_predicted"] == 0
        assert got["content"] == "" and got["stop_type"] == "limit"
    else:
        assert got_status == 400 and got["error"]["type"] == "invalid_request_error"


# -- /infill on a model with FIM tokens --------------------------------------------------------------

# <gh_stars>, <issue_start>, <issue_comment>, <file_sep>
FIM_IDS = {"fim_pre": 7, "fim_suf": 8, "fim_mid": 9, "fim_sep": 5}


@pytest.fixture(scope="module")
def fim_model(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2 with FIM tokens named in its metadata (its weights and vocabulary unchanged)."""
    import gguf
    from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

    out = tmp_path_factory.mktemp("fim") / "smollm2-fim.gguf"
    reader = gguf.GGUFReader(smollm2_path, "r")
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(out, arch=arch, endianess=reader.endianess)
    new = {f"tokenizer.ggml.{name}_token_id": MetadataDetails(gguf.GGUFValueType.UINT32, token)
           for name, token in FIM_IDS.items()}
    copy_with_new_metadata(reader, writer, new, [])   # writes the tensors and closes the file too
    return out


@pytest.fixture(scope="module")
def fim_servers(fim_model: Path) -> Iterator[tuple[LlamaServer, LiveServer]]:
    ref = LlamaServer(ServerConfig(fim_model), find_llama_server())
    ref.start()
    try:
        with LiveServer("--model", str(fim_model), "--threads", "1", "--ctx-size", "4096") as ours:
            yield ref, ours
    finally:
        ref.stop()


INFILL_REQUESTS: dict[str, Json] = {
    "prefix_suffix": {"input_prefix": "def add(a, b):\n    return ", "input_suffix": "\n\nprint(add(1, 2))\n",
                      "n_predict": 8},
    "extra_and_prompt": {"input_prefix": "x = ", "input_suffix": "\n", "prompt": "sum(",
                         "input_extra": [{"filename": "util.py", "text": "def total(xs):\n    return sum(xs)\n"},
                                         {"text": "# no name: upstream's tmp\n"}],
                         "n_predict": 6, "n_probs": 1},
}


@pytest.mark.parametrize("name", sorted(INFILL_REQUESTS))
def test_infill_equals_llama_server(name: str, fim_servers: tuple[LlamaServer, LiveServer]) -> None:
    """The FIM prompt as format_prompt_infill makes it (the ``prompt`` field shows it whole), then
    the native answer."""
    ref, ours = fim_servers
    whole, _ = both_ways_equal("/infill", INFILL_REQUESTS[name], ref, ours)
    assert whole["prompt"].endswith("<issue_comment>") and "<gh_stars>" in whole["prompt"]
    if name == "extra_and_prompt":
        assert "<file_sep>util.py\n" in whole["prompt"] and "<file_sep>tmp\n" in whole["prompt"]


INFILL_ERRORS: dict[str, Json] = {
    "extra_not_list": {"input_prefix": "a", "input_suffix": "b", "input_extra": "x"},
    "chunk_without_text": {"input_prefix": "a", "input_suffix": "b", "input_extra": [{"filename": "f"}]},
    "chunk_filename_not_string": {"input_prefix": "a", "input_suffix": "b",
                                  "input_extra": [{"text": "t", "filename": 1}]},
}


@pytest.mark.parametrize("name", sorted(INFILL_ERRORS))
def test_infill_refusals_equal_llama_server(name: str, fim_servers: tuple[LlamaServer, LiveServer]) -> None:
    ref, ours = fim_servers
    body = {**BASE, **INFILL_ERRORS[name]}
    status, expected = post(ref.port, "/infill", body)
    got_status, got = post(ours.port, "/infill", body)
    assert (got_status, got) == (status, expected) and status == 400


@pytest.mark.parametrize("body, status, message", [
    ({"input_suffix": "b"}, 500, '"input_prefix" is required'),
    ({"input_prefix": "a", "input_suffix": "b", "prompt": 5, "n_predict": 2}, 200, '"prompt" must be a string'),
], ids=["no_prefix", "prompt_not_string"])
def test_infill_bodies_llama_server_notes_but_does_not_refuse_are_a_400(
        body: Json, status: int, message: str, fim_servers: tuple[LlamaServer, LiveServer]) -> None:
    """A deliberate difference (deviation 12's kind): upstream notes the bad field and goes on -- without
    ``input_prefix`` its JSON library's exception makes the answer 500, a ``prompt`` that is not a
    string is read as "" and answered 200; llamact answers 400 with upstream's own message."""
    ref, ours = fim_servers
    got_status, got = post(ours.port, "/infill", {**BASE, **body})
    ref_status, expected = post(ref.port, "/infill", {**BASE, **body})
    assert ref_status == status and (status == 200 or expected["error"]["type"] == "server_error")
    assert (got_status, got["error"]["message"]) == (400, message)
