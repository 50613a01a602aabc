"""The JSON-schema model: the subset of JSON schema that the GBNF converter understands.

Mirrors upstream's ``common_chat_schema_from_json`` (common/json-schema.cpp). What enters: a JSON
schema as a Python JSON value (see :mod:`.json_value` for how numbers are read). What leaves: a
:class:`SchemaDocument` -- a tree of :class:`SchemaNode` values plus the targets of every
``$ref``. What is raised: :class:`SchemaError` (a ``LlamaUnsupportedException``) with upstream's
message ``JSON schema error at PATH: MESSAGE`` when the schema falls outside the subset; ``details``
names the node's ``path``, the offending ``keyword`` (where one is to blame) and the ``pointer`` to it.

Precedence, as upstream: ``$ref`` > ``oneOf``/``anyOf`` > ``type`` array (one alternative per
type) > ``const`` > ``enum`` > the typed / structural keywords. Ignored keywords (number bounds,
``multipleOf``, ``not``, ``patternProperties``, ...) are simply not read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import LlamaUnsupportedException
from .json_value import is_integer, is_number, normalize, to_int32, to_int64

__all__ = [
    "INT64_MAX", "INT64_MIN", "AllOfSchema", "AnyOfSchema", "AnySchema", "ArraySchema", "BooleanSchema",
    "ConstSchema", "EnumSchema", "IntegerSchema", "NullSchema", "NumberSchema", "ObjectSchema", "Property",
    "RefSchema", "SchemaDocument", "SchemaError", "SchemaNode", "StringSchema", "TupleSchema",
    "schema_from_json",
]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

FORMAT_NONE, FORMAT_UUID, FORMAT_DATE, FORMAT_TIME, FORMAT_DATE_TIME = "", "uuid", "date", "time", "date-time"

ALL_TYPES = frozenset({"null", "boolean", "number", "integer", "string", "array", "object"})


class SchemaError(LlamaUnsupportedException):
    """The schema is outside the supported subset (upstream throws ``std::runtime_error``)."""


@dataclass(eq=False)
class SchemaNode:
    """A node of the model; ``path`` is where it sits in the schema (``#/properties/a``)."""

    path: str = field(default="#", kw_only=True)
    kind = "?"

    def value_types(self) -> frozenset[str]:
        """The JSON types a matching value may have (upstream's ``value_types``)."""
        return _value_types(self, set())

    def may_be_string(self) -> bool:
        """Whether a matching value may be a string, through any branch."""
        return _may_be_string(self, set())


@dataclass(eq=False)
class AnySchema(SchemaNode):
    kind = "any"


@dataclass(eq=False)
class RefSchema(SchemaNode):
    ref: str = ""
    target: SchemaNode | None = None
    kind = "ref"


@dataclass(eq=False)
class AnyOfSchema(SchemaNode):
    children: list[SchemaNode] = field(default_factory=list)
    kind = "anyOf"


@dataclass(eq=False)
class AllOfSchema(SchemaNode):
    children: list[SchemaNode] = field(default_factory=list)
    kind = "allOf"


@dataclass(eq=False)
class ConstSchema(SchemaNode):
    value: Any = None
    kind = "const"


@dataclass(eq=False)
class EnumSchema(SchemaNode):
    values: list[Any] = field(default_factory=list)
    kind = "enum"


@dataclass(eq=False)
class NullSchema(SchemaNode):
    kind = "null"


@dataclass(eq=False)
class BooleanSchema(SchemaNode):
    kind = "boolean"


@dataclass(eq=False)
class NumberSchema(SchemaNode):
    kind = "number"


@dataclass(eq=False)
class IntegerSchema(SchemaNode):
    """Inclusive bounds (exclusive ones folded in); INT64_MIN / INT64_MAX for unbounded."""

    minimum: int = INT64_MIN
    maximum: int = INT64_MAX
    kind = "integer"


@dataclass(eq=False)
class StringSchema(SchemaNode):
    pattern: str = ""  # empty when absent
    format: str = FORMAT_NONE
    min_length: int = 0
    max_length: int = -1  # -1 for unbounded
    kind = "string"


@dataclass(eq=False)
class ArraySchema(SchemaNode):
    items: SchemaNode = field(default_factory=AnySchema)
    min_items: int = 0
    max_items: int = -1  # -1 for unbounded
    kind = "array"


@dataclass(eq=False)
class TupleSchema(SchemaNode):
    items: list[SchemaNode] = field(default_factory=list)
    kind = "tuple"


@dataclass(eq=False)
class Property:
    name: str
    schema: SchemaNode
    required: bool = False


@dataclass(eq=False)
class ObjectSchema(SchemaNode):
    properties: list[Property] = field(default_factory=list)
    additional_properties: SchemaNode | None = None  # None when not allowed
    kind = "object"


@dataclass(eq=False)
class SchemaDocument:
    root: SchemaNode
    refs: dict[str, SchemaNode]


#: the deepest JSON nesting of a schema converted (objects and arrays: ``properties`` and its schema
#: are two levels). The converter recurses per level and upstream's has no bound; a schema nested
#: thousands deep (a hostile request) is refused here instead of overflowing Python's stack.
MAX_SCHEMA_DEPTH = 128


def check_schema_depth(schema: Any, limit: int = MAX_SCHEMA_DEPTH) -> None:
    """Raise :class:`SchemaError` when objects and arrays in ``schema`` nest deeper than ``limit``
    (a loop over an explicit stack, so any depth gets this answer)."""
    todo: list[tuple[Any, int]] = [(schema, 1)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            raise SchemaError(f"JSON schema error at #: the schema nests deeper than {limit} levels of objects "
                              "and arrays, the most llamact converts (flatten it, or name repeated parts in $defs "
                              "and use $ref)", {"path": "#", "pointer": "#", "limit": limit})
        todo.extend((child, depth + 1) for child in children)


def schema_from_json(schema: Any) -> SchemaDocument:
    """Build the model of ``schema``; raises :class:`SchemaError` (see the module docstring)."""
    check_schema_depth(schema)
    root_json = normalize(schema)
    return _Builder(root_json).build()


def _fail(path: str, message: str, keyword: str | None = None) -> SchemaError:
    details: dict[str, Any] = {"path": path, "pointer": path}
    if keyword is not None:
        details["keyword"] = keyword
        segments = path.split("/")
        # a path that already ends at the keyword (#/anyOf, #/type/1) is its pointer
        if segments[-1] != keyword and not (len(segments) > 2 and segments[-2] == keyword):
            details["pointer"] = f"{path}/{keyword}"
    return SchemaError(f"JSON schema error at {path}: {message}", details)


def _get_count(schema: dict[str, Any], key: str, path: str, default: int) -> int:
    if key not in schema:
        return default
    value = schema[key]
    if not is_integer(value) or to_int32(value) < 0:
        raise _fail(path, f"{key} must be a non-negative integer", key)
    return to_int32(value)


def _get_bound(schema: dict[str, Any], key: str, path: str, round_up: bool) -> int:
    """A fractional bound is rounded inwards, towards the integers it still admits."""
    value = schema[key]
    if is_integer(value):
        return to_int64(value)
    if not is_number(value):
        raise _fail(path, f"{key} must be a number", key)
    rounded = math.ceil(value) if round_up else math.floor(value)
    # an out-of-range double -> int64_t conversion gives INT64_MIN on the x86 builds upstream runs on
    return rounded if INT64_MIN <= rounded <= INT64_MAX else INT64_MIN


def _get_format(schema: dict[str, Any], path: str) -> str:
    if "format" not in schema:
        return FORMAT_NONE
    value = schema["format"]
    if not isinstance(value, str):
        raise _fail(path, "format must be a string", "format")
    if value in ("date", "time", "date-time"):
        return value
    if value == "uuid" or (len(value.encode("utf-8")) == 5 and value[:4] == "uuid" and "1" <= value[4] <= "5"):
        return FORMAT_UUID
    return FORMAT_NONE


def _stoull(text: str) -> int | None:
    """``std::stoull``: leading blanks, a sign, digits (a minus wraps); None where it throws."""
    s = text.lstrip(" \t\n\v\f\r")
    negative = s[:1] == "-"
    if s[:1] in "+-" and s:
        s = s[1:]
    n = 0
    while n < len(s) and "0" <= s[n] <= "9":
        n += 1
    if n == 0:
        return None
    value = int(s[:n])
    if value >= 2**64:
        return None
    return (-value) % 2**64 if negative else value


class _Builder:
    def __init__(self, root: Any) -> None:
        self._root = root
        self._refs: dict[str, SchemaNode | None] = {}
        self._pending: list[RefSchema] = []

    def build(self) -> SchemaDocument:
        node = self._node(self._root, "#")
        refs = {key: target for key, target in sorted(self._refs.items()) if target is not None}
        for ref in self._pending:
            ref.target = refs.get(ref.ref)
        return SchemaDocument(node, refs)

    def _resolve_ref(self, ref: str, path: str) -> Any:
        target = self._root
        for sel in ref[1:].split("/")[1:]:
            if isinstance(target, dict) and sel in target:
                target = target[sel]
            elif isinstance(target, list):
                idx = _stoull(sel)
                if idx is None:
                    idx = len(target)
                if idx >= len(target):
                    raise _fail(path, f"cannot resolve $ref {ref}, {sel} is out of range", "$ref")
                target = target[idx]
            else:
                raise _fail(path, f"cannot resolve $ref {ref}, {sel} not found", "$ref")
        return target

    def _ref(self, value: Any, path: str) -> SchemaNode:
        if not isinstance(value, str):
            raise _fail(path, "$ref must be a string", "$ref")
        if not value.startswith("#/"):
            raise _fail(path, f"unsupported $ref {value}, only references into the same document are supported",
                        "$ref")
        if value not in self._refs:
            self._refs[value] = None  # reserved first, so that a cycle back to this $ref stops here
            self._refs[value] = self._node(self._resolve_ref(value, path), value)
        node = RefSchema(ref=value, path=path)
        self._pending.append(node)
        return node

    def _alternatives(self, cls: type[AnyOfSchema] | type[AllOfSchema], alts: Any, path: str) -> SchemaNode:
        keyword = path.rsplit("/", 1)[-1]
        if not isinstance(alts, list):
            raise _fail(path, "must be an array of schemas", keyword)
        if not alts:
            raise _fail(path, "must not be empty", keyword)
        return cls(children=[self._node(alt, f"{path}/{i}") for i, alt in enumerate(alts)], path=path)

    def _object(self, schema: dict[str, Any], path: str) -> SchemaNode:
        node = ObjectSchema(path=path)
        required: set[str] = set()
        if isinstance(schema.get("required"), list):
            required = {name for name in schema["required"] if isinstance(name, str)}
        if "properties" in schema:
            properties = schema["properties"]
            if not isinstance(properties, dict):
                raise _fail(path, "properties must be an object", "properties")
            for name, prop in properties.items():
                node.properties.append(Property(name, self._node(prop, f"{path}/properties/{name}"), name in required))
        if "additionalProperties" in schema:
            additional = schema["additionalProperties"]
            if isinstance(additional, bool):
                if additional:
                    node.additional_properties = AnySchema(path=f"{path}/additionalProperties")
            elif isinstance(additional, dict):
                node.additional_properties = self._node(additional, f"{path}/additionalProperties")
            else:
                raise _fail(path, "additionalProperties must be a boolean or a schema", "additionalProperties")
        elif "properties" not in schema:
            node.additional_properties = AnySchema(path=path)  # {"type": "object"} accepts any object
        return node

    def _array(self, schema: dict[str, Any], path: str) -> SchemaNode:
        node = ArraySchema(path=path)
        if "items" in schema or "prefixItems" in schema:
            key = "items" if "items" in schema else "prefixItems"
            items = schema[key]
            if isinstance(items, list):
                return TupleSchema(items=[self._node(item, f"{path}/{key}/{i}") for i, item in enumerate(items)],
                                   path=path)
            node.items = self._node(items, f"{path}/{key}")
        node.min_items = _get_count(schema, "minItems", path, 0)
        node.max_items = _get_count(schema, "maxItems", path, -1)
        return node

    def _string(self, schema: dict[str, Any], path: str) -> SchemaNode:
        node = StringSchema(path=path)
        if "pattern" in schema:
            pattern = schema["pattern"]
            if not isinstance(pattern, str):
                raise _fail(path, "pattern must be a string", "pattern")
            node.pattern = pattern
        node.format = _get_format(schema, path)
        node.min_length = _get_count(schema, "minLength", path, 0)
        node.max_length = _get_count(schema, "maxLength", path, -1)
        return node

    def _integer(self, schema: dict[str, Any], path: str) -> SchemaNode:
        node = IntegerSchema(path=path)
        if "minimum" in schema:
            node.minimum = _get_bound(schema, "minimum", path, True)
        elif "exclusiveMinimum" in schema:
            node.minimum = to_int64(_get_bound(schema, "exclusiveMinimum", path, False) + 1)
        if "maximum" in schema:
            node.maximum = _get_bound(schema, "maximum", path, False)
        elif "exclusiveMaximum" in schema:
            node.maximum = to_int64(_get_bound(schema, "exclusiveMaximum", path, True) - 1)
        return node

    def _node(self, schema: Any, path: str) -> SchemaNode:
        if not isinstance(schema, dict):
            raise _fail(path, "schema must be an object")
        if "$ref" in schema:
            return self._ref(schema["$ref"], path)
        if "oneOf" in schema or "anyOf" in schema:
            key = "oneOf" if "oneOf" in schema else "anyOf"
            return self._alternatives(AnyOfSchema, schema[key], f"{path}/{key}")

        type_ = schema.get("type")
        if isinstance(type_, list):
            # {"type": ["a", "b"], ...} is {"anyOf": [{"type": "a", ...}, {"type": "b", ...}]}
            if not type_:
                raise _fail(path, "type must not be empty", "type")
            children = []
            for i, t in enumerate(type_):
                alt = dict(schema)
                alt["type"] = t
                children.append(self._node(alt, f"{path}/type/{i}"))
            return AnyOfSchema(children=children, path=path)
        if "const" in schema:
            return ConstSchema(value=schema["const"], path=path)
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise _fail(path, "enum must be a non-empty array", "enum")
            return EnumSchema(values=list(values), path=path)
        if type_ is not None and not isinstance(type_, str):
            raise _fail(path, "type must be a string or an array of strings", "type")

        type_name = type_ if isinstance(type_, str) else ""
        has_properties = "properties" in schema or (
            "additionalProperties" in schema and schema["additionalProperties"] is not True)

        if not type_name:
            # without a type the structural keywords decide, in the same order as the converter
            if has_properties:
                return self._object(schema, path)
            if "allOf" in schema:
                return self._alternatives(AllOfSchema, schema["allOf"], f"{path}/allOf")
            if "items" in schema or "prefixItems" in schema:
                return self._array(schema, path)
            if ("pattern" in schema or "minLength" in schema or "maxLength" in schema
                    or _get_format(schema, path) != FORMAT_NONE):
                return self._string(schema, path)
            return AnySchema(path=path)
        if type_name == "object":
            if not has_properties and "allOf" in schema:
                return self._alternatives(AllOfSchema, schema["allOf"], f"{path}/allOf")
            return self._object(schema, path)
        if type_name == "string":
            if "allOf" in schema:
                return self._alternatives(AllOfSchema, schema["allOf"], f"{path}/allOf")
            return self._string(schema, path)
        if type_name == "array":
            return self._array(schema, path)
        if type_name == "integer":
            return self._integer(schema, path)
        simple: dict[str, type[SchemaNode]] = {"number": NumberSchema, "boolean": BooleanSchema, "null": NullSchema}
        if type_name in simple:
            return simple[type_name](path=path)
        raise _fail(path, f"unrecognized type {type_name}", "type")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if is_integer(value):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


_FIXED_TYPES = {
    "any": ALL_TYPES, "null": frozenset({"null"}), "boolean": frozenset({"boolean"}),
    "number": frozenset({"number", "integer"}), "integer": frozenset({"integer"}), "string": frozenset({"string"}),
    "array": frozenset({"array"}), "tuple": frozenset({"array"}), "object": frozenset({"object"}),
}


def _value_types(node: SchemaNode, visited: set[int]) -> frozenset[str]:
    if node.kind in _FIXED_TYPES:
        return _FIXED_TYPES[node.kind]
    if isinstance(node, ConstSchema):
        return frozenset({_json_type(node.value)})
    if isinstance(node, EnumSchema):
        return frozenset(_json_type(v) for v in node.values)
    if isinstance(node, RefSchema):
        target = node.target
        if target is None or id(target) in visited:
            return frozenset()  # a cycle contributes no type, to be safe
        visited.add(id(target))
        types = _value_types(target, visited)
        visited.discard(id(target))
        return types
    if isinstance(node, AnyOfSchema):
        out: frozenset[str] = frozenset()
        for child in node.children:
            out |= _value_types(child, visited)
        return out
    if isinstance(node, AllOfSchema):
        out = ALL_TYPES
        for child in node.children:
            out &= _value_types(child, visited)
        return out
    return frozenset()


def _may_be_string(node: SchemaNode, visited: set[int]) -> bool:
    if isinstance(node, StringSchema):
        return True
    if isinstance(node, ConstSchema):
        return isinstance(node.value, str)
    if isinstance(node, EnumSchema):
        return any(isinstance(v, str) for v in node.values)
    if isinstance(node, RefSchema):
        target = node.target
        if target is None or id(target) in visited:
            return False  # a cycle is taken as not a string, to be safe
        visited.add(id(target))
        result = _may_be_string(target, visited)
        visited.discard(id(target))
        return result
    if isinstance(node, AnyOfSchema):
        return any(_may_be_string(child, visited) for child in node.children)
    if isinstance(node, AllOfSchema):
        any_string = False
        for child in node.children:
            if isinstance(child, AnySchema):
                continue
            if not _may_be_string(child, visited):
                return False
            any_string = True
        return any_string
    return False
