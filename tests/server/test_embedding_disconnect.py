"""A client that sends thousands of embedding inputs and goes away does not hold the engine: the
work stops between inputs (found by the fuzzer's routes family: 20,000 inputs took 380 s here, one
decode each, long after the client had given up)."""

from __future__ import annotations

import json
import socket
import time

import pytest
from server_live import LiveServer

from llamact.parity.llama_server import HOST

pytestmark = pytest.mark.model

N_INPUTS = 50_000   # minutes of work, one decode each
LIVENESS_S = 120    # far below what the whole request takes: the bound of a stopped request, not a speed


@pytest.mark.parametrize("path", ["/embeddings", "/v1/embeddings"])
def test_a_request_whose_client_left_stops_between_inputs(path: str, embedding_server: LiveServer) -> None:
    body = json.dumps({"input": ["a"] * N_INPUTS}).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection((HOST, embedding_server.port)) as sock:
        sock.sendall(head + body)
        time.sleep(2)   # the work has started
    status, answer = embedding_server.request("POST", path, json.dumps({"input": "hello"}).encode(),
                                              timeout=LIVENESS_S)
    assert status == 200, answer
    assert len(json.loads(answer)["data"] if path.startswith("/v1") else json.loads(answer)) == 1
