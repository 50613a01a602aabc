"""What applying a chat template produces (upstream's ``common_chat_params``, chat.h).

:class:`ChatParams` is the mutable value the format builders fill in, field by field, as upstream's
builders do; :class:`ChatTemplateResult` is the frozen value the pipeline hands out, with the
detected ``family`` added. ``to_json()`` gives the oracle's ``chat_apply`` answer shape (key order
included), and :meth:`ChatTemplateResult.output_parser` the streaming parser for the model's output.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ..json_types import Json
from ..peg.arena import Arena
from .output_parser import ChatOutputParser

__all__ = [
    "FORMAT_CONTENT_ONLY", "FORMAT_PEG_GEMMA4", "FORMAT_PEG_MINIMAX_M3", "FORMAT_PEG_NATIVE", "FORMAT_PEG_SIMPLE",
    "ChatParams", "ChatTemplateResult", "GrammarTrigger", "MessageDelimiter",
]

# upstream's five chat format names (common_chat_format_name); they only choose the output mapper
FORMAT_CONTENT_ONLY = "Content-only"
FORMAT_PEG_SIMPLE = "peg-simple"
FORMAT_PEG_NATIVE = "peg-native"
FORMAT_PEG_GEMMA4 = "peg-gemma4"
FORMAT_PEG_MINIMAX_M3 = "peg-minimax-m3"

TOKEN_NULL = -1


@dataclass(frozen=True)
class GrammarTrigger:
    """What makes a lazy grammar start: ``type`` is "word", "pattern", "pattern_full" or "token"."""

    type: str
    value: str
    token: int = TOKEN_NULL

    def to_json(self) -> Json:
        return {"type": self.type, "value": self.value, "token": self.token}


@dataclass(frozen=True)
class MessageDelimiter:
    """Where a message of ``role`` starts in a rendered prompt (used to split prompts into turns)."""

    role: str
    delimiter: str

    def to_json(self) -> Json:
        return {"role": self.role, "delimiter": self.delimiter}


@dataclass
class ChatParams:
    """``common_chat_params``, filled in by a format builder."""

    format: str = FORMAT_CONTENT_ONLY
    prompt: str = ""
    grammar: str = ""
    grammar_lazy: bool = False
    generation_prompt: str = ""
    supports_thinking: bool = False
    thinking_start_tag: str = ""
    thinking_end_tags: list[str] = field(default_factory=list)
    grammar_triggers: list[GrammarTrigger] = field(default_factory=list)
    preserved_tokens: list[str] = field(default_factory=list)
    additional_stops: list[str] = field(default_factory=list)
    parser: Arena | None = None
    message_delimiters: list[MessageDelimiter] = field(default_factory=list)

    def delimiters(self, *pairs: tuple[str, str]) -> None:
        """Set the message delimiters from (role, delimiter) pairs."""
        self.message_delimiters = [MessageDelimiter(role, delim) for role, delim in pairs]


@dataclass(frozen=True)
class ChatTemplateResult:
    """The prompt and everything generation and parsing need, for one request.

    ``format`` is upstream's format name; ``family`` a stable name of the detected template family
    ("gpt_oss", "qwen3_coder_xml", "gemma4", ..., "autoparser", "content_only") for diagnostics.
    ``parser`` is the PEG arena (None: content only); its JSON equals upstream's.

    ``named_tool`` is the function a named ``tool_choice`` forces (docs/design.md deviation 9; None
    otherwise): then ``grammar`` admits only an immediate call of it (after the template's own
    thought, where it has one) and is not lazy, and ``parser`` is the ``"required"`` parser for all
    the request's tools. See ``named_tool.py`` for how the engine wires it.
    """

    format: str
    family: str
    prompt: str
    generation_prompt: str
    grammar: str
    grammar_lazy: bool
    grammar_triggers: tuple[GrammarTrigger, ...]
    preserved_tokens: tuple[str, ...]
    additional_stops: tuple[str, ...]
    supports_thinking: bool
    thinking_start_tag: str
    thinking_end_tags: tuple[str, ...]
    parser: Arena | None
    message_delimiters: tuple[MessageDelimiter, ...]
    named_tool: str | None = None

    @classmethod
    def from_params(cls, params: ChatParams, family: str) -> ChatTemplateResult:
        values = {f.name: getattr(params, f.name) for f in fields(ChatParams)}
        for name, value in values.items():
            if isinstance(value, list):
                values[name] = tuple(value)
        if values["parser"] is not None and values["parser"].empty:
            values["parser"] = None
        return cls(family=family, **values)

    def output_parser(self) -> ChatOutputParser:
        """A streaming parser for the model's output under this result (resumable; see ChatOutputParser)."""
        return ChatOutputParser(self.parser, self.format, self.generation_prompt)

    def to_json(self) -> Json:
        """The oracle's ``chat_apply`` answer shape (``params_to_json`` in tests/oracle/oracle.cpp);
        ``named_tool`` has no upstream counterpart and is left out."""
        return {
            "format": self.format,
            "prompt": self.prompt,
            "generation_prompt": self.generation_prompt,
            "grammar": self.grammar,
            "grammar_lazy": self.grammar_lazy,
            "grammar_triggers": [t.to_json() for t in self.grammar_triggers],
            "preserved_tokens": list(self.preserved_tokens),
            "additional_stops": list(self.additional_stops),
            "supports_thinking": self.supports_thinking,
            "thinking_start_tag": self.thinking_start_tag,
            "thinking_end_tags": list(self.thinking_end_tags),
            "parser": self.parser.to_json() if self.parser is not None else None,
            "message_delimiters": [d.to_json() for d in self.message_delimiters],
        }
