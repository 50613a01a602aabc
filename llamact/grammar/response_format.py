"""``response_format``: the OpenAI-style request field, resolved to the JSON schema that constrains
the output (or to plain text).

What enters: ``None``, ``{"type": "text"}``, ``{"type": "json_object"}`` (optionally with a
``"schema"``, as llama.cpp's server accepts), ``{"type": "json_schema", "json_schema": {"schema":
..., "name"?, "description"?, "strict"?}}``, or a bare JSON schema (the plain-schema shortcut).
What leaves: a :class:`ResponseFormat`. What is raised: ``LlamaUnsupportedException`` for any other
shape, before any generation (docs/design.md deviation 8: upstream's server silently falls back to an
empty schema for some of these); :meth:`ResponseFormat.grammar` also raises it for a schema the
converter cannot represent, or represents with a grammar llama.cpp cannot use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import LlamaUnsupportedException

# Keys that make a bare object recognisably a JSON schema (the plain-schema shortcut).
_SCHEMA_KEYS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "$ref", "$defs",
    "definitions", "anyOf", "oneOf", "allOf", "enum", "const", "pattern", "format", "minimum", "maximum",
    "minLength", "maxLength", "minItems", "maxItems",
})
_JSON_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
_SHAPES = (
    '{"type": "text"}, {"type": "json_object"}, {"type": "json_schema", "json_schema": {"schema": {...}}} '
    "or a JSON schema object"
)


@dataclass(frozen=True)
class ResponseFormat:
    """The resolved request: ``schema`` is None for plain text."""

    kind: Literal["text", "json_object", "json_schema"]
    schema: Mapping[str, Any] | None = None
    name: str | None = None
    description: str | None = None
    strict: bool | None = None

    @property
    def constrained(self) -> bool:
        return self.schema is not None

    def grammar(self) -> str | None:
        """The GBNF grammar for the schema (None for text); raises LlamaUnsupportedException when
        the converter cannot represent the schema."""
        if self.schema is None:
            return None
        from .builder import json_schema_to_grammar
        from .gbnf import GbnfError, parse_gbnf

        grammar = json_schema_to_grammar(dict(self.schema))
        # Upstream's converter emits unusable grammars for a few schemas (e.g. minLength above
        # maxLength gives a {5,2} that llama.cpp's parser loops on). Refuse them here, before any
        # generation, rather than hang or fail in the sampler.
        try:
            parse_gbnf(grammar)
        except GbnfError as exc:
            raise LlamaUnsupportedException(
                f"the response_format schema converts to a grammar llama.cpp cannot use: {exc}",
                {"response_format_schema": dict(self.schema)},
            ) from exc
        return grammar


def _unsupported(message: str, value: object) -> LlamaUnsupportedException:
    return LlamaUnsupportedException(f"response_format {message}; accepted shapes: {_SHAPES}",
                                     {"response_format": value})


def _schema_object(value: object, where: str, whole: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _unsupported(f"{where} must be a JSON object (a schema), got {type(value).__name__}", whole)
    return value


def parse_response_format(value: object) -> ResponseFormat:
    """Resolve a ``response_format`` request field; see the module docstring."""
    if value is None:
        return ResponseFormat("text")
    if not isinstance(value, Mapping):
        raise _unsupported(f"must be a JSON object, got {type(value).__name__}", value)
    kind = value.get("type")
    if kind == "text":
        extra = set(value) - {"type"}
        if extra:
            raise _unsupported(f'of type "text" takes no other fields (got {", ".join(sorted(extra))})', value)
        return ResponseFormat("text")
    if kind == "json_object":
        extra = set(value) - {"type", "schema"}
        if extra:
            raise _unsupported(f'of type "json_object" takes only "schema" (got {", ".join(sorted(extra))})', value)
        return ResponseFormat("json_object", _schema_object(value.get("schema", {}), "schema", value))
    if kind == "json_schema":
        wrapper = value.get("json_schema")
        if not isinstance(wrapper, Mapping):
            raise _unsupported('of type "json_schema" needs a "json_schema" object', value)
        if "schema" not in wrapper:
            raise _unsupported('"json_schema" needs a "schema"', value)
        name, description, strict = wrapper.get("name"), wrapper.get("description"), wrapper.get("strict")
        if name is not None and not isinstance(name, str):
            raise _unsupported('"json_schema.name" must be a string', value)
        if description is not None and not isinstance(description, str):
            raise _unsupported('"json_schema.description" must be a string', value)
        if strict is not None and not isinstance(strict, bool):
            raise _unsupported('"json_schema.strict" must be true or false', value)
        schema = _schema_object(wrapper["schema"], "json_schema.schema", value)
        return ResponseFormat("json_schema", schema, name, description, strict)
    # The plain-schema shortcut: a schema given directly, recognised by a JSON-schema type (or a
    # list of them) or, without "type", by schema keywords.
    if isinstance(kind, list) or (isinstance(kind, str) and kind in _JSON_TYPES) or (
        kind is None and value.keys() & _SCHEMA_KEYS
    ):
        return ResponseFormat("json_schema", value)
    raise _unsupported(f"is not a recognised shape (type {kind!r})", value)
