"""Tag extraction with a small PEG parser (upstream's ``tagged_peg_parser``).

The autoparser probes rendered templates with throwaway parsers such as
``tag("pre", marker() + space()) + literal(X) + tag("post", ...) + rest()`` and reads back each
tag's text. :meth:`TaggedPegParser.parse_anywhere_and_extract` tries every start byte in turn, as
upstream does; one resumable parser serves all starts, so results that do not depend on the start
are computed once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..peg.arena import Arena
from ..peg.builder import P, ParserBuilder, build_peg_parser
from ..peg.executor import CompiledParser, IncrementalParser, ParseResult
from .peg_mappers import map_tags


@dataclass(frozen=True)
class TaggedParse:
    """A parse result and each tag's text (the last node with the tag wins; missing tags are absent)."""

    result: ParseResult
    tags: dict[str, str]


class TaggedPegParser:
    """An arena whose parses are read back as tags. Parses are strict (not lenient) unless asked."""

    def __init__(self, arena: Arena | CompiledParser, lenient: bool = False) -> None:
        self.compiled = arena if isinstance(arena, CompiledParser) else CompiledParser(arena)
        self.lenient = lenient

    def parse_and_extract(self, text: str | bytes, lenient: bool | None = None) -> TaggedParse:
        """Parse ``text`` from its start; ``lenient`` adds upstream's LENIENT flag for this parse."""
        parser = IncrementalParser(self.compiled, lenient=self.lenient if lenient is None else lenient)
        result = parser.parse(text)
        return TaggedParse(result, map_tags(result.nodes))

    def parse_anywhere_and_extract(self, text: str | bytes) -> TaggedParse:
        """The first start byte at which the parse succeeds, else the parse from the last byte."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        if not data:
            return self.parse_and_extract(data)
        parser = IncrementalParser(self.compiled, lenient=self.lenient)
        for start in range(len(data)):
            result = parser.parse(data, start)
            if result.success or start == len(data) - 1:
                return TaggedParse(result, map_tags(result.nodes))
        raise AssertionError("unreachable: the loop returns at the last byte")


def build_tagged_peg_parser(fn: Callable[[ParserBuilder], P]) -> TaggedPegParser:
    """A tagged parser from a builder function (upstream's ``build_tagged_peg_parser``)."""
    return TaggedPegParser(build_peg_parser(fn))
