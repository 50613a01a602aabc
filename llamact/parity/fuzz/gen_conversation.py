"""Random conversations and tool sets in OpenAI's JSON shape, as chat templates receive them.

What leaves :func:`conversation` / :func:`tools`: JSON values, mostly well-formed (roles that
alternate, tool results after tool calls) so that templates render them, sometimes not (a
template's own ``raise_exception`` is worth reaching too). Texts mix plain words, whitespace,
JSON-looking and marker-looking fragments and non-ASCII.
"""

from __future__ import annotations

import random
import string

from ...json_types import Json

__all__ = ["conversation", "random_text", "random_json_value", "tools"]

WORDS = ["hello", "Paris", "weather", "the", "a", "calculate", "2+2", "think", "yes", "no", "tool", "result",
         "function", "name", "arguments", "user", "assistant", "system", "content", "null", "true", "false"]
FRAGMENTS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "{", "}", "[", "]", '"', "\\", "\n", "\n\n",
             "  ", "\t", "<|im_end|>", "<|eot_id|>", "[TOOL_CALLS]", "```json", "```", ":", ",", "{{", "}}", "{%",
             "%}", "<", ">", "</s>", "<s>", "'", "é", "世界", "🎉", "\u200b", "\r\n", "<|channel|>", "analysis"]
TOOL_NAMES = ["get_weather", "calc", "search", "x", "tool_1", "a-b", "very_long_function_name_for_testing", "f"]
PARAM_NAMES = ["city", "unit", "expression", "query", "n", "flag", "items", "options", "x"]


def random_text(rng: random.Random, max_parts: int = 8) -> str:
    parts = []
    for _ in range(rng.randint(0, max_parts)):
        roll = rng.random()
        if roll < 0.55:
            parts.append(rng.choice(WORDS))
        elif roll < 0.8:
            parts.append(rng.choice(FRAGMENTS))
        elif roll < 0.9:
            parts.append("".join(rng.choice(string.printable) for _ in range(rng.randint(1, 6))))
        else:
            low, high = rng.choice([(0x20, 0x7E), (0xA0, 0x2FFF), (0x1F300, 0x1F64F)])
            parts.append(chr(rng.randint(low, high)))
        if rng.random() < 0.6:
            parts.append(" ")
    return "".join(parts)


def random_json_value(rng: random.Random, depth: int = 0) -> Json:
    roll = rng.random()
    if depth > 2 or roll < 0.5:
        return rng.choice([
            lambda: random_text(rng, 3), lambda: rng.randint(-1000, 1000), lambda: round(rng.uniform(-100, 100), 3),
            lambda: rng.random() < 0.5, lambda: None, lambda: rng.choice(["", "0", "1.5", "true"]),
        ])()
    if roll < 0.75:
        return [random_json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(PARAM_NAMES): random_json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def _param_schema(rng: random.Random) -> Json:
    kind = rng.choice(["string", "integer", "number", "boolean", "array", "object", "enum"])
    if kind == "enum":
        return {"type": "string", "enum": [rng.choice(WORDS) for _ in range(rng.randint(1, 3))]}
    schema: Json = {"type": kind}
    if kind == "array":
        schema["items"] = {"type": rng.choice(["string", "integer"])}
    if kind == "object":
        schema["properties"] = {"k": {"type": "string"}}
    if rng.random() < 0.5:
        schema["description"] = random_text(rng, 3)
    return schema


def tools(rng: random.Random) -> list[Json]:
    out = []
    names = rng.sample(TOOL_NAMES, rng.randint(1, 3))
    for name in names:
        params = rng.sample(PARAM_NAMES, rng.randint(0, 3))
        function: Json = {"name": name}
        if rng.random() < 0.8:
            function["description"] = random_text(rng, 4)
        function["parameters"] = {"type": "object", "properties": {p: _param_schema(rng) for p in params},
                                  "required": [p for p in params if rng.random() < 0.5]}
        out.append({"type": "function", "function": function})
    return out


def _arguments(rng: random.Random, tool: Json | None) -> Json:
    if tool is not None and rng.random() < 0.8:
        props = tool["function"]["parameters"]["properties"]
        args = {name: random_json_value(rng, 1) for name in props if rng.random() < 0.8}
    else:
        args = {rng.choice(PARAM_NAMES): random_json_value(rng, 1)}
    if rng.random() < 0.3:  # arguments as a JSON string, as OpenAI clients send them
        import json

        return json.dumps(args, ensure_ascii=False)
    return args


def _content(rng: random.Random) -> Json:
    roll = rng.random()
    if roll < 0.75:
        return random_text(rng)
    if roll < 0.9:
        return [{"type": "text", "text": random_text(rng, 4)} for _ in range(rng.randint(1, 3))]
    return rng.choice([None, ""])


def conversation(rng: random.Random, tool_set: list[Json] | None) -> list[Json]:
    """Messages: optionally a system message, then user/assistant turns (assistant turns may carry
    reasoning and tool calls followed by tool results); occasionally broken on purpose."""
    messages: list[Json] = []
    if rng.random() < 0.4:
        messages.append({"role": "system", "content": _content(rng)})
    for turn in range(rng.randint(1, 4)):
        messages.append({"role": "user", "content": _content(rng)})
        if turn == 0 and rng.random() < 0.3:
            break
        assistant: Json = {"role": "assistant", "content": _content(rng)}
        if rng.random() < 0.3:
            assistant["reasoning_content"] = random_text(rng, 5)
        calls = []
        if tool_set and rng.random() < 0.5:
            for i in range(rng.choice([1, 1, 2])):
                tool = rng.choice(tool_set)
                call: Json = {"type": "function",
                              "function": {"name": tool["function"]["name"], "arguments": _arguments(rng, tool)}}
                if rng.random() < 0.7:
                    call["id"] = f"call_{rng.randint(0, 99999)}_{i}"
                calls.append(call)
            assistant["tool_calls"] = calls
        messages.append(assistant)
        for call in calls:
            result: Json = {"role": "tool", "content": random_text(rng, 4)}
            if "id" in call:
                result["tool_call_id"] = call["id"]
            if rng.random() < 0.3:
                result["name"] = call["function"]["name"]
            messages.append(result)
    if rng.random() < 0.1:  # broken on purpose: a role out of order, or an unknown one
        index = rng.randrange(len(messages) + 1)
        messages.insert(index, {"role": rng.choice(["user", "assistant", "tool", "developer", "other"]),
                                "content": random_text(rng, 3)})
    return messages
