"""``llamact serve``'s settings and request reading, without a model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from llamact.errors import LlamaRequestException
from llamact.server.chat.wire import read_chat
from llamact.server.completions.wire import read_completion
from llamact.server.config.settings import load_settings
from llamact.server.http.errors import RequestError
from llamact.server.wire.request import RequestDefaults

TOOL = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


def test_flags_win_over_the_environment_over_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "serve.json"
    config.write_text(json.dumps({"port": 1111, "parallel": 3, "api_key": "from-file", "ctx_size": 2048}))
    monkeypatch.setenv("LLAMACT_PORT", "2222")
    monkeypatch.setenv("LLAMACT_API_KEY", "from-env")
    settings = load_settings({"port": 3333, "api_key": None}, config)
    assert (settings.port, settings.api_key, settings.parallel, settings.ctx_size) == (3333, ("from-env",), 3, 2048)
    assert settings.model_params().n_seq_max == 3


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        load_settings({"parallel": 0})
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(Exception, match="JSON object"):
        load_settings({}, bad)


def test_raw_completion_fields_as_llama_server_reads_them() -> None:
    req = read_completion({"prompt": "Hi", "n_probs": 3, "json_schema": {}}, RequestDefaults())
    assert (req.params.logprobs, req.params.top_logprobs) == (True, 3)
    assert req.params.grammar and "root" in req.params.grammar          # an empty schema: any object
    both = read_completion({"prompt": "Hi", "json_schema": {"type": "string"}, "grammar": 'root ::= "x"'},
                              RequestDefaults())
    assert both.params.grammar == 'root ::= "x"'                          # grammar wins, as upstream
    assert read_completion({"prompt": "Hi", "n_probs": 0}, RequestDefaults()).params.logprobs is False
    with pytest.raises(RequestError, match="json_schema"):
        read_completion({"prompt": "Hi", "json_schema": {"type": "no-such-type"}}, RequestDefaults())


def test_chat_fields_as_llama_server_reads_them() -> None:
    call = read_chat({"messages": [], "max_completion_tokens": 7, "stop": "x", "stream": True,
                      "stream_options": {"include_usage": True}, "chat_template_kwargs": {"enable_thinking": False},
                      "logit_bias": {"5": -1.5, "6": False}, "seed": 3}, RequestDefaults())
    params = call.params
    assert (call.stream, call.include_usage) == (True, True)
    assert (params.max_tokens, params.stop, params.seed) == (7, ("x",), 3)
    assert params.logit_bias == {5: -1.5, 6: float("-inf")}
    assert call.request.inputs.enable_thinking is False
    assert read_chat({"messages": [], "reasoning_effort": "none"}, RequestDefaults()).request.inputs.enable_thinking \
        is False


@pytest.mark.parametrize("body, message", [
    ({}, "'messages' is required"),
    ({"messages": {}}, "Expected 'messages' to be an array"),
    ({"messages": [], "chat_template_kwargs": {"enable_thinking": "yes"}}, 'invalid type for "enable_thinking"'),
    ({"messages": [], "n": 2}, "Field 'n': Value must be between 1 <= value <= 1, but got 2"),   # one slot
    ({"messages": [], "tools": TOOL, "grammar": 'root ::= "x"'}, "Cannot use custom grammar constraints with tools."),
    ({"messages": [], "tools": [{}]}, "Failed to parse tools: Missing tool type"),   # upstream's text
    ({"messages": [], "grammar": "root ::= x"},
     "Failed to parse grammar ('grammar'): invalid GBNF grammar: undefined rule 'x'"),
    ({"messages": [], "temperature": "hot"},
     "Field 'temperature': [json.exception.type_error.302] type must be number, but is string"),
    ({"messages": [], "n_probs": 21}, "'n_probs' above 20 is not supported"),
    ({"messages": [], "n_probs": 2, "post_sampling_probs": True}, "'post_sampling_probs' is not supported"),
])
def test_bad_chat_fields_are_request_errors(body: dict[str, object], message: str) -> None:
    with pytest.raises(LlamaRequestException, match=re.escape(message)):
        read_chat(body, RequestDefaults())


def test_the_enable_thinking_kwarg_is_read_as_upstream_reads_it() -> None:
    # upstream reads the kwarg's JSON text: true / false switch thinking, a string is refused, anything
    # else (a number) leaves the server's default (the old reading refused numbers too)
    def thinking(value: object) -> bool:
        body = {"messages": [], "chat_template_kwargs": {"enable_thinking": value}}
        return read_chat(body, RequestDefaults(enable_thinking=True)).request.inputs.enable_thinking

    assert (thinking(False), thinking(True), thinking(1)) == (False, True, True)


def test_fields_upstream_reads_leniently_keep_their_defaults() -> None:
    # json_value(body, name, default): a value of another type is the default, not an error
    call = read_chat({"messages": [], "parallel_tool_calls": "yes", "reasoning_effort": 5,
                      "add_generation_prompt": 1}, RequestDefaults(parallel_tool_calls=True))
    inputs = call.request.inputs
    assert (inputs.parallel_tool_calls, inputs.add_generation_prompt) == (True, True)
    assert "reasoning_effort" not in inputs.chat_template_kwargs


def test_a_bad_chat_template_file_is_named_with_what_is_wrong(tmp_path: Path) -> None:
    import os

    from llamact.errors import LlamaException
    from llamact.server.config.settings import ServerSettings

    latin1 = tmp_path / "latin1.jinja"
    latin1.write_bytes(b"{{ 'caf\xe9' }}")
    fifo = tmp_path / "fifo.jinja"
    os.mkfifo(fifo)
    cases = {latin1: "is not UTF-8 text (byte 7", tmp_path: "is a directory", fifo: "is not a regular file",
             tmp_path / "missing.jinja": "does not exist"}
    for path, words in cases.items():   # the FIFO is refused, not opened (that would block)
        with pytest.raises(LlamaException) as info:
            ServerSettings(chat_template_file=path).model_params()
        assert str(path) in str(info.value) and words in str(info.value)


def test_serve_refuses_a_template_that_is_not_a_file(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys
    import tempfile

    fifo = tmp_path / "fifo.jinja"
    os.mkfifo(fifo)
    for path, words in ((tmp_path, "is a directory"), (fifo, "is not a regular file")):
        proc = subprocess.run([sys.executable, "-m", "llamact", "serve", "--chat-template-file", str(path),
                               "--port", "0"], capture_output=True, text=True, timeout=120,
                              cwd=tempfile.gettempdir())
        assert proc.returncode == 1 and f"{path} {words}" in proc.stderr, proc.stderr


def test_the_transport_limits_read_flags_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLAMACT_MAX_BODY_SIZE", "1000")
    monkeypatch.setenv("LLAMACT_SHUTDOWN_TIMEOUT", "1.5")
    settings = load_settings({"timeout": 7.0, "max_body_depth": None})
    assert (settings.max_body_size, settings.shutdown_timeout, settings.timeout) == (1000, 1.5, 7.0)
    assert (settings.max_body_depth, settings.max_tokenize_tokens) == (512, 1 << 20)


def test_embedding_settings_are_llama_servers() -> None:
    assert load_settings({}).embedding_pooling() is None            # the model's own
    assert load_settings({"pooling": "mean"}).embedding_pooling() == "mean"
    assert load_settings({"pooling": "mean", "reranking": True}).embedding_pooling() == "rank"
    with pytest.raises(ValueError):
        load_settings({"pooling": "max"})
