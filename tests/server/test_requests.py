"""Request bodies read as llama-server's oaicompat_chat_params_parse reads them (no model needed)."""

from __future__ import annotations

import re

import pytest

from llamact.server.requests import RequestDefaults, RequestError, chat_request

HELLO = [{"role": "user", "content": "Hi"}]
TOOL = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


def params_of(body: dict) -> object:
    return chat_request(body, RequestDefaults()).create_kwargs["params"]


def test_logprobs_ask_twenty_alternatives_unless_told() -> None:
    assert (params_of({"messages": HELLO, "logprobs": True}).top_logprobs, True) == (20, True)
    params = params_of({"messages": HELLO, "logprobs": True, "top_logprobs": 2})
    assert (params.logprobs, params.top_logprobs) == (True, 2)
    assert params_of({"messages": HELLO}).logprobs is False


@pytest.mark.parametrize(("body", "message"), [
    ({"top_logprobs": 3}, "top_logprobs requires logprobs to be set to true"),
    ({"logprobs": True, "tools": TOOL, "stream": True}, "logprobs is not supported with tools + stream"),
    ({"logprobs": True, "top_logprobs": 999}, "top_logprobs must be an integer from 0 to"),
])
def test_logprobs_refusals(body: dict, message: str) -> None:
    with pytest.raises(RequestError, match=re.escape(message)):
        chat_request({"messages": HELLO, **body}, RequestDefaults())
