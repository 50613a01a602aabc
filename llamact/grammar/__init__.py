"""Grammars: JSON schema -> GBNF, byte-identical to upstream llama.cpp's converter.

Public names: :func:`json_schema_to_grammar`, :class:`GrammarBuilder` / :func:`build_grammar`
(the builder the PEG layer uses), :func:`schema_from_json` (the schema model) with its node types,
:func:`gbnf_format_literal`, and the errors (both ``LlamaUnsupportedException``); the GBNF toolkit
on Lark: :func:`parse_gbnf` / :func:`format_gbnf` / :class:`GbnfError` and :class:`GbnfAcceptor`
(is a string in a grammar's language, or a viable prefix); ``response_format`` resolution.
"""

from __future__ import annotations

from .acceptor import GbnfAcceptor
from .builder import GrammarBuilder, build_grammar, json_schema_to_grammar, schema_document_to_grammar
from .converter import GrammarConversionError, SchemaConverter
from .converter import format_literal as gbnf_format_literal
from .gbnf import GbnfError, format_gbnf, parse_gbnf
from .response_format import ResponseFormat, parse_response_format
from .schema import SchemaDocument, SchemaError, SchemaNode, schema_from_json

__all__ = [
    "GbnfAcceptor",
    "GbnfError",
    "ResponseFormat",
    "format_gbnf",
    "parse_gbnf",
    "parse_response_format",
    "GrammarBuilder",
    "GrammarConversionError",
    "SchemaConverter",
    "SchemaDocument",
    "SchemaError",
    "SchemaNode",
    "build_grammar",
    "gbnf_format_literal",
    "json_schema_to_grammar",
    "schema_document_to_grammar",
    "schema_from_json",
]
