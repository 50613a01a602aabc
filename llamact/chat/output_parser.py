"""Model output -> chat message through a template's PEG parser (upstream's ``common_chat_peg_parse``).

The text is prefixed with the generation prompt (the part of the prompt the parser expects to
see again, e.g. an opened ``<think>``), parsed leniently, and the AST mapped to a message by the
format's mapper. A parse that fails raises :class:`ChatParseError` with upstream's message, except
for partial output that matched something (then whatever was recognised so far is returned).

:class:`ChatOutputParser` is the streaming form: feed it the whole output so far after each token;
it resumes the parse where appended text cannot change it (see ``llamact.peg.executor``) and gives
the same messages as a fresh parse.
"""

from __future__ import annotations

from typing import Any

from ..errors import LlamaInferenceException
from ..peg.arena import Arena, load_arena
from ..peg.executor import CompiledParser, IncrementalParser, ParseResult, recursion_budget
from .messages import ChatMessage
from .peg_builder import build_chat_peg_parser
from .peg_mappers import mapper_for_format

#: upstream's parser when a template has none
CONTENT_ONLY_ARENA = build_chat_peg_parser(lambda p: p.content(p.rest()) + p.end())


class ChatParseError(LlamaInferenceException):
    """The model's output does not match the format its chat template expects."""


def compile_parser(parser: Arena | CompiledParser | dict[str, Any] | str | None) -> CompiledParser:
    """A template's parser (Arena, upstream's arena JSON, or None/empty for content only), compiled."""
    if isinstance(parser, CompiledParser):
        return parser
    if parser is None or parser == "" or (isinstance(parser, Arena) and parser.empty):
        return CompiledParser(CONTENT_ONLY_ARENA)
    arena = parser if isinstance(parser, Arena) else load_arena(parser)
    return CompiledParser(arena if not arena.empty else CONTENT_ONLY_ARENA)


class ChatOutputParser:
    """Parses one model output as it grows (or once, whole) into :class:`ChatMessage` values.

    ``parser`` is the template's arena (an :class:`Arena`, upstream's arena JSON, or None for
    content only); ``format`` the chat format name (it picks the mapper: "peg-gemma4",
    "peg-minimax-m3", or the generic one); ``generation_prompt`` is prefixed to every text.
    """

    def __init__(self, parser: Arena | CompiledParser | dict[str, Any] | str | None, format: str = "Content-only",
                 generation_prompt: str = "") -> None:
        self.format = format
        self.generation_prompt = generation_prompt
        self._prompt_bytes = generation_prompt.encode("utf-8")
        self._mapper = mapper_for_format(format)
        self._incremental = IncrementalParser(compile_parser(parser), lenient=True)
        #: the raw PEG result of the last parse (set even when it raised): its AST nodes carry
        #: what the message flattens, e.g. where each thought starts and ends
        self.last_result: ParseResult | None = None

    @property
    def compiled(self) -> CompiledParser:
        """The compiled parser, to share with another ChatOutputParser of the same template."""
        return self._incremental.compiled

    def parse(self, text: str | bytes, is_partial: bool) -> ChatMessage:
        """The message for the output ``text`` so far (``is_partial``: more may follow). ``text``
        may be the output's UTF-8 bytes: a stream that keeps them saves encoding the whole output
        again on every token."""
        return self.message(self.run(text), is_partial)

    def run(self, text: str | bytes) -> ParseResult:
        """The raw PEG parse of the output ``text`` so far (prompt prefixed), no message mapped."""
        if isinstance(text, str):
            data = (self.generation_prompt + text).encode("utf-8") if self.generation_prompt else text.encode("utf-8")
        else:
            data = self._prompt_bytes + text if self._prompt_bytes else text
        result = self._incremental.parse(data)
        self.last_result = result
        return result

    def message(self, result: ParseResult, is_partial: bool) -> ChatMessage:
        """The message of a parse result of :meth:`run`; raises ChatParseError as upstream's parse
        does (a failed parse, unless partial output matched something)."""
        self.check(result, is_partial)
        with recursion_budget:
            message = self._mapper(result.nodes)
        message.role = "assistant"
        return message

    def check(self, result: ParseResult, is_partial: bool) -> None:
        """Raise ChatParseError (upstream's message) where upstream's parse throws for ``result``."""
        if result.fail and not (is_partial and result.end > 0):
            raise ChatParseError(
                f"The model produced output that does not match the expected {self.format} format",
                {"format": self.format, "position": result.end},
            )


def parse_chat_output(text: str, is_partial: bool, parser: Arena | CompiledParser | dict[str, Any] | str | None,
                      format: str = "Content-only", generation_prompt: str = "") -> ChatMessage:
    """One parse of ``text`` (upstream's ``common_chat_parse``); raises ChatParseError."""
    return ChatOutputParser(parser, format, generation_prompt).parse(text, is_partial)
