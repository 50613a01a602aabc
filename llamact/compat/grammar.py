"""llama-cpp-python's ``LlamaGrammar``: a GBNF grammar, from text, a file or a JSON schema.

llamact's grammar is its GBNF text (the sampler compiles it); this class checks it when made, with
llamact's GBNF parser (the errors say where), and converts a JSON schema with llamact's converter,
byte-identical to llama.cpp's ``json_schema_to_grammar``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..grammar import json_schema_to_grammar, parse_gbnf

# any JSON value: llama-cpp-python's JSON_GBNF is this grammar's role (the schema {} converts to it)
JSON_GBNF = json_schema_to_grammar({})


class LlamaGrammar:
    """A checked GBNF grammar; pass it as ``grammar=`` to the completion calls."""

    def __init__(self, *, _grammar: str) -> None:
        parse_gbnf(_grammar)   # GbnfError (a LlamaException) with the line and column
        self._grammar = _grammar

    @classmethod
    def from_string(cls, grammar: str, verbose: bool = True) -> LlamaGrammar:
        del verbose   # llamact reports through exceptions and logging, not prints
        return cls(_grammar=grammar)

    @classmethod
    def from_file(cls, file: str | os.PathLike[str], verbose: bool = True) -> LlamaGrammar:
        with open(file, encoding="utf-8") as f:
            return cls.from_string(f.read(), verbose)

    @classmethod
    def from_json_schema(cls, json_schema: str | dict[str, Any], verbose: bool = True) -> LlamaGrammar:
        """``json_schema`` is JSON text (llama-cpp-python's) or an already parsed schema."""
        schema = json.loads(json_schema) if isinstance(json_schema, str) else json_schema
        return cls.from_string(json_schema_to_grammar(schema), verbose)

    @property
    def grammar(self) -> str:
        return self._grammar

    def __repr__(self) -> str:
        return f"LlamaGrammar({self._grammar[:60]!r}{'...' if len(self._grammar) > 60 else ''})"
