"""The Jinja exceptions: every template failure surfaces as a ``JinjaException`` (a LlamaTemplateException).

What enters: a message (upstream's text where upstream has one) and where it happened: the template
source name (model metadata, ModelParams.chat_template, a per-call template, a corpus id) and, when
known, the line. ``details`` carries the same facts for programs.
"""

from __future__ import annotations

from ..errors import LlamaTemplateException


class JinjaException(LlamaTemplateException):
    """A template failed to compile or render; ``source_name`` and ``line`` say where."""

    def __init__(self, message: str, source_name: str | None = None, line: int | None = None) -> None:
        where = ""
        if source_name:
            where = f" (template {source_name}" + (f", line {line}" if line else "") + ")"
        super().__init__(message + where, {"source_name": source_name, "line": line, "reason": message})
        self.reason = message
        self.source_name = source_name
        self.line = line


class JinjaSyntaxError(JinjaException):
    """The template source does not lex or parse (including a malformed string escape)."""


class JinjaRuntimeError(JinjaException):
    """Rendering failed: a type error, an unknown filter or test, ``raise_exception``."""


class JinjaLimitExceeded(JinjaException):
    """Rendering ran past the configured time or output-size bound."""


class TemplateError(Exception):
    """Raised inside the engine with upstream's message; the façade turns it into JinjaRuntimeError."""


class NotImplementedTemplateError(TemplateError):
    """Upstream's "not implemented" errors (a feature upstream's engine refuses). The message is
    upstream's ``not_implemented_exception``'s: ``"NotImplemented: "`` then what is missing."""

    def __init__(self, what: str) -> None:
        super().__init__("NotImplemented: " + what)


__all__ = ["JinjaException", "JinjaSyntaxError", "JinjaRuntimeError", "JinjaLimitExceeded", "TemplateError",
           "NotImplementedTemplateError"]
