"""Typed structured output: an answer shaped by a schema and returned as a Python object.

    engine.create_structured(messages, output=Answer)     -> an Answer
    parse_structured_json(stream, output=Answer)          -> an Answer, from a create() stream

``output`` is a pydantic model class, a ``TypedDict`` or dataclass (anything pydantic's
``TypeAdapter`` takes), or a JSON schema dict. Its schema goes to the request's ``response_format``,
so the grammar constrains generation; the answer is then validated (pydantic, or ``jsonschema`` for
a dict schema) and converted. A schema keyword the grammar converter does not enforce raises
``LlamaUnsupportedException`` before anything is generated (docs/design.md deviation 8): a validated
answer must never depend on the tiny model's luck. An answer that is cut off or fails validation
raises ``LlamaInferenceException`` with the raw text in ``details["raw"]``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import jsonschema
from pydantic import TypeAdapter, ValidationError

from ..errors import LlamaArgumentException, LlamaInferenceException, LlamaUnsupportedException
from ..grammar.enforcement import refuse_unenforced
from ..json_types import Json

__all__ = ["parse_structured_json", "response_format_for", "schema_for", "validate_output"]

def schema_for(output: Any) -> Json:
    """The JSON schema of ``output`` (a dict schema is returned as is); raises
    LlamaUnsupportedException for a type pydantic cannot describe or a keyword the grammar would not
    enforce."""
    if isinstance(output, Mapping):
        schema: Json = dict(output)
    else:
        try:
            schema = TypeAdapter(output).json_schema()
        except Exception as exc:
            raise LlamaUnsupportedException(f"cannot derive a JSON schema from {output!r}: {exc}",
                                            {"output": repr(output)}) from exc
    refuse_unenforced(schema, "validate that part yourself")
    return schema


def response_format_for(output: Any) -> Json:
    """The ``response_format`` that constrains a reply to ``output``'s schema."""
    name = getattr(output, "__name__", "output")
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema_for(output)}}


def validate_output(output: Any, text: str, finish_reason: str | None = None) -> Any:
    """``text`` parsed and validated as ``output`` (a dict schema gives the parsed JSON value)."""
    details = {"raw": text, "finish_reason": finish_reason}
    if finish_reason not in (None, "stop"):
        if finish_reason == "length" and text.endswith("\ufffd"):
            # max_tokens cut a character in two: the reply shows its bytes as U+FFFD (llama-server's
            # text); the raw answer here is the whole characters generated
            details["raw"] = text[:-1]
        raise LlamaInferenceException(
            f"the structured answer ended early (finish_reason {finish_reason!r}); raise max_tokens", details)
    try:
        if isinstance(output, Mapping):
            value = json.loads(text)
            jsonschema.validate(value, dict(output))
            return value
        return TypeAdapter(output).validate_json(text)
    except (ValueError, ValidationError, jsonschema.ValidationError) as exc:
        raise LlamaInferenceException(f"the answer does not match the requested schema: {exc}", details) from exc


def parse_structured_json(stream: Iterable[Any], output: Any = None) -> Any:
    """Run an already started ``create()`` stream (one made with a ``response_format``) to its end
    and return its answer.

    Args:
        stream: the ``ChatStream`` from ``create(..., response_format=...)``.
        output: what to validate the answer as (a pydantic model class, a TypedDict or dataclass, a
            JSON schema dict); None: return the parsed JSON value.

    Raises:
        LlamaRequestException: ``stream`` is not a ``create()`` stream.
        LlamaInferenceException: the answer is not JSON, was cut off, or fails validation (the raw
            text in ``details["raw"]``).
    """
    completion = getattr(stream, "completion", None)
    if completion is None:
        raise LlamaArgumentException("parse_structured_json needs a create() stream")
    reply = completion()
    if output is None:
        try:
            return json.loads(reply.content)
        except ValueError as exc:
            raise LlamaInferenceException(f"the answer is not JSON: {exc}",
                                          {"raw": reply.content, "finish_reason": reply.finish_reason}) from exc
    return validate_output(output, reply.content, reply.finish_reason)
