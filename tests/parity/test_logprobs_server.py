"""logprobs / top_logprobs equal to llama-server's for the same greedy chat request.

Both take the softmax of the raw logits (before the sampler chain) with float32 arithmetic, the
normalizer a float32 running sum over the vocabulary. llama-server sums in the order its
partial_sort leaves the tokens, llamact in token order; float32 rounding then makes the two
normalizers differ by up to ~5e-5 (SmolLM2) and ~4e-4 (Gemma 3's 262144 tokens) in log, the same
offset for every entry of one token. Hence two checks: every logprob within 1e-3 absolute (the
normalizer's rounding), and within one token the offsets agree to 1e-5 (the distributions are the
same up to that normalizer; after temperature or top-k they would differ by far more).
"""

from __future__ import annotations

import pytest

from llamact.engine import GenerationParams, LlamaEngine
from llamact.parity.create_answer import engine_params_for
from llamact.parity.llama_server import ServerConfig

pytestmark = [pytest.mark.model, pytest.mark.parity]

TOLERANCE = 1e-3
OFFSET_SPREAD = 1e-5
MESSAGES = [{"role": "user", "content": "Name three colours of the rainbow."}]


def test_logprobs_equal_llama_server(model_path, start_llama_server):
    server = start_llama_server(model_path)
    answer = server.post("/v1/chat/completions", {
        "messages": MESSAGES, "max_tokens": 10, "temperature": 0, "logprobs": True, "top_logprobs": 5,
    })
    theirs = answer["choices"][0]["logprobs"]["content"]
    with LlamaEngine.load(model_path, engine_params_for(ServerConfig(model_path))) as engine:
        completion = engine.complete_chat(MESSAGES, params=GenerationParams(greedy=True, max_tokens=10),
                                              logprobs=True, top_logprobs=5)
    ours = completion.to_openai("id", "m", 0)["choices"][0]["logprobs"]["content"]
    assert len(ours) == len(theirs) == 10
    worst = 0.0
    for mine, upstream in zip(ours, theirs, strict=True):
        assert (mine["id"], mine["token"], mine["bytes"]) == (upstream["id"], upstream["token"], upstream["bytes"])
        worst = max(worst, abs(mine["logprob"] - upstream["logprob"]))
        assert [t["id"] for t in mine["top_logprobs"]] == [t["id"] for t in upstream["top_logprobs"]]
        offsets = [mine["logprob"] - upstream["logprob"]]
        for a, b in zip(mine["top_logprobs"], upstream["top_logprobs"], strict=True):
            assert (a["token"], a["bytes"]) == (b["token"], b["bytes"])
            worst = max(worst, abs(a["logprob"] - b["logprob"]))
            offsets.append(a["logprob"] - b["logprob"])
        assert max(offsets) - min(offsets) < OFFSET_SPREAD
    print(f"{model_path.name}: max |logprob difference| = {worst:.2e}")
    assert worst < TOLERANCE
