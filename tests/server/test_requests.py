"""Request bodies read as llama-server's oaicompat_chat_params_parse reads them (no model needed)."""

from __future__ import annotations

import re

import pytest

from llamact.errors import LlamaRequestException
from llamact.server.chat.wire import read_chat
from llamact.server.wire.request import RequestDefaults

HELLO = [{"role": "user", "content": "Hi"}]
TOOL = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


def request_of(body: dict) -> object:
    return read_chat(body, RequestDefaults()).request


def test_logprobs_ask_twenty_alternatives_unless_told() -> None:
    request = request_of({"messages": HELLO, "logprobs": True})
    assert (request.logprobs, request.top_logprobs) == (True, 20)
    request = request_of({"messages": HELLO, "logprobs": True, "top_logprobs": 2})
    assert (request.logprobs, request.top_logprobs) == (True, 2)
    assert request_of({"messages": HELLO}).logprobs is None


@pytest.mark.parametrize(("body", "message"), [
    ({"top_logprobs": 3}, "top_logprobs requires logprobs to be set to true"),
    ({"logprobs": True, "tools": TOOL, "stream": True}, "logprobs is not supported with tools + stream"),
    ({"logprobs": True, "top_logprobs": 999}, "top_logprobs must be an integer from 0 to"),
])
def test_logprobs_refusals(body: dict, message: str) -> None:
    with pytest.raises(LlamaRequestException, match=re.escape(message)):
        read_chat({"messages": HELLO, **body}, RequestDefaults())
