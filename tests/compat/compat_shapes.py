"""llama-cpp-python 0.3.x's result shapes (the TypedDicts of its llama_types.py), written compactly,
and a recursive checker.

A shape is: a type (``str``, ``int``, ``float``, ``bool``: exactly that type, so a numpy scalar or
a bool where an int belongs does not pass), ``None``, ``Lit(...)`` (one of these values),
``Opt(shape)`` (or None), ``Either(a, b)``, ``[shape]`` (a list of it), ``MapOf(shape)`` (a dict of
str to it), or a dict of key -> shape: a TypedDict, closed (no other keys), a key ending in "?"
NotRequired.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Lit:
    values: tuple[Any, ...]

    def __init__(self, *values: Any) -> None:
        object.__setattr__(self, "values", values)


@dataclass(frozen=True)
class Opt:
    shape: Any


@dataclass(frozen=True)
class Either:
    shapes: tuple[Any, ...]

    def __init__(self, *shapes: Any) -> None:
        object.__setattr__(self, "shapes", shapes)


@dataclass(frozen=True)
class MapOf:
    shape: Any


USAGE = {"prompt_tokens": int, "completion_tokens": int, "total_tokens": int}

COMPLETION_LOGPROBS = {"text_offset": [int], "token_logprobs": [Opt(float)], "tokens": [str],
                       "top_logprobs": [Opt(MapOf(float))]}

# CreateCompletionResponse; a stream's chunks have the same type (CreateCompletionStreamResponse)
COMPLETION = {
    "id": str, "object": Lit("text_completion"), "created": int, "model": str,
    "choices": [{"text": str, "index": int, "logprobs": Opt(COMPLETION_LOGPROBS),
                 "finish_reason": Opt(Lit("stop", "length"))}],
    "usage?": USAGE,
}

FUNCTION_CALL = {"name": str, "arguments": str}
TOOL_CALL = {"id": str, "type": Lit("function"), "function": FUNCTION_CALL}
TOP_LOGPROB = {"token": str, "logprob": float, "bytes": Opt([int])}
CHAT_LOGPROBS = {"content": Opt([{**TOP_LOGPROB, "top_logprobs": [TOP_LOGPROB]}]),
                 "refusal": Opt([{**TOP_LOGPROB, "top_logprobs": [TOP_LOGPROB]}])}

CHAT_COMPLETION = {
    "id": str, "object": Lit("chat.completion"), "created": int, "model": str,
    "choices": [{"index": int, "logprobs": Opt(CHAT_LOGPROBS), "finish_reason": Opt(str),
                 "message": {"content": Opt(str), "tool_calls?": [TOOL_CALL],
                             "role": Lit("assistant", "function"), "function_call?": FUNCTION_CALL}}],
    "usage": USAGE,
}

TOOL_CALL_CHUNK = {"index": int, "id?": str, "type": Lit("function"),
                   "function": {"name": Opt(str), "arguments": str}}
CHAT_CHUNK = {
    "id": str, "model": str, "object": Lit("chat.completion.chunk"), "created": int,
    "choices": [{"index": int,
                 "delta": {"content?": Opt(str), "function_call?": Opt(FUNCTION_CALL),
                           "tool_calls?": Opt([TOOL_CALL_CHUNK]),
                           "role?": Opt(Lit("system", "user", "assistant", "tool"))},
                 "finish_reason": Opt(Lit("stop", "length", "tool_calls", "function_call")),
                 "logprobs?": Opt(CHAT_LOGPROBS)}],
}

EMBEDDING_RESPONSE = {
    "object": Lit("list"), "model": str,
    "data": [{"index": int, "object": str, "embedding": Either([float], [[float]])}],
    "usage": {"prompt_tokens": int, "total_tokens": int},
}


def shape_errors(value: Any, shape: Any, path: str = "$") -> list[str]:
    """Every place where ``value`` departs from ``shape``, as "path: what" lines."""
    if shape is None:
        return [] if value is None else [f"{path}: {value!r} is not None"]
    if isinstance(shape, type):
        return [] if type(value) is shape else [f"{path}: {type(value).__name__} {value!r:.60} is not {shape.__name__}"]
    if isinstance(shape, Lit):
        return [] if value in shape.values else [f"{path}: {value!r} not one of {shape.values}"]
    if isinstance(shape, Opt):
        return [] if value is None else shape_errors(value, shape.shape, path)
    if isinstance(shape, Either):
        tries = [shape_errors(value, s, path) for s in shape.shapes]
        return [] if any(not t for t in tries) else min(tries, key=len)
    if isinstance(shape, list):
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__} is not a list"]
        return [e for i, item in enumerate(value) for e in shape_errors(item, shape[0], f"{path}[{i}]")]
    if isinstance(shape, MapOf):
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__} is not a dict"]
        return [e for k, v in value.items()
                for e in ([f"{path}: key {k!r} is not a str"] if type(k) is not str else [])
                + shape_errors(v, shape.shape, f"{path}[{k!r}]")]
    if isinstance(shape, dict):
        return _dict_errors(value, shape, path)
    raise TypeError(f"not a shape: {shape!r}")


def _dict_errors(value: Any, shape: dict[str, Any], path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: {type(value).__name__} is not a dict"]
    fields = {key.rstrip("?"): (sub, key.endswith("?")) for key, sub in shape.items()}
    errors = [f"{path}: unexpected key {key!r}" for key in value if key not in fields]
    for key, (sub, optional) in fields.items():
        if key in value:
            errors += shape_errors(value[key], sub, f"{path}.{key}")
        elif not optional:
            errors.append(f"{path}: missing key {key!r}")
    return errors


def assert_shape(value: Any, shape: Any) -> None:
    errors = shape_errors(value, shape)
    assert not errors, "not llama-cpp-python's shape:\n  " + "\n  ".join(errors)


def key_tree(value: Any) -> Any:
    """The keys and value types of ``value`` at every level (its structure without the values),
    for comparing two results key for key."""
    if isinstance(value, dict):
        return {k: key_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [key_tree(v) for v in value]
    return type(value).__name__
