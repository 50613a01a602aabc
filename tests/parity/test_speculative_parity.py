"""Speculative decoding against llama-server at the pin, with the same settings, on SmolLM2.

llamact's n-gram sources are ports of upstream's, and its verification batches are llama-server's
(the pending token and the draft in one decode, every position's logits), so the same prompts give
the same tokens and the same ``draft_n`` / ``draft_n_accepted``: the drafts are the same drafts and
the logits the same logits. Each configuration runs two requests on one server (and one engine), so
the state sources keep between requests (ngram-mod's table, ngram-map's keys) is compared as well.
``llamact serve`` with ``--spec-default`` (ngram-mod) is compared as a whole: the completion, its
``generation_settings``, ``/slots``, ``/props`` and the ``spec_decode_*`` metrics.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from server_live import LiveServer

from llamact import GenerationParams, LlamaEngine, LlamaModelException, ModelParams
from llamact.engine.speculative.params import speculative_params
from llamact.parity.llama_server import LlamaServer, ServerConfig, find_llama_server

pytestmark = [pytest.mark.model, pytest.mark.parity]

N_PREDICT = 48
CODE = (Path(__file__).resolve().parents[2] / "llamact" / "engine" / "speculative" / "ngram_simple.py").read_text()


def prompts() -> list[str]:
    """Two requests: copy a code block (drafts from the prompt), then the same block with a change."""
    code = CODE[CODE.index("def ngram_simple_draft"):][:600]
    first = f"<|im_start|>user\nRepeat this code exactly:\n```python\n{code}\n```<|im_end|>\n<|im_start|>assistant\n"
    second = (f"<|im_start|>user\nRewrite this code with `ids` renamed to `tokens`:\n```python\n{code}\n```"
              "<|im_end|>\n<|im_start|>assistant\n")
    return [first, second]


def flags(options: dict[str, Any]) -> list[str]:
    """llama-server's command line for the options (the names ``llamact serve`` takes too)."""
    out: list[str] = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        out += [flag] if value is True else [flag, str(value)]
    return out


def server_answers(smollm2_path: Path, options: dict[str, Any]) -> list[Any]:
    with LlamaServer(ServerConfig(smollm2_path, extra_args=tuple(flags(options))), find_llama_server()) as server:
        return [server.post("/completion", {"prompt": prompt, "n_predict": N_PREDICT, "temperature": 0,
                                            "cache_prompt": False, "return_tokens": True})
                for prompt in prompts()]


CONFIGS = {
    "ngram-simple": {"spec_type": "ngram-simple"},
    "ngram-map-k": {"spec_type": "ngram-map-k", "spec_ngram_map_k_size_n": 4, "spec_ngram_map_k_size_m": 16},
    "ngram-map-k4v": {"spec_type": "ngram-map-k4v", "spec_ngram_map_k4v_size_n": 2,
                      "spec_ngram_map_k4v_size_m": 8},
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_engine_drafts_and_tokens_equal_llama_servers(smollm2_path: Path, name: str) -> None:
    options = CONFIGS[name]
    expected = server_answers(smollm2_path, options)
    # the harness's server: one thread, llama-server's batch sizes, the same context
    params = ModelParams(n_ctx=4096, n_batch=2048, n_ubatch=512, n_threads=1, adaptive_threads=False,
                         speculative=speculative_params(options))
    accepted = 0
    with LlamaEngine.load(smollm2_path, params) as engine:
        for prompt, answer in zip(prompts(), expected, strict=True):
            result = engine.complete(prompt, GenerationParams(greedy=True, max_tokens=N_PREDICT, cache_prompt=False))
            ours = {"tokens": result.tokens, "draft_n": result.timings.n_draft,
                    "draft_n_accepted": result.timings.n_draft_accepted}
            theirs = {"tokens": answer["tokens"][:len(result.tokens)], "draft_n": answer["timings"].get("draft_n", 0),
                      "draft_n_accepted": answer["timings"].get("draft_n_accepted", 0)}
            assert ours == theirs, f"{name}: llamact {ours} llama-server {theirs}"
            print(name, {k: v for k, v in ours.items() if k != "tokens"})
            accepted += ours["draft_n_accepted"]
    assert accepted > 0   # the configuration does speculate here


def metric(text: str, name: str) -> float:
    line = next(line for line in text.splitlines() if line.startswith(f"llamacpp:{name} "))
    return float(line.split()[1])


def test_serve_with_spec_default_answers_as_llama_server(smollm2_path: Path) -> None:
    # --spec-default's ngram-mod, its shortest draft lowered from 48 (flags apply in order, on both
    # servers) so that a 48-token answer drafts at all
    options = {"spec_default": True, "spec_ngram_mod_n_min": 16}
    args = ["--model", str(smollm2_path), "--threads", "1", "--ctx-size", "4096", *flags(options)]
    with LlamaServer(ServerConfig(smollm2_path, extra_args=(*flags(options), "--metrics")),
                     find_llama_server()) as upstream, LiveServer(*args) as ours:
        for prompt in prompts():
            body = {"prompt": prompt, "n_predict": N_PREDICT, "temperature": 0, "cache_prompt": False,
                    "return_tokens": True}
            theirs = upstream.post("/completion", body)
            status, raw = ours.request("POST", "/completion", json.dumps(body).encode())
            assert status == 200, raw
            mine = json.loads(raw)
            for key in ("tokens", "content", "stop_type"):
                assert mine[key] == theirs[key], key
            for key in ("draft_n", "draft_n_accepted", "predicted_n"):
                assert mine["timings"].get(key) == theirs["timings"].get(key), key
            assert mine["generation_settings"]["speculative.types"] == theirs["generation_settings"][
                "speculative.types"] == "none,ngram-mod"
        assert mine["timings"]["draft_n_accepted"] > 0
        ours_get = lambda path: ours.request("GET", path, None)[1]   # noqa: E731
        slots = [json.loads(ours_get("/slots")), json.loads(upstream.get("/slots")[1])]
        assert slots[0][0]["speculative"] is slots[1][0]["speculative"] is True
        assert slots[0][0]["params"]["speculative.types"] == slots[1][0]["params"]["speculative.types"]
        props = [json.loads(ours_get("/props")), json.loads(upstream.get("/props")[1])]
        assert props[0]["default_generation_settings"]["params"]["speculative.types"] == \
            props[1]["default_generation_settings"]["params"]["speculative.types"]
        texts = [ours_get("/metrics").decode(), upstream.get("/metrics")[1].decode()]
        for name in ("spec_decode_num_draft_tokens_total", "spec_decode_num_accepted_tokens_total",
                     "spec_decode_num_drafts_total"):
            assert metric(texts[0], name) == metric(texts[1], name) > 0, name
        per_pos = [[line for line in text.splitlines() if "accepted_tokens_per_pos_total{" in line] for text in texts]
        assert per_pos[0] == per_pos[1] and per_pos[0]


def test_draft_model_choices_against_llama_server(smollm2_path: Path, gemma3_path: Path) -> None:
    """Deviation 16: a draft of another vocabulary (Gemma 3 for SmolLM2) and a draft without a type.
    llama-server serves both without drafts (it logs the failed check; it keeps its types at "none");
    llamact refuses the first at load and drafts with the second."""
    prompt = prompts()[0]
    body = {"prompt": prompt, "n_predict": 8, "temperature": 0, "cache_prompt": False}
    for options in ({"spec_type": "draft-simple", "spec_draft_model": gemma3_path},
                    {"spec_draft_model": smollm2_path}):
        with LlamaServer(ServerConfig(smollm2_path, extra_args=tuple(flags(options))), find_llama_server()) as server:
            assert "draft_n" not in server.post("/completion", body)["timings"], options
    with pytest.raises(LlamaModelException, match="vocabulary"):
        LlamaEngine.load(smollm2_path, ModelParams(n_ctx=512, speculative=speculative_params(
            {"spec_type": "draft-simple", "spec_draft_model": gemma3_path})))
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=1024, n_threads=1, speculative=speculative_params(
            {"spec_draft_model": smollm2_path}))) as engine:
        assert engine.complete(prompt, GenerationParams(greedy=True, max_tokens=8)).timings.n_draft > 0
