"""The HTTP edge's one table of error answers (``server/http/errors.py``), over every exception class
the package defines (no model needed). The rule it must keep is llama-server's, as the server has
always answered: the request's fault (a ``LlamaRequestException``, a grammar that does not parse,
a body nested too deeply) and what the template or the schema converter cannot do
(``LlamaUnsupportedException``) are 400 ``invalid_request_error``; a prompt that does not fit 400
``exceed_context_size_error``; anything else 500 ``server_error``. Each class declares its kind
(``llamact.errors``); the table answers the kind, never the message text. This checks that no class
(one deriving from two kinds included) is answered other than by that rule."""

from __future__ import annotations

import importlib
import json
import pkgutil

import pytest

import llamact
from llamact.errors import (
    ErrorKind,
    LlamaContextException,
    LlamaException,
    LlamaInferenceException,
    LlamaRequestException,
    LlamaSamplerParameterException,
    LlamaUnsupportedException,
)
from llamact.grammar.gbnf import GbnfError
from llamact.server.http.errors import ANSWERS, RequestError, error_answer, exception_response

INVALID, CONTEXT, SERVER = (400, "invalid_request_error"), (400, "exceed_context_size_error"), (500, "server_error")
# the package's parts that define exception classes a request can meet (parity and the CLI are tools)
PARTS = ("llamact.errors", "llamact.native", "llamact.jinja", "llamact.grammar", "llamact.peg", "llamact.chat",
         "llamact.engine", "llamact.session", "llamact.server")


def _subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub, *_subclasses(sub)}
    return out


def _exception_classes() -> list[type[LlamaException]]:
    for name in PARTS:
        module = importlib.import_module(name)
        for info in pkgutil.walk_packages(getattr(module, "__path__", []), name + "."):
            importlib.import_module(info.name)
    return sorted((c for c in _subclasses(LlamaException) | {LlamaException}
                   if c.__module__.startswith(llamact.__name__)), key=lambda c: (c.__module__, c.__qualname__))


def _rule(exc: BaseException) -> tuple[int, str]:
    if isinstance(exc, (LlamaRequestException, LlamaUnsupportedException, GbnfError, RecursionError)):
        return INVALID
    if isinstance(exc, LlamaContextException):
        return CONTEXT
    return SERVER


def _instance(cls: type[LlamaException]) -> LlamaException:
    exc = cls.__new__(cls)
    LlamaException.__init__(exc, "failed")
    return exc


CLASSES = _exception_classes()


def test_the_package_defines_exception_classes_of_every_kind() -> None:
    answers = {error_answer(_instance(cls)) for cls in CLASSES if cls is not RequestError}
    assert answers == {INVALID, CONTEXT, SERVER}
    assert len(CLASSES) > 20


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_every_exception_class_is_answered_by_llama_servers_rule(cls: type[LlamaException]) -> None:
    if cls is RequestError:
        return   # its own status: below
    exc = _instance(cls)
    assert error_answer(exc) == _rule(exc)


@pytest.mark.parametrize(("status", "answer"), [(400, INVALID), (413, (413, "invalid_request_error")),
                                                (415, (415, "invalid_request_error")),
                                                (499, (499, "invalid_request_error")),
                                                (404, (404, "not_found_error")), (503, (503, "unavailable_error"))])
def test_a_request_error_keeps_its_own_status(status: int, answer: tuple[int, str]) -> None:
    assert error_answer(RequestError("no", status=status)) == answer


def test_the_table_answers_every_kind() -> None:
    assert set(ANSWERS) == set(ErrorKind)
    # llama-server's ex_wrapper: std::invalid_argument is 400, any other exception 500; a prompt
    # longer than the context is its own 400 type
    assert {kind for kind, (status, _) in ANSWERS.items() if status == 400} == {
        ErrorKind.REQUEST, ErrorKind.UNSUPPORTED, ErrorKind.CONTEXT}
    assert ANSWERS[ErrorKind.CONTEXT] == CONTEXT


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_each_exception_is_answered_by_the_kind_its_class_declares(cls: type[LlamaException]) -> None:
    if cls is RequestError:
        return   # its own status
    assert error_answer(_instance(cls)) == ANSWERS[cls.kind]


def test_the_answer_does_not_read_the_message() -> None:
    # a grammar llama.cpp refuses was once recognised by its words; now by its class, whatever it says
    refused = LlamaSamplerParameterException("llama.cpp rejected the Grammar sampler: x", {"sampler": "Grammar"})
    assert error_answer(refused) == INVALID
    lookalike = LlamaInferenceException("llama.cpp rejected the Grammar sampler: x", {"sampler": "Grammar"})
    assert error_answer(lookalike) == SERVER
    assert error_answer(GbnfError("missing root")) == INVALID


def test_exceptions_outside_the_hierarchy() -> None:
    assert error_answer(RecursionError()) == INVALID
    assert error_answer(ValueError("bug")) == SERVER
    response = exception_response(ValueError("bug"))
    assert response.status_code == 500
    assert json.loads(bytes(response.body)) == {"error": {"code": 500, "message": "ValueError: bug",
                                                          "type": "server_error"}}
