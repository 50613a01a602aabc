"""``litellm`` against a live ``llamact serve`` (SmolLM2, greedy), as its OpenAI-compatible provider
("openai/<name>" with ``api_base``): ``completion`` plain and streamed, and ``embedding``."""

from __future__ import annotations

import math

import litellm
import pytest
from server_live import LiveServer

pytestmark = pytest.mark.model

HELLO = [{"role": "user", "content": "Say hello."}]


def _where(live: LiveServer) -> dict[str, str]:
    return {"api_base": live.base_url + "/v1", "api_key": live.api_key or "none"}


def test_completion(server: LiveServer) -> None:
    reply = litellm.completion(model="openai/smollm2", messages=HELLO, temperature=0, max_tokens=12, **_where(server))
    assert reply.choices[0].message.content
    assert reply.choices[0].finish_reason in ("stop", "length")
    assert reply.usage.completion_tokens > 0 and reply.usage.prompt_tokens > 0


def test_streamed_completion_adds_up_to_the_plain_one(server: LiveServer) -> None:
    common = {"model": "openai/smollm2", "messages": HELLO, "temperature": 0, "max_tokens": 12,
              "extra_body": {"cache_prompt": False}, **_where(server)}
    plain = litellm.completion(**common).choices[0].message.content
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in litellm.completion(stream=True, **common))
    assert streamed == plain and plain


def test_embedding(embedding_server: LiveServer) -> None:
    answer = litellm.embedding(model="openai/smollm2", input=["hello", "The cat sat on the mat."],
                               **_where(embedding_server))
    vectors = [item["embedding"] for item in answer.data]
    assert len(vectors) == 2 and len(vectors[0]) == 576
    assert math.isclose(sum(v * v for v in vectors[0]), 1.0, rel_tol=1e-4)
    assert answer.usage.prompt_tokens > 0
