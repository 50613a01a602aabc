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


BODY_SCHEMA = {"type": "array"}
FORMAT_SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}}


@pytest.mark.parametrize(("response_format", "wins"), [
    ({"type": "json_schema", "json_schema": {"schema": FORMAT_SCHEMA}}, "format"),
    ({"type": "json_object", "schema": FORMAT_SCHEMA}, "format"),
    ({"type": "json_object"}, "body"),
    ({"type": "text"}, "body"),
    (None, "body"),
])
def test_response_format_and_the_body_json_schema_as_llama_server_reads_them(response_format: dict | None,
                                                                              wins: str) -> None:
    """llama-server at the pin (oaicompat_chat_params_parse): a response_format naming a schema wins over
    the body's json_schema; a text format or a bare json_object leaves the body's in force."""
    body = {"messages": HELLO, "json_schema": BODY_SCHEMA}
    if response_format is not None:
        body["response_format"] = response_format
    request = request_of(body)
    if wins == "format":
        assert request.response_format == response_format
    else:
        assert request.response_format == {"type": "json_schema", "json_schema": {"schema": BODY_SCHEMA}}
