"""Upstream's error kinds and llamact's exceptions: the one table that says when two failures are the same.

When upstream fails, the oracle answers ``{"error": {"kind", "message"}}``; ``kind`` says which C++
exception escaped (tests/oracle/README.md): ``runtime_error`` (``std::runtime_error`` and its
subclasses, e.g. Jinja's lexer, parser and ``NotImplemented`` errors, the PEG arena loader),
``invalid_argument`` (``std::invalid_argument``: the JSON-schema converter, OpenAI message and tool
parsing), ``exception`` (another ``std::exception``: a template's ``raise_exception``),
``json_error`` (``common_json`` could not parse or dump), ``bad_request`` / ``unknown_op`` /
``json_parse`` (the oracle refused the request itself), ``unknown``. The corpus adds two kinds of its
own for failures it records from a stream: ``parse`` (a ``common_chat_parse`` that threw during
streaming; upstream's ``std::runtime_error``) and ``diff`` (``compute_diffs`` threw), and
``oracle_failed`` when the oracle process itself could not answer (died, hung).

A llamact failure matches an upstream failure only when (:func:`match_error`):

1. its exception class is one this table pairs with upstream's kind, and
2. where upstream's message is what a user sees (:attr:`MessageRule`), its text is upstream's.

The text compared is the exception's upstream-facing text: a Jinja error's ``reason`` (its message
without the " (template ..., line ...)" location llamact appends), else its ``message``.
``EXACT_PLUS_LOCATION`` also allows one trailing line that only says where in the input the
problem is (``\\n(keyword 'type' at #/type)``, ``\\n(at #/pattern)``): the JSON-schema errors carry it.

One deliberate difference, on Python 3.10 only: that Python cannot say where in a line of generated
code a template failed (no ``co_positions``), so llamact's runtime Jinja errors there lack upstream's
location preamble (``\\n------------\\nWhile executing <Node> at line L, column C in source:
...\\nError: ``); where llamact.jinja.locations.LOCATED is false, a template error is compared by
what follows the preamble, upstream's message (also inside a message that wraps it).

Exceptions that are not ``LlamaException`` (``IndexError``, ``KeyError``, ``TypeError``, ...) never
match anything: escaping llamact, they are bugs, and the scoreboard reports them as crashes.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

from ..chat.diffs import ChatDiffError
from ..chat.output_parser import ChatParseError
from ..errors import LlamaException, LlamaInferenceException, LlamaUnsupportedException
from ..grammar.gbnf import GbnfError
from ..jinja.errors import JinjaRuntimeError, JinjaSyntaxError
from ..jinja.locations import LOCATED
from ..peg.executor import PegParseError
from ..peg.nodes import PegArenaError

__all__ = ["ERROR_KINDS", "ErrorKind", "MessageRule", "error_text", "match_error"]


class MessageRule(enum.Enum):
    KIND_ONLY = "kind only"                  # upstream's text is not something llamact reproduces
    EXACT = "exact"                          # the same text
    EXACT_PLUS_LOCATION = "exact + location"  # the same text, then at most one "\n(... at #...)" line


@dataclass(frozen=True)
class ErrorKind:
    """Upstream's ``kind`` in ``components``, what upstream throws there, and llamact's counterparts."""

    kind: str
    components: frozenset[str]
    upstream: str
    llamact: tuple[type[LlamaException], ...]
    message: MessageRule


def _in(*names: str) -> frozenset[str]:
    return frozenset(names)


_TEMPLATES = _in("jinja", "template_jinja", "caps", "template_render", "chat_apply")

#: The table. A (component, kind) pair not listed here has no llamact counterpart: any llamact
#: answer to it is different.
ERROR_KINDS: tuple[ErrorKind, ...] = (
    ErrorKind("runtime_error", _TEMPLATES,
              "jinja lexer/parser/runtime errors and NotImplemented (std::runtime_error subclasses)",
              (JinjaRuntimeError, JinjaSyntaxError), MessageRule.EXACT),
    ErrorKind("exception", _TEMPLATES,
              "a runtime error with its location (jinja::rethrown_exception, \"\\n------------\\nWhile "
              "executing ...\"), a template's raise_exception (\"Jinja Exception: ...\")",
              (JinjaRuntimeError,), MessageRule.EXACT),
    ErrorKind("exception", _in("jinja", "template_jinja", "caps"),
              "a number literal std::stoll / std::stod refuse while parsing (std::out_of_range: \"stoll\")",
              (JinjaSyntaxError,), MessageRule.EXACT),
    ErrorKind("invalid_argument", _in("json_schema"),
              "the JSON-schema converter's \"JSON schema conversion failed:\\n...\"",
              (LlamaUnsupportedException,), MessageRule.EXACT_PLUS_LOCATION),
    ErrorKind("invalid_argument", _in("template_render", "chat_apply"),
              "OpenAI message / tool parsing and apply errors (std::invalid_argument)",
              (LlamaUnsupportedException, LlamaInferenceException), MessageRule.EXACT),
    ErrorKind("parse", _in("chat_parse"),
              "common_chat_parse: \"The model produced output that does not match the expected ... format\"",
              (ChatParseError,), MessageRule.EXACT),
    ErrorKind("diff", _in("msg_diffs"), "compute_diffs: \"Invalid diff: ...\"", (ChatDiffError,), MessageRule.EXACT),
    ErrorKind("runtime_error", _in("peg_arena", "peg_grammar", "peg_parse"),
              "the PEG arena loader and grammar builder (std::runtime_error)",
              (PegArenaError, PegParseError), MessageRule.KIND_ONLY),
    ErrorKind("json_error", _in("peg_arena", "peg_grammar", "json_schema", "chat_apply"),
              "common_json could not parse (nlohmann's message text)",
              (LlamaUnsupportedException, PegArenaError), MessageRule.KIND_ONLY),
    ErrorKind("runtime_error", _in("gbnf"), "llama_grammar_parser::parse refused the grammar",
              (GbnfError,), MessageRule.KIND_ONLY),
)

_LOCATION_LINE = re.compile(r"\n\((?:keyword '[^'\n]*' )?at #[^\n]*\)\Z")
_PREAMBLE = re.compile(r"\n------------\nWhile executing [A-Za-z]+ at line \d+, column \d+ in source:\n.*?\nError: ",
                       re.S)


def error_text(exc: LlamaException) -> str:
    """The part of ``exc``'s message that corresponds to upstream's message."""
    reason = getattr(exc, "reason", None)
    return reason if isinstance(reason, str) else exc.message


def _rule_for(component: str, kind: str, exc: BaseException) -> ErrorKind | None:
    for entry in ERROR_KINDS:
        if entry.kind == kind and component in entry.components and isinstance(exc, entry.llamact):
            return entry
    return None


def match_error(component: str, expected: dict[str, Any], exc: BaseException) -> str | None:
    """None when ``exc`` is the same failure as upstream's ``expected`` error (``{"kind",
    "message"}``) in ``component``; else why not."""
    kind, message = str(expected.get("kind", "")), str(expected.get("message", ""))
    if not isinstance(exc, LlamaException):
        return f"{type(exc).__name__} escaped llamact (a bug), upstream failed with {kind}"
    entry = _rule_for(component, kind, exc)
    if entry is None:
        return f"upstream failed with {kind}, llamact raised {type(exc).__name__} (not that kind)"
    text = error_text(exc)
    if not LOCATED and component in _TEMPLATES:
        message = _PREAMBLE.sub("", message)  # the deliberate difference on Python 3.10 (docstring)
    if entry.message is MessageRule.KIND_ONLY or text == message:
        return None
    if entry.message is MessageRule.EXACT_PLUS_LOCATION and text.startswith(message) \
            and _LOCATION_LINE.fullmatch(text[len(message):]):
        return None
    return f"same kind ({kind}), other text: expected {message!r}, got {text!r}"
