"""``llamact serve -m model.litertlm``: one slot on the LiteRT-LM engine, the same routes."""

from __future__ import annotations

import json
from pathlib import Path

from litert_bundles import needs_runtime
from server_live import HOST, LiveServer, sse_events

from llamact import LlamaEngine

pytestmark = needs_runtime

BODY = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}],
        "max_tokens": 12, "seed": 7, "temperature": 1.0, "top_k": 40, "top_p": 0.95}


def test_serve_answers_chat_completions_from_a_bundle(tiny_bundle: Path) -> None:
    with LlamaEngine.load(tiny_bundle, n_ctx=512, n_threads=1) as engine:
        expected = engine.complete_chat(BODY["messages"], max_tokens=12, seed=7, temperature=1.0, top_k=40, top_p=0.95)
    with LiveServer("-m", str(tiny_bundle), "-t", "1", "-c", "512") as live:
        status, raw = live.request("POST", "/v1/chat/completions", json.dumps(BODY).encode())
        assert status == 200, raw[:500]
        reply = json.loads(raw)
        assert reply["choices"][0]["message"]["content"] == expected.content
        assert reply["usage"]["completion_tokens"] == 12 and reply["choices"][0]["finish_reason"] == "length"
        events = list(sse_events(HOST, live.port, "/v1/chat/completions", {**BODY, "stream": True}))
        assert events[-1] == "[DONE]"
        streamed = "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1] if e["choices"])
        assert streamed == expected.content
        status, raw = live.request("POST", "/v1/chat/completions", json.dumps({**BODY, "logprobs": True}).encode())
        assert status == 400 and b"token probabilities" in raw
