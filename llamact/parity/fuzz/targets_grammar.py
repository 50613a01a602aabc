"""Grammar targets: random JSON schemas through the converter (``json_schema``), and random GBNF
through llamact's Lark front end against llama.cpp's own grammar parser (``gbnf``).

``json_schema``: input ``{"schema": ...}``; upstream's ``json_schema_to_grammar`` against
llamact's, byte for byte, errors by the scoreboard's table.

``gbnf``: input ``{"grammar": text}``; the answer compared is ``{"accepted": bool}``: llama.cpp's
``llama_grammar_parser`` parses the text and it has a ``root`` symbol (what
``llama_grammar_init_impl`` checks before building stacks), against ``parse_gbnf(text)`` raising or
not. Where llamact is deliberately stricter (gbnf.py's docstring: a range ``[z-a]`` whose start is
above its end, a NUL character, a ``root`` that is referenced but never defined) the case is a
deviation. Never sent: grammars with ``{m,n}``, m > n (upstream's parser would loop about 2**64
times), and grammars llamact accepts that hold a ``<text>`` token reference (only a vocabulary can
say whether it names a single token; llamact's front end has none).
"""

from __future__ import annotations

import logging
import random
import re
from typing import Any

from ...json_types import Json
from ..oracle import OracleError
from .gen_gbnf import grammar
from .gen_schema import schema
from .target import Target, Unsent

_REVERSED_REPEAT = re.compile(r"\{\s*(\d+)\s*,\s*(\d+)\s*\}")


class JsonSchemaTarget(Target):
    name = "json_schema"
    component = "json_schema"
    unit = "schema"

    def generate(self, rng: random.Random) -> Json:
        return {"schema": schema(rng)}

    def request(self, inp: Json) -> dict[str, Any]:
        return {"op": "json_schema_to_grammar", "schema": inp.get("schema"), "force_gbnf": False}

    def run(self, inp: Json) -> Json:
        from ...grammar import json_schema_to_grammar

        # the converter logs every unsupported pattern it meets; thousands of those are noise here
        logging.getLogger("llamact.grammar").setLevel(logging.ERROR)
        return json_schema_to_grammar(inp.get("schema"))


class GbnfTarget(Target):
    name = "gbnf"
    component = "gbnf"
    unit = "grammar"

    def generate(self, rng: random.Random) -> Json:
        return {"grammar": grammar(rng)}

    def request(self, inp: Json) -> dict[str, Any]:
        text = str(inp.get("grammar", ""))
        for m in _REVERSED_REPEAT.finditer(text):
            if int(m.group(1)) > int(m.group(2)):
                raise Unsent("holds {m,n} with m > n: llama.cpp's parser would loop for ever")
        if _has_text_token(text):
            raise Unsent("a <text> token reference: whether it names one token depends on a vocabulary, which "
                         "llama.cpp's parser consults and llamact's front end does not")
        return {"op": "gbnf_parse", "grammars": [text]}

    def expected(self, inp: Json, answer: Any) -> Json:
        if isinstance(answer, OracleError):
            return super().expected(inp, answer)
        return {"accepted": bool(answer[0]["parsed"] and answer[0]["root"])}

    def run(self, inp: Json) -> Json:
        return {"accepted": _refusal(str(inp.get("grammar", ""))) is None}

    def is_deviation(self, inp: Json, expected: Json, got: Json) -> bool:
        """llamact refusing on purpose where llama.cpp accepts (gbnf.py's documented stricter checks)."""
        if expected != {"accepted": True} or got != {"accepted": False}:
            return False
        reason = _refusal(str(inp.get("grammar", ""))) or ""
        return "NUL character" in reason or ("character range start" in reason and "is above its end" in reason) \
            or "has no 'root' rule" in reason


def _has_text_token(text: str) -> bool:
    from ...grammar.gbnf import GbnfError, TokenRef, parse_gbnf

    try:
        grammar = parse_gbnf(text, root=None)
    except GbnfError:
        return False  # refused before any vocabulary could matter: both sides must refuse
    return any(isinstance(ref, TokenRef) and isinstance(ref.token, str) for ref in _elements(grammar))


def _elements(grammar: Any) -> Any:
    from ...grammar.gbnf import Group, Repeat

    stack = [seq for alternatives in grammar.rules.values() for seq in alternatives.sequences]
    while stack:
        for item in stack.pop().items:
            while isinstance(item, Repeat):
                item = item.item
            if isinstance(item, Group):
                stack.extend(item.alternatives.sequences)
            else:
                yield item


def _refusal(text: str) -> str | None:
    from ...grammar.gbnf import GbnfError, parse_gbnf

    try:
        parse_gbnf(text)
    except GbnfError as exc:
        return exc.reason
    return None

