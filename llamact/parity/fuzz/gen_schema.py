"""Random JSON schemas from a schema of schemas: the subset the converter supports, and invalid shapes.

:func:`schema` draws one node kind at a time from :data:`KINDS` (type keywords with their own
keywords, combinators, references into ``$defs`` / ``definitions``, literals) and, with a small
probability per node, breaks it: a keyword with the wrong JSON type, an unknown type name, an empty
combinator, a reference to nothing or outside the document, a pattern that is not a regex. Depth is
bounded, so every schema is small enough to shrink.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from ...json_types import Json
from .gen_conversation import random_json_value

__all__ = ["KINDS", "pattern", "schema"]

_PROP_NAMES = ["a", "b", "name", "age", "items", "x-y", "with space", "é", "$ref", "type", "1", ""]
_FORMATS = ["date", "time", "date-time", "uuid", "email", "uri", "unknown-format"]
_TYPES = ["null", "boolean", "number", "integer", "string", "array", "object"]


def _number(rng: random.Random, integer: bool) -> Json:
    roll = rng.random()
    if roll < 0.6:
        return rng.randint(-50, 50)
    if roll < 0.75:
        return rng.choice([0, -1, 1, 2**31 - 1, -(2**31), 2**53, 2**63 - 1, -(2**63), 10**20])
    value = round(rng.uniform(-100, 100), rng.randint(0, 3))
    return int(value) if integer and rng.random() < 0.5 else value


def pattern(rng: random.Random, depth: int = 0) -> str:
    """A regex in the dialect the converter reads (anchored mostly), sometimes beyond it."""
    atoms = ["a", "b", "0", ".", "\\.", "[a-z]", "[^0-9]", "[A-Za-z_-]", "\\-", " ", "é", "[0-9]", "x"]
    if rng.random() < 0.1:  # escapes upstream does not convert (the schema then accepts any string)
        atoms += ["\\d", "\\w", "\\s"]
    parts = []
    for _ in range(rng.randint(1, 4)):
        if depth < 2 and rng.random() < 0.2:
            inner = "|".join(pattern(rng, depth + 1).strip("^$") for _ in range(rng.randint(1, 3)))
            atom = f"({inner})" if rng.random() < 0.8 else f"(?:{inner})"
        else:
            atom = rng.choice(atoms)
        if rng.random() < 0.4:
            atom += rng.choice(["*", "+", "?", "{2}", "{1,3}", "{0,}", "{2,}", "*?"])
        parts.append(atom)
    body = "".join(parts)
    if rng.random() < 0.05:
        body = rng.choice(["(", ")", "[a-", "*a", "a{2", "\\", "a{3,1}"]) + body
    if rng.random() < 0.85:
        return "^" + body + "$"
    return body


def _string(rng: random.Random, depth: int) -> Json:
    node: Json = {"type": "string"}
    roll = rng.random()
    if roll < 0.3:
        node["minLength"] = rng.randint(0, 5)
        if rng.random() < 0.7:
            node["maxLength"] = node["minLength"] + rng.randint(0, 5)
    elif roll < 0.5:
        node["pattern"] = pattern(rng)
    elif roll < 0.65:
        node["format"] = rng.choice(_FORMATS)
    return node


def _numeric(rng: random.Random, depth: int) -> Json:
    integer = rng.random() < 0.6
    node: Json = {"type": "integer" if integer else "number"}
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if rng.random() < 0.3:
            node[key] = _number(rng, integer)
    return node


def _array(rng: random.Random, depth: int) -> Json:
    node: Json = {"type": "array"}
    if rng.random() < 0.7:
        node["items"] = schema(rng, depth + 1)
    if rng.random() < 0.2:
        node["prefixItems"] = [schema(rng, depth + 1) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.4:
        node["minItems"] = rng.randint(0, 4)
    if rng.random() < 0.3:
        node["maxItems"] = node.get("minItems", 0) + rng.randint(0, 4)
    return node


def _object(rng: random.Random, depth: int) -> Json:
    node: Json = {"type": "object"}
    names = rng.sample(_PROP_NAMES, rng.randint(0, 6))
    if names or rng.random() < 0.5:
        node["properties"] = {n: schema(rng, depth + 1) for n in names}
    if names and rng.random() < 0.6:
        node["required"] = [n for n in names if rng.random() < 0.5]
    if rng.random() < 0.4:
        node["additionalProperties"] = rng.random() < 0.5 if rng.random() < 0.6 else schema(rng, depth + 1)
    return node


def _combinator(rng: random.Random, depth: int) -> Json:
    key = rng.choice(["anyOf", "oneOf", "allOf"])
    return {key: [schema(rng, depth + 1) for _ in range(rng.randint(1, 3))]}


def _literal(rng: random.Random, depth: int) -> Json:
    if rng.random() < 0.5:
        return {"const": random_json_value(rng)}
    return {"enum": [random_json_value(rng) for _ in range(rng.randint(1, 4))]}


def _multi_type(rng: random.Random, depth: int) -> Json:
    return {"type": rng.sample(_TYPES, rng.randint(1, 3))}


def _plain(rng: random.Random, depth: int) -> Json:
    return rng.choice([{}, {"type": rng.choice(_TYPES)}, {"description": "d"}, {"type": "boolean"},
                       {"type": "null"}])


#: the schema of schemas: node kinds and their weights
KINDS: list[tuple[Callable[[random.Random, int], Json], float]] = [
    (_string, 3), (_numeric, 3), (_array, 2.5), (_object, 4), (_combinator, 1.5), (_literal, 1.5),
    (_multi_type, 0.7), (_plain, 1),
]


def _top(rng: random.Random) -> Json:
    """The root: an object or an array most of the time, as response formats and tools are."""
    return _object(rng, 0) if rng.random() < 0.75 else _array(rng, 0)

_BREAKS: list[Callable[[random.Random, Json], Json]] = [
    lambda rng, n: dict(n, type=rng.choice([5, "str", "float", [], ["string", "kaboom"], {"a": 1}])),
    lambda rng, n: dict(n, properties=rng.choice([[], "x", 3])),
    lambda rng, n: dict(n, required=rng.choice(["a", 3, {"a": 1}])),
    lambda rng, n: dict(n, items=rng.choice([3, "x", True])),
    lambda rng, n: dict(n, enum=rng.choice([[], "x", {}])),
    lambda rng, n: {rng.choice(["anyOf", "oneOf", "allOf"]): rng.choice([[], {}, "x"])},
    lambda rng, n: {"$ref": rng.choice(["#/$defs/missing", "https://example.com/s.json", "#/", 5, "#"])},
    lambda rng, n: dict(n, minLength=rng.choice(["a", -1, 1.5]), type="string"),
    lambda rng, n: dict(n, additionalProperties=rng.choice([3, "x"])),
    lambda rng, n: dict(n, pattern=rng.choice(["^(a$", "^a)$", "^*a$", "^[abc$", "^ab\\$"]), type="string"),
    lambda rng, n: dict(n, minimum=rng.choice(["0", None, []]), type="integer"),
]


def schema(rng: random.Random, depth: int = 0) -> Json:
    """One random schema node (a whole schema when ``depth`` is 0: then it may carry ``$defs``
    that nodes below refer to)."""
    if depth == 0 and rng.random() < 0.3:
        defs_key = rng.choice(["$defs", "definitions"])
        names = rng.sample(["A", "B", "node", "item"] + (["x~1", "a/b"] if rng.random() < 0.1 else []),
                           rng.randint(1, 2))
        root: Json = {defs_key: {n: schema(rng, 2) for n in names}}
        ref = {"$ref": f"#/{defs_key}/{rng.choice(names).replace('~', '~0').replace('/', '~1')}"}
        if rng.random() < 0.3:  # a recursive definition (a tree)
            root[defs_key][names[0]] = {"type": "object", "properties": {
                "value": schema(rng, 3), "children": {"type": "array", "items": dict(ref)}}}
        if rng.random() < 0.5:
            root.update(ref)
        else:
            root.update({"type": "object", "properties": {"child": ref}})
        return root
    if depth == 0 and rng.random() < 0.5:
        node = _top(rng)
    elif depth >= 4:
        node = _plain(rng, depth) if rng.random() < 0.5 else _string(rng, depth)
    else:
        kinds, weights = zip(*KINDS, strict=True)  # the schema of schemas
        node = rng.choices(kinds, weights)[0](rng, depth)
    if rng.random() < 0.03:
        node = rng.choice(_BREAKS)(rng, node)
    if rng.random() < 0.05:
        node["title"] = "T"
    return node
