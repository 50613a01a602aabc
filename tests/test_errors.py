"""Errors are classified where they are raised (llamact/errors.py): every exception class says what
kind of failure it is, a class of kind K is caught by K's class, and a caller's bad argument is a
request error wherever it is found -- no model needed here; the raise sites that need one are
tests/engine/test_request_errors.py."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import llamact
from llamact import errors
from llamact.errors import (
    KIND_CLASSES,
    ErrorKind,
    LlamaException,
    LlamaInferenceException,
    LlamaRequestException,
    LlamaStateException,
)


def _all_exception_classes() -> list[type[LlamaException]]:
    for module in pkgutil.walk_packages(llamact.__path__, "llamact."):
        if module.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(module.name)
        except ImportError:   # an optional runtime (LiteRT-LM, the hub) that is not installed here
            continue

    def below(cls: type[LlamaException]) -> Iterator[type[LlamaException]]:
        for sub in cls.__subclasses__():
            if sub.__module__.startswith("llamact."):
                yield sub
                yield from below(sub)

    return sorted({LlamaException, *below(LlamaException)}, key=lambda c: f"{c.__module__}.{c.__qualname__}")


ALL_CLASSES = _all_exception_classes()
ERRORS_MODULE_CLASSES = [cls for _, cls in inspect.getmembers(errors, inspect.isclass)
                         if issubclass(cls, LlamaException) and cls.__module__ == errors.__name__]


def test_the_package_has_the_exception_classes_it_is_known_for() -> None:
    names = {cls.__name__ for cls in ALL_CLASSES}
    # the walk found the classes outside errors.py (else the tests below would check nothing there)
    assert {"GbnfError", "ChatRequestError", "JinjaSyntaxError", "PegParseError", "RequestError"} <= names
    assert len(ERRORS_MODULE_CLASSES) >= 13


@pytest.mark.parametrize("cls", ERRORS_MODULE_CLASSES, ids=lambda c: c.__name__)
def test_every_class_of_the_errors_module_declares_its_kind(cls: type[LlamaException]) -> None:
    assert "kind" in vars(cls), f"{cls.__name__} inherits its kind; errors.py declares each class's"
    assert isinstance(cls.kind, ErrorKind)


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_every_exception_class_is_caught_by_the_class_of_its_kind(cls: type[LlamaException]) -> None:
    assert isinstance(cls.kind, ErrorKind)
    assert issubclass(cls, KIND_CLASSES[cls.kind]), (
        f"{cls.__qualname__} is of kind {cls.kind.value} but not a {KIND_CLASSES[cls.kind].__name__}")
    # unclassified only by a decision written in the class, never by inheriting the base's default
    if cls.kind is ErrorKind.UNCLASSIFIED:
        assert "kind" in vars(cls)


def test_every_kind_has_its_class() -> None:
    assert set(KIND_CLASSES) == set(ErrorKind)
    for kind, cls in KIND_CLASSES.items():
        assert cls.kind is kind


def test_a_class_of_two_kinds_must_say_which_it_is() -> None:
    with pytest.raises(TypeError, match="declare its kind"):
        class Both(LlamaInferenceException, LlamaStateException):
            pass

    class Declared(LlamaInferenceException, LlamaRequestException):
        kind = ErrorKind.REQUEST

    assert Declared("x").kind is ErrorKind.REQUEST
    with pytest.raises(TypeError, match="must be an ErrorKind"):
        class Wrong(LlamaException):
            kind = "request"  # type: ignore[assignment]


def test_the_kind_is_on_each_instance_and_reads_as_text() -> None:
    exc = LlamaRequestException("bad field", {"field": "x"})
    assert exc.kind is ErrorKind.REQUEST and exc.kind == "request"
    assert ErrorKind("inference") is ErrorKind.INFERENCE


# -- a caller's bad argument is a request error where it is raised (and, where it was an inference
# -- error before errors had a kind, still one, so that code catching that keeps working) ----------


def _tool_with_unreadable_hints() -> None:
    from llamact.session.tool_functions import Tool

    def lookup(city: Undefined) -> str:  # type: ignore[name-defined]  # noqa: F821
        return city

    Tool.from_function(lookup)


def _cases() -> list[tuple[str, Callable[[], Any], str, bool]]:
    from llamact import GenerationParams, parse_structured_json
    from llamact.cli import _read_json
    from llamact.engine.logprobs import check_top_logprobs
    from llamact.engine.sampling import sampler_specs
    from llamact.native.text import c_string, utf8
    from llamact.session.tool_functions import Tool

    # (raise site, the call, what its message says, whether it was an inference error before)
    return [
        ("params.py samplers", lambda: GenerationParams(samplers=["top_k", 3]), "sequence of strings", True),
        ("params.py stop type", lambda: GenerationParams(stop=5), "stop must be a string", True),
        ("params.py stop item", lambda: GenerationParams(stop=["a", 3]), "each stop sequence", True),
        ("logprobs.py top_logprobs", lambda: check_top_logprobs(99), "top_logprobs must be", True),
        ("sampling.py grammar", lambda: sampler_specs(GenerationParams(grammar="root ::= (")), "invalid grammar",
         True),
        ("structured.py stream", lambda: parse_structured_json([]), "needs a create() stream", True),
        ("text.py surrogate", lambda: utf8("a\ud800", "the text"), "lone surrogate", True),
        ("text.py NUL", lambda: c_string("a\0b", "the text"), "NUL", True),
        ("tool_functions.py declared", lambda: Tool.declared({"type": "function"}), "OpenAI tool dict", False),
        ("tool_functions.py function", lambda: Tool.from_function(5), "must be a function", False),  # type: ignore[arg-type]
        ("tool_functions.py *args", lambda: Tool.from_function(lambda *args: 0), "*args", False),
        ("tool_functions.py hints", _tool_with_unreadable_hints, "type hints", False),
        ("cli.py file", lambda: _read_json(Path("/nonexistent/tools.json"), "tools"), "cannot read tools", False),
    ]


@pytest.mark.parametrize(("site", "call", "words", "was_inference"), _cases(), ids=[c[0] for c in _cases()])
def test_a_callers_bad_argument_is_a_request_error(site: str, call: Callable[[], Any], words: str,
                                                   was_inference: bool) -> None:
    with pytest.raises(LlamaException) as info:
        call()
    assert words in info.value.message
    assert info.value.kind is ErrorKind.REQUEST and isinstance(info.value, LlamaRequestException), site
    assert isinstance(info.value, LlamaInferenceException) is was_inference, site
