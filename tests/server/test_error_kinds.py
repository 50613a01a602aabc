"""The server answers a failed request by the exception's kind, from one table (``KIND_ANSWERS``), never
by its message text. The statuses themselves are measured against llama-server in the wire-parity
tests (test_wire_parity*.py, test_hostile_grammars.py); here: the table covers every kind, and every
exception class of llamact.errors is answered by its kind."""

from __future__ import annotations

import inspect

import pytest

from llamact import errors
from llamact.errors import ErrorKind, LlamaException, LlamaInferenceException
from llamact.grammar.gbnf import GbnfError
from llamact.server.protocol import KIND_ANSWERS, RequestError, error_kind

CLASSES = [cls for _, cls in inspect.getmembers(errors, inspect.isclass) if issubclass(cls, LlamaException)]


def test_the_table_answers_every_kind() -> None:
    assert set(KIND_ANSWERS) == set(ErrorKind)
    # llama-server's ex_wrapper: std::invalid_argument is 400, any other exception 500; a prompt
    # longer than the context is its own 400 type
    assert {kind for kind, (_, status) in KIND_ANSWERS.items() if status == 400} == {
        ErrorKind.REQUEST, ErrorKind.UNSUPPORTED, ErrorKind.CONTEXT}
    assert KIND_ANSWERS[ErrorKind.CONTEXT] == ("exceed_context_size_error", 400)
    assert {answer for kind, answer in KIND_ANSWERS.items() if kind is not ErrorKind.CONTEXT} == {
        ("invalid_request_error", 400), ("server_error", 500)}


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_each_exception_is_answered_by_its_kind(cls: type[LlamaException]) -> None:
    assert error_kind(cls("x")) == KIND_ANSWERS[cls.kind]


def test_the_answer_does_not_read_the_message() -> None:
    # a grammar llama.cpp refuses was once recognised by its words; now by its class, whatever it says
    refused = errors.LlamaSamplerParameterException("llama.cpp rejected the Grammar sampler: x", {"sampler": "Grammar"})
    assert error_kind(refused) == ("invalid_request_error", 400)
    lookalike = LlamaInferenceException("llama.cpp rejected the Grammar sampler: x", {"sampler": "Grammar"})
    assert error_kind(lookalike) == ("server_error", 500)
    assert error_kind(GbnfError("missing root")) == ("invalid_request_error", 400)


def test_what_is_not_a_llamact_error() -> None:
    assert error_kind(RequestError("busy", 503)) == ("unavailable_error", 503)
    assert error_kind(RequestError("too large", 413)) == ("invalid_request_error", 413)
    assert error_kind(RecursionError()) == ("invalid_request_error", 400)
    assert error_kind(ValueError("a bug")) == ("server_error", 500)
