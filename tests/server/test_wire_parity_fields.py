"""Wire parity for llama-server's field table (server-schema.cpp; ``llamact.server.wire.fields``): the same
bodies with odd, out-of-range and mistyped sampling fields go to llama-server at the pin and to
``llamact serve``, on the raw and the chat route. A refusal must be the same status and message;
an answer the same text and usage. Cases that sample (a seed, temperature 1) show that a clamped value
samples as the clamp (``top_p: 5`` as 1), and that ``samplers``, ``dry_sequence_breakers``,
``logit_bias`` text keys and ``ignore_eos`` change the answer as upstream's do."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_live import LiveServer

from llamact.json_types import Json
from llamact.parity.llama_server import HOST, LlamaServer, ServerConfig, find_llama_server

pytestmark = [pytest.mark.parity, pytest.mark.model, pytest.mark.slow]

# each body's own fields; the base gives a prompt (or messages), a few tokens and greedy decoding
CASES: dict[str, Json] = {
    # types (nlohmann's words), integers cut toward zero, 32-bit casts
    "temperature_string": {"temperature": "hot"},
    "max_tokens_string": {"max_tokens": "x"},
    "max_tokens_fraction": {"max_tokens": 2.5},
    "max_tokens_huge_float": {"max_tokens": 1e30},
    "top_k_fraction": {"top_k": 2.7},
    "seed_string": {"seed": "x"},
    "stream_string": {"stream": "yes"},
    "cache_prompt_number": {"cache_prompt": 1},
    "n_probs_string": {"n_probs": "3"},
    "n_keep_string": {"n_keep": "a"},
    "timings_per_token_string": {"timings_per_token": "x"},
    "return_tokens_string": {"return_tokens": "x"},
    "ignore_eos_string": {"ignore_eos": "x"},
    "null_means_default": {"top_p": None, "top_k": None, "stop": None},
    # hard limits refuse
    "repeat_last_n_negative": {"repeat_last_n": -5},
    "min_keep_negative": {"min_keep": -1},
    "n_two_on_one_slot": {"n": 2},
    "adaptive_decay_high": {"adaptive_decay": 1.5},
    # soft limits clamp, other odd values are ignored as upstream ignores them
    "top_p_above_one": {"top_p": 5},
    "top_k_negative": {"top_k": -3},
    "top_k_huge": {"top_k": 1e12},
    "mirostat_seven": {"mirostat": 7},
    "min_p_two": {"min_p": 2},
    "xtc_two": {"xtc_probability": 2},
    "dry_base_below_one": {"dry_base": 0.5},
    "seed_beyond_32_bits": {"seed": 2**40},
    "stop_a_number": {"stop": 5},
    "stop_with_a_number": {"stop": ["a", 5]},
    "logit_bias_a_string": {"logit_bias": "x"},
    "logit_bias_odd_entries": {"logit_bias": [[1, "x"], [2], "y", [999999, -5]]},
    "dry_breakers_empty": {"dry_sequence_breakers": []},
    "dry_breakers_with_a_number": {"dry_sequence_breakers": ["a", 1]},
    # sampled: the clamp, the order and the fields that change the distribution
    "sampled_clamped": {"temperature": 1.0, "seed": 7, "top_p": 5, "top_k": -3, "max_tokens": 12},
    "sampled_samplers_names": {"temperature": 1.5, "seed": 3, "top_k": 3, "samplers": ["temperature", "top_k"],
                               "max_tokens": 12},
    "sampled_samplers_chars": {"temperature": 1.5, "seed": 3, "top_k": 3, "samplers": "tk", "max_tokens": 12},
    "sampled_dry_breakers": {"temperature": 1.0, "seed": 5, "dry_multiplier": 0.8, "dry_sequence_breakers": ["o"],
                             "max_tokens": 16},
    "logit_bias_text_key": {"logit_bias": {" upon": -100, "Once": False}, "max_tokens": 8},
    "logit_bias_pair_text": {"logit_bias": [[" time", -100]], "max_tokens": 8},
    "ignore_eos": {"ignore_eos": True, "max_tokens": 6},
}
RAW_BASE: Json = {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0, "cache_prompt": False}
# a prompt the model ends at once: ignore_eos must carry on past its end token
SAY_YES = "<|im_start|>user\nSay only the word yes.<|im_end|>\n<|im_start|>assistant\n"
CHAT_CASES = ("temperature_string", "max_tokens_fraction", "n_two_on_one_slot", "stop_with_a_number",
              "top_p_above_one", "dry_breakers_empty", "ignore_eos")


@pytest.fixture(scope="module")
def upstream(smollm2_path: Path) -> Iterator[LlamaServer]:
    server = LlamaServer(ServerConfig(smollm2_path), find_llama_server())
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _post(port: int, path: str, body: Json, headers: dict[str, str]) -> tuple[int, Json]:
    conn = http.client.HTTPConnection(HOST, port, timeout=120)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json", **headers})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def _comparable(status: int, answer: Json) -> Json:
    """A refusal whole; an answer's text (or message), finish reason and token counts."""
    if status != 200:
        return status, answer
    choice = answer["choices"][0]
    text = choice["text"] if "text" in choice else choice["message"]
    usage = {k: answer["usage"][k] for k in ("completion_tokens", "prompt_tokens")}
    return status, text, choice["finish_reason"], usage


def _both(upstream: LlamaServer, server: LiveServer, path: str, body: Json) -> tuple[Json, Json]:
    auth = {k: v for k, v in server.headers().items() if k == "Authorization"}
    return (_comparable(*_post(upstream.port, path, body, {})),
            _comparable(*_post(server.port, path, body, auth)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_raw_fields_are_read_as_llama_server_reads_them(name: str, upstream: LlamaServer, server: LiveServer) -> None:
    body = {**RAW_BASE, **CASES[name]}
    if name == "ignore_eos":
        body["prompt"] = SAY_YES
    expected, got = _both(upstream, server, "/v1/completions", body)
    assert got == expected
    if name == "ignore_eos":
        assert expected[2] == "length"   # it went on past the end token


@pytest.mark.parametrize("name", CHAT_CASES)
def test_chat_fields_are_read_as_llama_server_reads_them(name: str, upstream: LlamaServer, server: LiveServer) -> None:
    body = {"messages": [{"role": "user", "content": "Say only the word yes."}], "max_tokens": 4, "temperature": 0,
            "cache_prompt": False, **CASES[name]}
    expected, got = _both(upstream, server, "/v1/chat/completions", body)
    assert got == expected


def test_the_cases_cover_refusals_and_answers(upstream: LlamaServer) -> None:
    statuses = {_post(upstream.port, "/v1/completions", {**RAW_BASE, **CASES[n]}, {})[0] for n in CASES}
    assert statuses == {200, 400}


@pytest.mark.parametrize("stop", ["", ["", "\n"]], ids=["string", "in_a_list"])
def test_an_empty_stop_string_is_no_stop_string(stop: Json, upstream: LlamaServer, server: LiveServer) -> None:
    """Deviation 13 (docs/design.md): llama-server keeps an empty stop string, which matches at once, and
    answers one token's worth of nothing; llamact drops it, as its engine does, and answers as without it."""
    expected, got = _both(upstream, server, "/v1/completions", {**RAW_BASE, "stop": stop})
    assert expected[1:3] == ("", "stop") and expected[3]["completion_tokens"] == 1
    plain, _ = _both(upstream, server, "/v1/completions", RAW_BASE)
    assert got == plain and plain[1] != ""
