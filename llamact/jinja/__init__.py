"""``llamact.jinja``: chat templates rendered by jinja2 with llama.cpp v0.5.0's semantics.

    render(source, context, *, now=None, source_name="template", limits=None) -> str
    compile_template(source, source_name="template") -> CompiledTemplate

Enters: Jinja source (untrusted: always sandboxed) and a JSON-shaped context. Leaves: the text
upstream's engine renders, byte for byte (docs/design.md deviation 1 aside: ``\\xHH`` string escapes).
``now`` (epoch seconds) fixes ``strftime_now``'s clock (None: the wall clock). Raises
``JinjaException`` (a LlamaException) naming the template source: ``JinjaSyntaxError`` for
source that does not compile, ``JinjaRuntimeError`` when rendering fails (upstream's message
text), ``JinjaLimitExceeded`` past ``RenderLimits`` (time, string size, total allocation; budget.py).
Compiled templates are cached by source. The caller's context is never changed: a template that
writes to it (``messages.pop()``, ``{% set m.content = ... %}``) works on a private copy, as
upstream's does (isolation.py).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jinja2

from .budget import Budget, RenderLimits, reset_budget, set_budget
from .codecache import compile_cached
from .environment import LlamaEnvironment
from .errors import (
    JinjaException,
    JinjaLimitExceeded,
    JinjaRuntimeError,
    JinjaSyntaxError,
    NotImplementedTemplateError,
    TemplateError,
)
from .globals import make_globals
from .isolation import CallerData, CopyNeeded, private_copy
from .locations import failure_location, located_message

DEFAULT_LIMITS = RenderLimits()


@functools.lru_cache(maxsize=1)
def _environment() -> LlamaEnvironment:
    return LlamaEnvironment()


@functools.lru_cache(maxsize=64)
def _compile(source: str) -> jinja2.Template:
    return compile_cached(_environment(), "render", source)


# Compiled templates known to write to their context: their renders copy it up front (isolation.py).
_WRITES_CONTEXT: weakref.WeakSet[jinja2.Template] = weakref.WeakSet()


@dataclass(frozen=True)
class CompiledTemplate:
    """A template compiled once; ``render`` may be called any number of times. ``context_source``
    is the text upstream's runtime holds for it (where its errors' locations point); None: ``source``."""

    source: str
    source_name: str
    template: jinja2.Template
    context_source: str | None = None

    def _failure(self, exc: Exception) -> JinjaRuntimeError:
        """Upstream's message for a render that raised ``exc``: located, unless it is upstream's
        NotImplemented (which passes its statements unlocated) or no node is found."""
        message = str(exc)
        where = None if isinstance(exc, NotImplementedTemplateError) else failure_location(exc)
        if where is None:
            return JinjaRuntimeError(message, self.source_name)
        shown = self.source if self.context_source is None else self.context_source
        text, line = located_message(message, where[0], where[1], self.source, shown)
        return JinjaRuntimeError(text, self.source_name, line)

    def render(self, context: Mapping[str, Any] | None = None, *, now: float | None = None,
               limits: RenderLimits | None = None) -> str:
        budget = Budget(limits or DEFAULT_LIMITS)
        data = context or {}
        if self.template not in _WRITES_CONTEXT:
            budget.caller = CallerData(data)
            try:
                return self.render_owned(data, now=now, budget=budget)
            except CopyNeeded:
                _WRITES_CONTEXT.add(self.template)
                budget.caller = None
        try:
            copied = private_copy(data)
        except JinjaLimitExceeded as exc:
            raise JinjaLimitExceeded(exc.reason, self.source_name) from None
        return self.render_owned(copied, now=now, budget=budget)

    def render_owned(self, context: Mapping[str, Any], *, now: float | None = None,
                     budget: Budget | None = None) -> str:
        """Render ``context`` as is: the template may change its containers (``render`` passes a
        private copy, or guards the caller's data through ``budget.caller``). Caps probing renders
        its own tracked values this way, all probes under one ``budget``."""
        budget = budget or Budget(DEFAULT_LIMITS)
        variables: dict[str, Any] = make_globals(now)
        variables.update(context)
        token = set_budget(budget)
        try:
            out: list[str] = []
            size = 0
            for chunk in self.template.generate(variables):
                size += len(chunk)
                budget.check_size(size)
                out.append(chunk)
            return "".join(out)
        except CopyNeeded:
            raise
        except JinjaLimitExceeded as exc:
            raise JinjaLimitExceeded(exc.reason, self.source_name) from None
        except (RecursionError, MemoryError):
            raise JinjaLimitExceeded("rendering recursed or allocated too deeply", self.source_name) from None
        except jinja2.TemplateSyntaxError as exc:
            raise JinjaSyntaxError(exc.message or str(exc), self.source_name, exc.lineno) from None
        except JinjaException:
            raise
        except (TemplateError, jinja2.TemplateError) as exc:
            raise self._failure(exc) from None
        except Exception as exc:  # noqa: BLE001 - any failure inside a template is the template's error
            raise JinjaRuntimeError(f"{type(exc).__name__}: {exc}", self.source_name) from None
        finally:
            reset_budget(token)


def compile_template(source: str, source_name: str = "<template>", *,
                     context_source: str | None = None) -> CompiledTemplate:
    """Compile ``source`` (cached by content). Raises JinjaSyntaxError naming ``source_name``.
    ``context_source``: see ``CompiledTemplate``."""
    try:
        template = _compile(source)
    except jinja2.TemplateSyntaxError as exc:
        raise JinjaSyntaxError(exc.message or str(exc), source_name, exc.lineno) from None
    except (TemplateError, jinja2.TemplateError) as exc:
        raise JinjaSyntaxError(str(exc), source_name) from None
    except RecursionError:
        raise JinjaLimitExceeded("template nests too deeply", source_name) from None
    return CompiledTemplate(source, source_name, template, context_source)


def render(source: str, context: Mapping[str, Any] | None = None, *, now: float | None = None,
           source_name: str = "<template>", limits: RenderLimits | None = None) -> str:
    """Compile (cached) and render ``source`` with ``context``; see the module docstring."""
    return compile_template(source, source_name).render(context, now=now, limits=limits)


__all__ = [
    "render",
    "compile_template",
    "CompiledTemplate",
    "RenderLimits",
    "JinjaException",
    "JinjaSyntaxError",
    "JinjaRuntimeError",
    "JinjaLimitExceeded",
    "NotImplementedTemplateError",
]
