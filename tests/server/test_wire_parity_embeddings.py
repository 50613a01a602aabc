"""Wire parity of the embedding and rerank routes: the same bodies sent to upstream's llama-server
(with the flags each needs: ``--embeddings --pooling mean``, ``--embeddings`` for the model's own
pooling -- none, for SmolLM2 --, ``--reranking``) and to ``llamact serve`` (``--pooling mean``, no
flag, ``--reranking``), on the bundled SmolLM2. Answers must be equal: status and JSON, vectors and
scores within ``TOLERANCE`` (1e-4 per component, the bound tests/parity/test_embeddings_server.py
justifies: one text per decode on both sides; a wrong pooling or norm differs by 1e-2 and more),
base64 vectors decoded first.

A case marked with deviation 12 is one llama-server answers 500 (a JSON type error, an empty list,
an input too large for its physical batch): llamact answers 400 ``invalid_request_error``, with
llama-server's own message where it is not nlohmann's. Each such case checks both sides.

SmolLM2 has no classifier head: with ``--reranking`` llama.cpp's rank pooling still reads one value
per sequence (its first token's first hidden component), so llama-server gives scores and the two
servers can be compared; the figures measure the route, not ranking quality.
"""

from __future__ import annotations

import base64
import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from server_live import HOST, LiveServer, openai_client

from llamact.json_types import Json
from llamact.parity.llama_server import LlamaServer, ServerConfig, find_llama_server

pytestmark = [pytest.mark.parity, pytest.mark.model, pytest.mark.slow]

TOLERANCE = 1e-4
UPSTREAM_FLAGS = {"mean": ("--embeddings", "--pooling", "mean"), "none": ("--embeddings",), "off": (),
                  "rank": ("--reranking",)}
LONG = "word " * 600   # 601 tokens: more than one physical batch (512)
TEXTS = ["The cat sat on the mat.", "Embeddings map text to vectors.", "hello", "Paris is the capital of France."]

# (route, body, upstream flags, llamact server, deviation): the llamact servers are the session's
# `embedding_server` (--pooling mean) and `server` (the model's own pooling, none), and `rank_server`
CASES: list[tuple[str, Json, str, str, str | None]] = [
    # OpenAI's route, mean pooling
    ("/v1/embeddings", {"input": "hello"}, "mean", "mean", None),
    ("/v1/embeddings", {"input": TEXTS, "model": "my-model"}, "mean", "mean", None),
    ("/v1/embeddings", {"input": "hello", "encoding_format": "base64"}, "mean", "mean", None),
    ("/v1/embeddings", {"input": TEXTS[:2], "encoding_format": "float"}, "mean", "mean", None),
    ("/v1/embeddings", {"input": [1, 2, 3]}, "mean", "mean", None),
    ("/v1/embeddings", {"input": [[1, 2], [3], "four"]}, "mean", "mean", None),
    ("/v1/embeddings", {"input": [1, "a"]}, "mean", "mean", None),
    ("/v1/embeddings", {"input": ["a", [1, "b"]]}, "mean", "mean", None),
    ("/v1/embeddings", {"input": {"prompt_string": "hi"}}, "mean", "mean", None),
    ("/v1/embeddings", {"input": "hi", "embd_normalize": -1}, "mean", "mean", None),
    ("/v1/embeddings", {"input": "hi", "embd_normalize": 2.7}, "mean", "mean", None),
    ("/v1/embeddings", {"input": "hi", "model": 5, "dimensions": 3}, "mean", "mean", None),
    ("/v1/embeddings", {"content": "hi"}, "mean", "mean", None),   # "content": the native answer
    ("/v1/embeddings", {"input": ""}, "mean", "mean", None),
    ("/v1/embeddings", {"input": [""]}, "mean", "mean", None),
    ("/v1/embeddings", {"input": [[]]}, "mean", "mean", None),
    ("/v1/embeddings", {"input": [99999999]}, "mean", "mean", None),
    ("/v1/embeddings", {"input": [-1]}, "mean", "mean", None),
    ("/v1/embeddings", {}, "mean", "mean", None),
    ("/v1/embeddings", [1, 2], "mean", "mean", None),
    ("/v1/embeddings", {"input": "hi", "encoding_format": "x"}, "mean", "mean", None),
    ("/v1/embeddings", {"input": []}, "mean", "mean", "12"),
    ("/v1/embeddings", {"input": None}, "mean", "mean", "12"),
    ("/v1/embeddings", {"input": [1, 2.5]}, "mean", "mean", "12"),
    ("/v1/embeddings", {"input": [True]}, "mean", "mean", "12"),
    ("/v1/embeddings", {"input": "hi", "encoding_format": 3}, "mean", "mean", "12"),
    ("/v1/embeddings", {"input": "hi", "embd_normalize": "2"}, "mean", "mean", "12"),
    ("/v1/embeddings", {"input": LONG}, "mean", "mean", "12"),
    # OpenAI's route, pooling none: refused before the body is read, saying --pooling mean (deviation 14)
    ("/v1/embeddings", {"input": "hello"}, "none", "none", "14"),
    ("/v1/embeddings", {"input": 5}, "none", "none", "14"),
    # the native routes
    ("/embeddings", {"input": "hi", "embd_normalize": 0}, "mean", "mean", None),
    ("/embeddings", {"input": "hi", "embd_normalize": 1}, "mean", "mean", None),
    ("/embeddings", {"input": "hi", "embd_normalize": 3}, "mean", "mean", None),
    ("/embeddings", {"input": TEXTS[:2], "encoding_format": "base64"}, "mean", "mean", None),
    ("/embeddings", {"input": ""}, "mean", "mean", None),
    ("/embeddings", {"input": LONG}, "mean", "mean", "12"),
    ("/embeddings", {"input": "hello world"}, "none", "none", None),   # one vector per token, as they are
    ("/embeddings", {"input": ["a", [1, 2]], "embd_normalize": 2}, "none", "none", None),
    ("/embedding", {"content": "hi"}, "mean", "mean", None),
    ("/embedding", {"content": ["a", "b"]}, "none", "none", None),
    ("/embedding", {"input": "hi"}, "mean", "mean", None),
    # reranking
    ("/v1/rerank", {"query": "a", "documents": ["b", "c"]}, "rank", "rank", None),
    ("/rerank", {"query": "What is the capital of France?", "documents": TEXTS, "top_n": 2}, "rank", "rank", None),
    ("/reranking", {"query": "q", "texts": ["x y", "z"], "return_text": True}, "rank", "rank", None),
    ("/v1/reranking", {"query": "q", "texts": ["x y", "z"]}, "rank", "rank", None),
    ("/v1/rerank", {"query": "a", "documents": ["b"], "model": "m", "top_n": "x"}, "rank", "rank", None),
    ("/v1/rerank", {"query": "a", "documents": ["b", "c"], "top_n": 0}, "rank", "rank", None),
    ("/v1/rerank", {"query": 5, "documents": ["b"]}, "rank", "rank", None),
    ("/v1/rerank", {"documents": ["b"]}, "rank", "rank", None),
    ("/v1/rerank", {"query": "a", "documents": []}, "rank", "rank", None),
    ("/v1/rerank", {"query": "a", "documents": "b"}, "rank", "rank", None),
    ("/v1/rerank", {"query": "a", "documents": [1]}, "rank", "rank", None),
    ("/rerank", {"query": "a", "documents": ["b"]}, "mean", "mean", None),   # not a reranking server: 501
    ("/v1/reranking", {"query": "a"}, "none", "none", None),
]


def _post(port: int, path: str, body: Json, headers: dict[str, str] | None = None) -> tuple[int, Json]:
    conn = http.client.HTTPConnection(HOST, port, timeout=300)
    try:
        conn.request("POST", path, body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def _decoded(answer: Json) -> Json:
    """base64 vectors as floats (compared within the tolerance like the others)."""
    if isinstance(answer, dict) and isinstance(answer.get("data"), list):
        for item in answer["data"]:
            if item.get("encoding_format") == "base64":
                item["embedding"] = np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4").tolist()
    return answer


def assert_close(got: Json, expected: Json, where: str = "") -> None:
    """Equal JSON; numbers within TOLERANCE, relative above 1 (embd_normalize 0 scales to 32760)."""
    if isinstance(expected, float) or isinstance(got, float):
        assert isinstance(got, (int, float)) and abs(got - expected) < TOLERANCE * max(1.0, abs(expected)), \
            (where, got, expected)
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), (where, got, expected)
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            assert_close(g, e, f"{where}[{i}]")
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and got.keys() == expected.keys(), (where, got, expected)
        for key in expected:
            assert_close(got[key], expected[key], f"{where}.{key}")
    else:
        assert got == expected, (where, got, expected)


@pytest.fixture(scope="module")
def upstream(smollm2_path: Path) -> Iterator[dict[str, LlamaServer]]:
    """llama-server under each set of flags, started on first use."""
    servers: dict[str, LlamaServer] = {}

    class Lazy(dict):   # type: ignore[type-arg]
        def __missing__(self, name: str) -> LlamaServer:
            server = LlamaServer(ServerConfig(smollm2_path, extra_args=UPSTREAM_FLAGS[name]), find_llama_server())
            server.start()
            servers[name] = self[name] = server
            return server

    try:
        yield Lazy()
    finally:
        for server in servers.values():
            server.stop()


@pytest.fixture(scope="module")
def rank_server(smollm2_path: Path) -> Iterator[LiveServer]:
    with LiveServer("--model", str(smollm2_path), "--threads", "1", "--ctx-size", "4096", "--reranking") as live:
        yield live


@pytest.fixture
def ours(request: pytest.FixtureRequest) -> Any:
    def pick(name: str) -> LiveServer:
        fixture = {"mean": "embedding_server", "none": "server", "rank": "rank_server"}[name]
        server: LiveServer = request.getfixturevalue(fixture)
        return server

    return pick


def _case_id(case: tuple[str, Json, str, str, str | None]) -> str:
    route, body, flags, _, deviation = case
    return f"{route}-{flags}-{json.dumps(body)[:60]}" + (f"-deviation{deviation}" if deviation else "")


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_embedding_routes_answer_as_llama_server(case: tuple[str, Json, str, str, str | None],
                                                 upstream: dict[str, LlamaServer], ours: Any) -> None:
    route, body, flags, ours_name, deviation = case
    mine = ours(ours_name)
    status, expected = _post(upstream[flags].port, route, body)
    got_status, got = _post(mine.port, route, body, mine.headers())
    if deviation is None:
        assert got_status == status
        assert_close(_decoded(got), _decoded(expected))
        return
    if deviation == "14":   # llama-server's status, type and words, then what to do
        assert (got_status, got["error"]["type"]) == (status, expected["error"]["type"]) == (400,
                                                                                          "invalid_request_error")
        assert got["error"]["message"].startswith(expected["error"]["message"])
        assert got["error"]["message"].endswith("start the server with --pooling mean (or cls / last) for one "
                                                "vector per input")
        return
    # deviation 12: llama-server's 500 is a 400 here, with its message unless that is nlohmann's
    assert (status, expected["error"]["type"]) == (500, "server_error")
    assert (got_status, got["error"]["type"], got["error"]["code"]) == (400, "invalid_request_error", 400)
    if not expected["error"]["message"].startswith("[json.exception"):
        assert got["error"]["message"] == expected["error"]["message"]


def test_a_generation_server_embeds_without_the_embeddings_flag(upstream: dict[str, LlamaServer],
                                                                server: LiveServer) -> None:
    """Deliberate deviation: llama-server without ``--embeddings`` answers 501 on every embedding
    route; llamact's generation server embeds on a second context of the same model, and its vectors
    are those of llama-server started with ``--embeddings``."""
    body = {"input": "hello world"}
    refused = [_post(upstream["off"].port, route, body) for route in ("/v1/embeddings", "/embeddings", "/embedding")]
    assert {(s, a["error"]["type"]) for s, a in refused} == {(501, "not_supported_error")}
    assert "--embeddings" in refused[0][1]["error"]["message"]
    status, got = _post(server.port, "/embeddings", body, server.headers())
    expected_status, expected = _post(upstream["none"].port, "/embeddings", body)
    assert status == expected_status == 200
    assert_close(got, expected)
    generated, _ = _post(server.port, "/v1/completions", {"prompt": "Hi", "max_tokens": 2}, server.headers())
    assert generated == 200


def test_rerank_of_nothing_is_a_400_where_llama_server_crashes(smollm2_path: Path, rank_server: LiveServer) -> None:
    """Deviation 12: an empty query and document make no tokens; llama-server's process dies on it
    (its own server, so the others are not lost), llamact answers 400."""
    body = {"query": "", "documents": [""]}
    with LlamaServer(ServerConfig(smollm2_path, extra_args=UPSTREAM_FLAGS["rank"]), find_llama_server()) as ref:
        with pytest.raises((http.client.HTTPException, OSError)):
            _post(ref.port, "/v1/rerank", body)
        assert ref._process is not None and ref._process.wait(timeout=30) != 0
    status, got = _post(rank_server.port, "/v1/rerank", body, rank_server.headers())
    assert (status, got["error"]["message"]) == (400, "Input content cannot be empty")


def test_openai_sdk_embeddings_equal_llama_server(upstream: dict[str, LlamaServer],
                                                  embedding_server: LiveServer) -> None:
    """``client.embeddings.create``: its default asks for base64 (and decodes it), ``float`` for lists."""
    _, expected = _post(upstream["mean"].port, "/v1/embeddings", {"input": TEXTS[:2], "encoding_format": "float"})
    vectors = [item["embedding"] for item in expected["data"]]
    client = openai_client(embedding_server)
    for encoding in ("float", None):
        kwargs = {"encoding_format": encoding} if encoding else {}
        answer = client.embeddings.create(model="any", input=TEXTS[:2], **kwargs)
        assert [d.index for d in answer.data] == [0, 1]
        assert_close([list(map(float, d.embedding)) for d in answer.data], vectors)
        assert (answer.usage.prompt_tokens, answer.model) == (expected["usage"]["prompt_tokens"], "any")


def test_slots_embed_beside_the_scheduler(upstream: dict[str, LlamaServer], parallel_server: LiveServer) -> None:
    """With --parallel the embedding runs beside the slots' decodes (its context is its own)."""
    body = {"input": ["hello world", [1, 2]]}
    status, got = _post(parallel_server.port, "/embeddings", body, parallel_server.headers())
    expected_status, expected = _post(upstream["none"].port, "/embeddings", body)
    assert status == expected_status == 200
    assert_close(got, expected)
