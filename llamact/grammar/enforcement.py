"""What the grammar a schema converts to cannot enforce.

    unenforced_keyword(schema) -> (path, keyword) | None     the first keyword the converter ignores

The converter (``grammar.schema``) reads the keywords upstream's converter reads and skips the
others (``multipleOf``, ``not``, ``uniqueItems``, number bounds, an unknown ``format``...), so a
schema using them constrains less than it says. Deviation 8 (docs/design.md) refuses such a schema
before generating, where a caller relies on the answer: ``create_structured``, and ``create()`` /
the server unless told to accept llama-server's leniency.

The walk is a loop over an explicit stack: a schema nested thousands deep (a hostile request) gets
an answer, not a ``RecursionError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import LlamaUnsupportedException

__all__ = ["refuse_unenforced", "unenforced_keyword"]

# Keywords the GBNF converter does not read
_UNENFORCED = frozenset({
    "not", "if", "then", "else", "multipleOf", "dependentSchemas", "dependentRequired", "dependencies",
    "patternProperties", "propertyNames", "contains", "minContains", "maxContains", "uniqueItems",
    "unevaluatedProperties", "unevaluatedItems", "contentSchema", "contentEncoding", "contentMediaType",
    "minProperties", "maxProperties",
})
_FORMATS = frozenset({"date", "time", "date-time", "uuid", "uuid1", "uuid2", "uuid3", "uuid4", "uuid5"})
_NUMBER_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
# keywords whose value is a map of names to schemas, or a list of schemas, or one schema
_SCHEMA_MAPS = ("properties", "$defs", "definitions")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties")


def _subschemas(schema: Mapping[str, Any], path: str) -> list[tuple[Any, str]]:
    out: list[tuple[Any, str]] = []
    for key in _SCHEMA_MAPS:
        value = schema.get(key)
        if isinstance(value, Mapping):
            out += [(sub, f"{path}/{key}/{name}") for name, sub in value.items()]
    for key in _SCHEMA_LISTS:
        value = schema.get(key)
        if isinstance(value, list):
            out += [(sub, f"{path}/{key}/{i}") for i, sub in enumerate(value)]
    for key in _SCHEMA_ONE:
        if key in schema:
            out.append((schema[key], f"{path}/{key}"))
    return out


def _own_unenforced(schema: Mapping[str, Any]) -> str | None:
    for key in schema:
        if key in _UNENFORCED:
            return str(key)
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt not in _FORMATS and schema.get("type") == "string":
        return f"format: {fmt}"
    types = schema.get("type")
    if types == "number" or (isinstance(types, list) and "number" in types):
        for key in _NUMBER_BOUNDS:
            if key in schema:
                return f"{key} on a number"
    return None


def unenforced_keyword(schema: Any) -> tuple[str, str] | None:
    """The first (JSON pointer, keyword) in ``schema`` that the grammar would not enforce, in
    document order, or None."""
    todo: list[tuple[Any, str]] = [(schema, "#")]
    while todo:
        node, path = todo.pop()
        if not isinstance(node, Mapping):
            continue
        found = _own_unenforced(node)
        if found is not None:
            return path, found
        todo.extend(reversed(_subschemas(node, path)))
    return None


def refuse_unenforced(schema: Any, remedy: str) -> None:
    """Raise ``LlamaUnsupportedException`` naming the first keyword of ``schema`` the grammar would
    not enforce (nothing for None or a schema without one); ``remedy`` says how to accept it anyway."""
    if schema is None:
        return
    found = unenforced_keyword(schema)
    if found is not None:
        path, keyword = found
        raise LlamaUnsupportedException(
            f"the response schema's {keyword!r} at {path} cannot be enforced by the grammar, so the answer could "
            f"break it (docs/design.md deviation 8); remove it, or {remedy}", {"path": path, "keyword": keyword})
