"""The entry points: ``json_schema_to_grammar`` and the grammar builder used by the PEG layer.

* :func:`json_schema_to_grammar` -- what enters: a JSON schema (Python JSON value) and
  ``force_gbnf`` (no effect: llamact has no llguidance, so the answer is always GBNF, as
  upstream built without ``LLAMA_USE_LLGUIDANCE``). What leaves: the GBNF grammar text, byte-identical
  to upstream's ``json_schema_to_grammar``. What is raised: ``LlamaUnsupportedException``
  (:class:`~.schema.SchemaError` or :class:`~.converter.GrammarConversionError`) whose message is
  upstream's (``JSON schema conversion failed:\\n...``) and names where in the schema the problem is.
* :class:`GrammarBuilder` / :func:`build_grammar` -- upstream's ``common_grammar_builder`` /
  ``build_grammar``: rules and schema nodes added by a callback into one grammar.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .converter import ConverterRuntimeError, GrammarConversionError, SchemaConverter
from .schema import SchemaDocument, SchemaError, SchemaNode, schema_from_json

__all__ = ["GrammarBuilder", "build_grammar", "json_schema_to_grammar", "schema_document_to_grammar"]

_FAILED = "JSON schema conversion failed:\n"


def json_schema_to_grammar(schema: Any, force_gbnf: bool = False) -> str:
    """The GBNF grammar for ``schema`` (see the module docstring)."""
    del force_gbnf  # GBNF is the only output this build has
    try:
        document = schema_from_json(schema)
    except SchemaError as exc:
        where = exc.details.get("pointer", "#")
        suffix = f"\n(keyword {exc.details['keyword']!r} at {where})" if "keyword" in exc.details else ""
        raise SchemaError(_FAILED + exc.message + suffix, exc.details) from None
    try:
        return schema_document_to_grammar(document)
    except ConverterRuntimeError as exc:
        raise GrammarConversionError(_FAILED + exc.message, exc.details) from None


def schema_document_to_grammar(document: SchemaDocument) -> str:
    """The grammar for an already built schema model; raises GrammarConversionError."""
    converter = SchemaConverter(dotall=False)
    converter.visit(document.root, "")
    converter.check_errors()
    return converter.format_grammar()


class GrammarBuilder:
    """Rules and schemas added into one grammar (upstream's ``common_grammar_builder``)."""

    def __init__(self, dotall: bool = False) -> None:
        self._converter = SchemaConverter(dotall=dotall)

    def add_rule(self, name: str, rule: str) -> str:
        """Add ``name ::= rule``; returns the name used (suffixed when the name holds another rule)."""
        return self._converter.add_rule(name, rule)

    def add_schema(self, name: str, schema: SchemaNode) -> str:
        """Add the rules of a schema node under ``name`` (``root`` is the grammar's root)."""
        return self._converter.add_schema("" if name == "root" else name, schema)

    def add_json_schema(self, name: str, schema: Any) -> str:
        """Build the model of a JSON schema and add it; raises SchemaError for an invalid one."""
        return self.add_schema(name, schema_from_json(schema).root)

    def grammar(self) -> str:
        """The grammar so far; raises GrammarConversionError for errors collected on the way."""
        self._converter.check_errors()
        return self._converter.format_grammar()


def build_grammar(callback: Callable[[GrammarBuilder], None], dotall: bool = False) -> str:
    """Upstream's ``build_grammar``: run ``callback`` on a fresh builder and return its grammar."""
    builder = GrammarBuilder(dotall=dotall)
    callback(builder)
    return builder.grammar()



