"""The autoparser's analysis as a value (upstream's ``struct autoparser`` and its parts, chat-auto-parser.h).

What the differential analysis concludes about a template, and all the generator reads. Field names
and enum values are upstream's, so that ``to_json()`` can be compared field by field with the oracle's
``analyze`` op (which dumps upstream's struct in the same shape) and a mismatch points at the phase
that caused it. ``from_json`` reads that shape back (the generator can be driven by upstream's own
analysis in tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ...json_types import Json

__all__ = [
    "AutoparserAnalysis", "CallIdPosition", "ContentAnalysis", "ContentMode", "ReasoningAnalysis", "ReasoningMode",
    "ToolArgumentsAnalysis", "ToolFormat", "ToolFormatAnalysis", "ToolFunctionAnalysis", "ToolIdAnalysis",
    "ToolsAnalysis",
]


class ReasoningMode:
    NONE = "NONE"
    TAG_BASED = "TAG_BASED"      # <think>...</think> (start may be empty: delimiter style)
    TOOLS_ONLY = "TOOLS_ONLY"    # reasoning only before tool calls


class ContentMode:
    PLAIN = "PLAIN"
    ALWAYS_WRAPPED = "ALWAYS_WRAPPED"
    WRAPPED_WITH_REASONING = "WRAPPED_WITH_REASONING"


class CallIdPosition:
    NONE = "NONE"
    PRE_FUNC_NAME = "PRE_FUNC_NAME"                  # [CALL_ID]id[FUNC]name{args}
    BETWEEN_FUNC_AND_ARGS = "BETWEEN_FUNC_AND_ARGS"  # [FUNC]name[CALL_ID]id{args}
    POST_ARGS = "POST_ARGS"                          # [FUNC]name{args}[CALL_ID]id


class ToolFormat:
    NONE = "NONE"
    JSON_NATIVE = "JSON_NATIVE"          # {"name": "X", "arguments": {...}}
    TAG_WITH_JSON = "TAG_WITH_JSON"      # <function=X>{...}</function>
    TAG_WITH_TAGGED = "TAG_WITH_TAGGED"  # <param=key>value</param>


class _Value:
    """to_json / from_json over the dataclass fields (nested values and lists of strings)."""

    def to_json(self) -> Json:
        out: dict[str, Json] = {}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            out[f.name] = value.to_json() if isinstance(value, _Value) else (
                list(value) if isinstance(value, tuple) else value)
        return out

    @classmethod
    def from_json(cls, data: Json) -> Any:
        kwargs: dict[str, Json] = {}
        for f in fields(cls):  # type: ignore[arg-type]
            if f.name not in data:
                continue
            value = data[f.name]
            nested = _NESTED.get((cls.__name__, f.name))
            if nested is not None:
                value = nested.from_json(value)
            elif isinstance(value, list):
                value = tuple(value)
            kwargs[f.name] = value
        return cls(**kwargs)


@dataclass(frozen=True)
class ToolFormatAnalysis(_Value):
    mode: str = ToolFormat.NONE
    section_start: str = ""     # "<tool_call>", "[TOOL_CALLS]", ""
    section_end: str = ""
    per_call_start: str = ""    # "<|tool_call_begin|>" (multi-call templates)
    per_call_end: str = ""
    fun_name_is_key: bool = False         # {"<name>": {...arguments...}}
    tools_array_wrapped: bool = False     # calls wrapped in a JSON array
    openai_wrapper_trigger: bool = False  # the model emits the OpenAI function wrapper: trigger on it
    function_field: str = "function"
    name_field: str = "name"
    args_field: str = "arguments"
    id_field: str = ""
    gen_id_field: str = ""
    parameter_order: tuple[str, ...] = ()


@dataclass(frozen=True)
class ToolFunctionAnalysis(_Value):
    name_prefix: str = ""     # "<function=", "\"name\": \"", "functions."
    name_suffix: str = ""     # ">", "\"", ":0"
    args_separator: str = ""  # "<tool_sep>"
    close: str = ""           # "</function>"


@dataclass(frozen=True)
class ToolArgumentsAnalysis(_Value):
    start: str = ""         # "<|tool_call_argument_begin|>", "<args>"
    end: str = ""
    name_prefix: str = ""   # "<param=", "<arg_key>", "\""
    name_suffix: str = ""   # ">", "</arg_key>", "\":"
    value_prefix: str = ""  # "", "<arg_value>"
    value_suffix: str = ""  # "</param>", "</arg_value>"
    separator: str = ""     # "", "\n", ","
    tolerate_intertag_whitespace: bool = False  # Laguna


@dataclass(frozen=True)
class ToolIdAnalysis(_Value):
    pos: str = CallIdPosition.NONE
    prefix: str = ""  # "[CALL_ID]"
    suffix: str = ""


@dataclass(frozen=True)
class ReasoningAnalysis(_Value):
    mode: str = ReasoningMode.NONE
    start: str = ""  # "<think>", "[THINK]", "<|START_THINKING|>", ""
    end: str = ""    # "</think>", "[BEGIN FINAL RESPONSE]", "<|END_THINKING|>"


@dataclass(frozen=True)
class ContentAnalysis(_Value):
    mode: str = ContentMode.PLAIN
    start: str = ""  # "<response>", ">>>all\n"
    end: str = ""
    requires_nonnull_content: bool = False


@dataclass(frozen=True)
class ToolsAnalysis(_Value):
    format: ToolFormatAnalysis = field(default_factory=ToolFormatAnalysis)
    function: ToolFunctionAnalysis = field(default_factory=ToolFunctionAnalysis)
    arguments: ToolArgumentsAnalysis = field(default_factory=ToolArgumentsAnalysis)
    call_id: ToolIdAnalysis = field(default_factory=ToolIdAnalysis)


@dataclass(frozen=True)
class AutoparserAnalysis(_Value):
    """Everything the analysis found (``struct autoparser``); ``jinja_caps`` is upstream's caps map."""

    jinja_caps: dict[str, bool] = field(default_factory=dict)
    user_start: str = ""
    assistant_start: str = ""
    reasoning: ReasoningAnalysis = field(default_factory=ReasoningAnalysis)
    content: ContentAnalysis = field(default_factory=ContentAnalysis)
    tools: ToolsAnalysis = field(default_factory=ToolsAnalysis)
    analysis_complete: bool = False
    preserved_tokens: tuple[str, ...] = ()
    additional_stops: tuple[str, ...] = ()  # literal stops (e.g. Laguna's </assistant>)

    def memo_key(self) -> object:
        """Its identity: an analysis is frozen and cached per template (chat/parser_memo.py)."""
        from ..parser_memo import Identity

        return Identity(self)


_NESTED: dict[tuple[str, str], type[_Value]] = {
    ("ToolsAnalysis", "format"): ToolFormatAnalysis,
    ("ToolsAnalysis", "function"): ToolFunctionAnalysis,
    ("ToolsAnalysis", "arguments"): ToolArgumentsAnalysis,
    ("ToolsAnalysis", "call_id"): ToolIdAnalysis,
    ("AutoparserAnalysis", "reasoning"): ReasoningAnalysis,
    ("AutoparserAnalysis", "content"): ContentAnalysis,
    ("AutoparserAnalysis", "tools"): ToolsAnalysis,
}
