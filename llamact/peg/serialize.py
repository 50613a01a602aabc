"""Upstream's PEG arena JSON (``common_peg_arena::to_json`` / ``from_json``, peg-parser.cpp).

The shape is ``{"parsers": [{"type": ..., ...}], "rules": {name: id}, "root": id}``; each node
carries its fields under their upstream names (``chars`` its ``ranges`` as ``[{start, end}]``,
``string`` its delimiter as a one-character string; ``schema`` only ``child``/``name``/``raw``:
the schema document is not serialised).

:func:`fields_from_json` takes the parsed JSON (or its text) and returns an arena's fields (nodes,
rules, root; ``arena.load_arena`` makes the :class:`~llamact.peg.arena.Arena`); it raises
:class:`PegArenaError` with upstream's message for every malformed input upstream rejects (plus a
few type checks upstream leaves to its JSON library). :func:`fields_to_json` returns the
parsed-JSON value upstream would produce for the same arena.
"""

from __future__ import annotations

import json
from typing import Any

from .nodes import (
    INVALID_PARSER_ID,
    TYPE_NAMES,
    Ac,
    And,
    Any_,
    Atomic,
    CharRange,
    Chars,
    Choice,
    End,
    Epsilon,
    Gbnf,
    Literal,
    Not,
    Parser,
    PegArenaError,
    Ref,
    Repetition,
    Rule,
    Schema,
    Sequence,
    Space,
    Start,
    String,
    Tag,
    Until,
)

_MAX_ID = (1 << 64) - 1


def _fail(message: str, **details: Any) -> PegArenaError:
    return PegArenaError(f"invalid PEG arena JSON: {message}", details)


def _id(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_ID:
        raise _fail(f"{what} must be a parser id (an unsigned integer), got {value!r}")
    return value


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -(1 << 31) <= value < (1 << 31):
        raise _fail(f"{what} must be an integer, got {value!r}")
    return value


def _bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(f"{what} must be a boolean, got {value!r}")
    return value


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise _fail(f"{what} must be a string, got {value!r}")
    return value


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _fail(f"{what} must be an array of strings")
    return tuple(_str(v, what) for v in value)


def _require(j: dict[str, Any], kind: str, *keys: str) -> None:
    missing = [k for k in keys if k not in j]
    if missing:
        raise _fail(f"{kind} parser missing required fields ({', '.join(missing)})", type=kind)


def parser_from_json(j: Any) -> Parser:
    """One node from its JSON object; raises PegArenaError for a malformed one."""
    if not isinstance(j, dict) or not isinstance(j.get("type"), str):
        raise _fail("Parser variant JSON missing or invalid 'type' field")
    kind: str = j["type"]
    simple: dict[str, Parser] = {"epsilon": Epsilon(), "start": Start(), "end": End(), "any": Any_(),
                                 "space": Space()}
    if kind in simple:
        return simple[kind]
    if kind == "literal":
        if not isinstance(j.get("literal"), str):
            raise _fail("literal parser missing or invalid 'literal' field")
        return Literal(j["literal"])
    if kind in ("sequence", "choice"):
        if not isinstance(j.get("children"), list):
            raise _fail(f"{kind} parser missing or invalid 'children' field")
        children = tuple(_id(c, f"{kind} child") for c in j["children"])
        return Sequence(children) if kind == "sequence" else Choice(children)
    if kind == "repetition":
        _require(j, kind, "child", "min_count", "max_count")
        return Repetition(_id(j["child"], "child"), _int(j["min_count"], "min_count"),
                          _int(j["max_count"], "max_count"))
    if kind in ("and", "not", "atomic"):
        _require(j, kind, "child")
        child = _id(j["child"], "child")
        return And(child) if kind == "and" else Not(child) if kind == "not" else Atomic(child)
    if kind == "chars":
        _require(j, kind, "pattern", "ranges", "negated", "min_count", "max_count")
        if not isinstance(j["ranges"], list):
            raise _fail("chars parser 'ranges' must be an array")
        ranges = []
        for r in j["ranges"]:
            if not isinstance(r, dict) or "start" not in r or "end" not in r:
                raise _fail("char_range missing 'start' or 'end' field")
            ranges.append(CharRange(_id(r["start"], "char_range start"), _id(r["end"], "char_range end")))
        return Chars(_str(j["pattern"], "pattern"), tuple(ranges), _bool(j["negated"], "negated"),
                     _int(j["min_count"], "min_count"), _int(j["max_count"], "max_count"))
    if kind == "string":
        if "delimiter" not in j:
            raise _fail("string parser missing delimiter field.")
        delimiter = _str(j["delimiter"], "delimiter")
        if not delimiter:
            raise _fail("string parser delimiter is empty.")
        return String(delimiter[0])
    if kind == "until":
        if not isinstance(j.get("delimiters"), list):
            raise _fail("until parser missing or invalid 'delimiters' field")
        return Until(_strings(j["delimiters"], "delimiters"))
    if kind == "schema":
        _require(j, kind, "child", "name", "raw")
        return Schema(_id(j["child"], "child"), _str(j["name"], "name"), _bool(j["raw"], "raw"))
    if kind == "rule":
        _require(j, kind, "name", "child", "trigger")
        return Rule(_str(j["name"], "name"), _id(j["child"], "child"), _bool(j["trigger"], "trigger"))
    if kind == "ref":
        if not isinstance(j.get("name"), str):
            raise _fail("ref parser missing or invalid 'name' field")
        return Ref(j["name"])
    if kind == "tag":
        _require(j, kind, "child", "tag")
        return Tag(_id(j["child"], "child"), _str(j["tag"], "tag"))
    if kind == "gbnf":
        _require(j, kind, "child", "grammar")
        return Gbnf(_id(j["child"], "child"), _str(j["grammar"], "grammar"))
    if kind == "ac":
        if "child" not in j or not isinstance(j.get("delimiters"), list) or not j["delimiters"]:
            raise _fail("ac parser requires 'child' and a non-empty 'delimiters' array")
        return Ac(_id(j["child"], "child"), _strings(j["delimiters"], "delimiters"))
    raise _fail(f"Unknown parser type: {kind}", type=kind)


def fields_from_json(obj: Any) -> tuple[tuple[Parser, ...], dict[str, int], int]:
    """An arena's nodes, rules and root from upstream's JSON (parsed, or as text); raises PegArenaError
    when malformed."""
    if isinstance(obj, (str, bytes)):
        try:
            obj = json.loads(obj)
        except ValueError as exc:
            raise _fail(f"not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise _fail("the arena must be a JSON object")
    if not isinstance(obj.get("parsers"), list):
        raise _fail("JSON missing or invalid 'parsers' array")
    if not isinstance(obj.get("rules"), dict):
        raise _fail("JSON missing or invalid 'rules' object")
    if "root" not in obj:
        raise _fail("JSON missing 'root' field")
    parsers = tuple(parser_from_json(p) for p in obj["parsers"])
    rules: dict[str, int] = {}
    for name, rule_id in obj["rules"].items():
        rules[name] = _id(rule_id, f"rule '{name}'")
        if rule_id >= len(parsers):
            raise _fail(f"Rule '{name}' references invalid parser ID: {rule_id}", rule=name)
    root = _id(obj["root"], "root")
    if root != INVALID_PARSER_ID and root >= len(parsers):
        raise _fail(f"Root references invalid parser ID: {root}")
    return parsers, rules, root


def parser_to_json(p: Parser) -> dict[str, Any]:
    """One node as upstream serialises it."""
    if isinstance(p, (Epsilon, Start, End, Any_, Space)):
        return {"type": TYPE_NAMES[type(p)]}
    if isinstance(p, Literal):
        return {"type": "literal", "literal": p.literal}
    if isinstance(p, (Sequence, Choice)):
        return {"type": "sequence" if isinstance(p, Sequence) else "choice", "children": list(p.children)}
    if isinstance(p, Repetition):
        return {"type": "repetition", "child": p.child, "min_count": p.min_count, "max_count": p.max_count}
    if isinstance(p, (And, Not, Atomic)):
        return {"type": TYPE_NAMES[type(p)], "child": p.child}
    if isinstance(p, Chars):
        return {"type": "chars", "pattern": p.pattern, "ranges": [{"start": r.start, "end": r.end} for r in p.ranges],
                "negated": p.negated, "min_count": p.min_count, "max_count": p.max_count}
    if isinstance(p, String):
        return {"type": "string", "delimiter": p.delimiter}
    if isinstance(p, Until):
        return {"type": "until", "delimiters": list(p.delimiters)}
    if isinstance(p, Schema):
        return {"type": "schema", "child": p.child, "name": p.name, "raw": p.raw}
    if isinstance(p, Rule):
        return {"type": "rule", "name": p.name, "child": p.child, "trigger": p.trigger}
    if isinstance(p, Ref):
        return {"type": "ref", "name": p.name}
    if isinstance(p, Tag):
        return {"type": "tag", "child": p.child, "tag": p.tag}
    if isinstance(p, Gbnf):
        return {"type": "gbnf", "child": p.child, "grammar": p.grammar}
    if isinstance(p, Ac):
        return {"type": "ac", "child": p.child, "delimiters": list(p.delimiters)}
    raise TypeError(f"not a PEG parser node: {p!r}")


def fields_to_json(parsers: tuple[Parser, ...], rules: dict[str, int], root: int) -> dict[str, Any]:
    """``{"parsers": [...], "rules": {...}, "root": id}`` as upstream's ``to_json()``."""
    return {"parsers": [parser_to_json(p) for p in parsers], "rules": dict(rules), "root": root}
