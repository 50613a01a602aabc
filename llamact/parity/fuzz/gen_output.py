"""Model-like outputs for a template's parser: what a model might write after the generation prompt.

Four sources, mixed: the template's own rendering of a random assistant message (the text the
assistant turn adds, as the corpus synthesises it), random token soup from a real vocabulary
(SmolLM2's pieces, which split UTF-8 characters across tokens), the parser's own marker literals
and their fragments, and mutations of any of these (spans deleted, duplicated, swapped, markers
inserted, cut short). :func:`invalid_utf8` damages bytes for the raw executor, which takes bytes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

from ...json_types import Json
from .gen_conversation import random_json_value, random_text

__all__ = ["arena_markers", "assistant_message", "invalid_utf8", "marker_soup", "mutate_text", "token_soup"]

_BAD_BYTES = [b"\xff", b"\xfe", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x8e", b"\xc0\xaf", b"\xed\xa0\x80", b"\x80",
              b"\xbf\xbf", b"\xf4\x90\x80\x80", b"\x00"]


def arena_markers(arena: Json) -> list[str]:
    """Every literal and delimiter string in a parser arena's JSON (its markers: tags, keys, quotes)."""
    found: set[str] = set()

    def walk(node: Json) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("literal", "delimiter") and isinstance(value, str):
                    yield value
                elif key == "delimiters" and isinstance(value, list):
                    yield from (v for v in value if isinstance(v, str))
                else:
                    yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    found.update(m for m in walk(arena) if m)
    return sorted(found)


def assistant_message(rng: random.Random, tools: list[Json] | None) -> Json:
    """A random assistant message for the template to render (content, reasoning, tool calls)."""
    message: Json = {"role": "assistant", "content": random_text(rng, 6) if rng.random() < 0.8 else ""}
    if rng.random() < 0.4:
        message["reasoning_content"] = random_text(rng, 6)
    if tools and rng.random() < 0.6:
        calls = []
        for i in range(rng.choice([1, 1, 2, 3])):
            tool = rng.choice(tools)
            props = tool["function"].get("parameters", {}).get("properties", {})
            args = {name: _value_for(rng, schema) for name, schema in props.items() if rng.random() < 0.85}
            calls.append({"type": "function", "id": f"call_{i}",
                          "function": {"name": tool["function"]["name"], "arguments": json.dumps(args)}})
        message["tool_calls"] = calls
    return message


def _value_for(rng: random.Random, schema: Json) -> Json:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if rng.random() < 0.1:
        return random_json_value(rng)  # the wrong type now and then
    if "enum" in schema:
        return rng.choice(schema["enum"])
    return {"string": lambda: random_text(rng, 3), "integer": lambda: rng.randint(-99, 999),
            "number": lambda: round(rng.uniform(-10, 10), 2), "boolean": lambda: rng.random() < 0.5,
            "array": lambda: [random_text(rng, 1) for _ in range(rng.randint(0, 2))],
            "object": lambda: {"k": random_text(rng, 1)}}.get(str(kind), lambda: random_json_value(rng))()


def token_soup(rng: random.Random, pieces: list[bytes], markers: list[str]) -> bytes:
    out = []
    for _ in range(rng.randint(1, 40)):
        if markers and rng.random() < 0.15:
            out.append(rng.choice(markers).encode("utf-8"))
        else:
            out.append(rng.choice(pieces))
    return b"".join(out)


def marker_soup(rng: random.Random, markers: list[str]) -> str:
    out = []
    for _ in range(rng.randint(1, 12)):
        roll = rng.random()
        if markers and roll < 0.45:
            marker = rng.choice(markers)
            out.append(marker if rng.random() < 0.7 else marker[: rng.randint(0, len(marker))])
        elif roll < 0.7:
            out.append(json.dumps(random_json_value(rng), ensure_ascii=rng.random() < 0.2))
        else:
            out.append(random_text(rng, 3))
    return "".join(out)


def mutate_text(rng: random.Random, text: str, markers: list[str]) -> str:
    for _ in range(rng.randint(1, 3)):
        n = len(text)
        i, j = sorted((rng.randint(0, n), rng.randint(0, n)))
        roll = rng.random()
        if roll < 0.25:
            text = text[:i] + text[j:]
        elif roll < 0.4:
            text = text[:j] + text[i:j] + text[j:]
        elif roll < 0.6 and markers:
            marker = rng.choice(markers)
            if rng.random() < 0.3:
                marker = marker[: rng.randint(1, max(1, len(marker)))]
            text = text[:i] + marker + text[i:]
        elif roll < 0.75:
            text = text[:i]
        elif roll < 0.9:
            text = text[:i] + random_text(rng, 2) + text[i:]
        else:
            k = rng.randint(0, n)
            text = text[k:] + text[:k]
    return text


def invalid_utf8(rng: random.Random, data: bytes) -> bytes:
    for _ in range(rng.randint(1, 3)):
        i = rng.randint(0, len(data))
        data = data[:i] + rng.choice(_BAD_BYTES) + data[i:]
    return data
