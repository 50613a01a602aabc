"""Tool calls a model wrote as text (in ``content``) instead of returning them structured.

``find_text_calls(text, tools)`` finds calls that name one of the request's tools, in the shapes
small models write, and says for each how it was written, so that the bench can count the
malformations a recovery must handle:

* envelope (``kind``): ``tool_call_tag`` (``<tool_call>{...}</tool_call>``, the Hermes envelope the
  Qwen template asks for), ``fenced_json`` (a ```` ```json ```` / ```` ``` ```` block), ``bare_json``
  (an object in the prose), ``python_call`` (``name(arg=value, ...)``, BFCL's prompting style);
* ``fixes``: what had to be forgiven to read it: ``unclosed_tag``, ``trailing_comma``,
  ``python_literal`` (single quotes, ``True``/``None``), ``arguments_as_string``,
  ``key:<name>`` (``parameters`` / ``args`` / ``function`` ... in place of ``name``/``arguments``),
  ``name_as_key`` (``{"tool": {args}}``), ``flat_arguments`` (arguments beside ``name``),
  ``dotted_name`` (``math.factorial`` for the tool ``math_factorial``), ``positional_args``.

This is a detector for measuring, not the product's recovery: nothing here is validated against
the tools' schemas (the BFCL scorer judges the calls afterwards).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

ARGUMENT_KEYS = ("arguments", "parameters", "args", "params", "input", "kwargs")
NAME_KEYS = ("name", "function", "tool", "tool_name", "function_name")


@dataclass
class TextCall:
    name: str
    arguments: dict[str, Any]
    kind: str
    fixes: list[str] = field(default_factory=list)

    def as_output(self) -> dict[str, Any]:
        """The call as BFCL's decoded output: ``{name: arguments}``."""
        return {self.name: self.arguments}


def _tool_names(tools: list[dict[str, Any]]) -> dict[str, str]:
    """Every spelling of a tool's name that counts -> the tool's name (``a_b`` also as ``a.b``)."""
    names: dict[str, str] = {}
    for tool in tools:
        name = tool["function"]["name"]
        names[name] = name
    return names


def _canonical(name: Any, names: dict[str, str], fixes: list[str]) -> str | None:
    if not isinstance(name, str):
        return None
    if name in names:
        return names[name]
    dotless = name.replace(".", "_")
    if dotless in names:
        fixes.append("dotted_name")
        return names[dotless]
    return None


def lenient_json(text: str) -> tuple[Any, list[str]] | None:
    """``text`` as JSON, or as JSON with trailing commas, or as a Python literal; None if none."""
    try:
        return json.loads(text), []
    except ValueError:
        pass
    fixed = re.sub(r",\s*([}\]])", r"\1", text)
    if fixed != text:
        try:
            return json.loads(fixed), ["trailing_comma"]
        except ValueError:
            pass
    pythonic = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", re.sub(r"\bnull\b", "None", text)))
    for candidate in (text, pythonic):
        try:
            value = ast.literal_eval(candidate)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, (dict, list)):
            return _jsonable(value), ["python_literal"]
    return None


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _balanced_end(text: str, start: int) -> int | None:
    """The index after the bracket that closes ``text[start]`` (``{`` or ``[``), quotes respected."""
    pairs = {"{": "}", "[": "]", "(": ")"}
    stack: list[str] = []
    quote: str | None = None
    i = start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in pairs:
            stack.append(pairs[ch])
        elif ch in ")]}":
            if not stack or stack.pop() != ch:
                return None
            if not stack:
                return i + 1
        i += 1
    return None


Found = list[tuple[str, dict[str, Any], list[str]]]   # (tool name, arguments, fixes)


def _calls_from_value(value: Any, names: dict[str, str], fixes: list[str]) -> Found:
    """A parsed object (or a list of them) read as calls naming given tools; [] if it is none."""
    if isinstance(value, list):
        found = []
        for item in value:
            found += _calls_from_value(item, names, fixes)
        return found
    if not isinstance(value, dict):
        return []
    fx = list(fixes)
    name_key = next((k for k in NAME_KEYS if k in value), None)
    if name_key == "function" and isinstance(value["function"], dict):   # OpenAI's {"function": {...}}
        return _calls_from_value(value["function"], names, fx + ["key:function"])
    if name_key is not None:
        name = _canonical(value[name_key], names, fx)
        if name is None:
            return []
        if name_key != "name":
            fx.append(f"key:{name_key}")
        args_key = next((k for k in ARGUMENT_KEYS if k in value), None)
        if args_key is None:
            args = {k: v for k, v in value.items() if k != name_key}
            if args:
                fx.append("flat_arguments")
        else:
            if args_key != "arguments":
                fx.append(f"key:{args_key}")
            args = value[args_key]
            if isinstance(args, str):
                parsed = lenient_json(args)
                if parsed is None or not isinstance(parsed[0], dict):
                    return []
                args = parsed[0]
                fx += ["arguments_as_string", *parsed[1]]
        return [(name, args, fx)] if isinstance(args, dict) else []
    if len(value) == 1:   # {"tool_name": {args}}
        (key, args), = value.items()
        name = _canonical(key, names, fx)
        if name is not None and isinstance(args, dict):
            return [(name, args, fx + ["name_as_key"])]
    return []


def _envelope(text: str, start: int) -> tuple[str, list[str]]:
    before = text[:start]
    opened = before.rfind("<tool_call>")
    if opened >= 0 and before.rfind("</tool_call>") < opened:
        return "tool_call_tag", ([] if "</tool_call>" in text[start:] else ["unclosed_tag"])
    if before.count("```") % 2 == 1:
        return "fenced_json", []
    return "bare_json", []


def _python_calls(text: str, names: dict[str, str]) -> list[TextCall]:
    spellings = sorted({*names, *(n.replace("_", ".") for n in names)}, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w.])(" + "|".join(re.escape(s) for s in spellings) + r")\s*\(")
    found: list[TextCall] = []
    for match in pattern.finditer(text):
        end = _balanced_end(text, match.end() - 1)
        if end is None:
            continue
        try:
            call = ast.parse(text[match.start():end].replace(match.group(1), "f", 1), mode="eval").body
        except SyntaxError:
            continue
        if not isinstance(call, ast.Call):
            continue
        fixes: list[str] = []
        name = _canonical(match.group(1), names, fixes)
        assert name is not None
        try:
            args = {kw.arg: _jsonable(ast.literal_eval(kw.value)) for kw in call.keywords if kw.arg}
            positional = [_jsonable(ast.literal_eval(a)) for a in call.args]
        except (ValueError, SyntaxError, TypeError):
            continue
        if positional:
            fixes.append("positional_args")
            args = {"__positional__": positional, **args}
        found.append(TextCall(name, args, "python_call", fixes))
    return found


def find_text_calls(text: str, tools: list[dict[str, Any]]) -> list[TextCall]:
    """The calls naming one of ``tools`` written in ``text``, in order."""
    if not text:
        return []
    names = _tool_names(tools)
    found: list[TextCall] = []
    i = 0
    while i < len(text):
        if text[i] not in "{[":
            i += 1
            continue
        end = _balanced_end(text, i)
        if end is None:
            i += 1
            continue
        parsed = lenient_json(text[i:end])
        calls = _calls_from_value(parsed[0], names, parsed[1]) if parsed is not None else []
        if calls:
            kind, envelope_fixes = _envelope(text, i)
            found += [TextCall(name, args, kind, envelope_fixes + fixes) for name, args, fixes in calls]
            i = end
        else:
            i += 1
    if not found:
        found = [positional_to_named(call, tools) for call in _python_calls(text, names)]
    return found


def positional_to_named(call: TextCall, tools: list[dict[str, Any]]) -> TextCall:
    """Positional arguments given names in the order the tool declares its parameters."""
    if "__positional__" not in call.arguments:
        return call
    tool = next(t for t in tools if t["function"]["name"] == call.name)
    order = list(tool["function"]["parameters"].get("properties", {}))
    args = {k: v for k, v in call.arguments.items() if k != "__positional__"}
    for key, value in zip(order, call.arguments["__positional__"], strict=False):
        args.setdefault(key, value)
    return TextCall(call.name, args, call.kind, call.fixes)
