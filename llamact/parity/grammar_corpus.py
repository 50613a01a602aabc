"""The grammar corpus of the engines' differential test (``engine.grammar_equality``).

    template_cases(engine, templates_dir)   every vendored template's tool grammar under each tool choice
    schema_cases(engine)                    the schema corpus (``parity.schema_corpus``), converted
    upstream_gbnf_cases(engine, llama_cpp)  upstream's GBNF and schema test vectors
                                            (tests/test-grammar-integration.cpp), their passing strings as drives
    fuzz_cases(engine, count, seed)         the fuzzer's random schemas and random GBNF (parity.fuzz), those
                                            llamact's front end accepts and that match text only

Each case is a ``GrammarCase``: the grammar as the sampler receives it (the template's, after the
server's trigger processing: ``chat_sampling_plan``), its class (``grammar.engines.choice``), the
generation prompt a non-lazy template grammar reads first, and drives -- token sequences a model
would write: a rendered tool call (what fires a lazy grammar), upstream's passing strings.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..engine.chat_sampling import chat_sampling_plan
from ..engine.grammar_equality import GrammarCase
from ..engine.params import GenerationParams
from ..errors import LlamaException
from ..grammar import json_schema_to_grammar
from ..grammar.engines import grammar_class
from .cpp_source import Cursor, read_source
from .cpp_source import call_sites as _call_sites
from .scenarios import CALL_WEATHER, TOOLS, USER
from .schema_corpus import SCHEMA_CORPUS

__all__ = ["TOOL_CHOICES", "fuzz_cases", "schema_cases", "template_cases", "upstream_gbnf_cases"]

NAMED = {"type": "function", "function": {"name": "get_weather"}}
TOOL_CHOICES: dict[str, Any] = {"auto": "auto", "required": "required", "named": NAMED}
GRAMMAR_TEST_FILE = "tests/test-grammar-integration.cpp"


def _tokens(engine: Any, text: str) -> tuple[int, ...]:
    return tuple(engine.tokenize(text, add_special=False, parse_special=True)) if text else ()


def _tool_call_output(engine: Any, source: str) -> str:
    """What a model writes for one get_weather call under this template: the assistant turn rendered
    after the generation prompt (empty when the template cannot render it)."""
    try:
        base = engine.chat_template([USER], tools=TOOLS, custom_template=source).prompt
        full = engine.chat_template([USER, {"role": "assistant", "content": "", "tool_calls": [CALL_WEATHER]}],
                                    tools=TOOLS, custom_template=source, add_generation_prompt=False).prompt
    except LlamaException:
        return ""
    return full[len(base):] if full.startswith(base) else ""


def template_cases(engine: Any, templates_dir: Path, names: list[str] | None = None) -> Iterator[GrammarCase]:
    """Each template x tool choice whose apply result has a grammar."""
    for path in sorted(templates_dir.glob("*.jinja")):
        if names is not None and path.stem not in names:
            continue
        source = path.read_text(encoding="utf-8")
        output = _tool_call_output(engine, source)
        for choice_name, choice in TOOL_CHOICES.items():
            try:
                result = engine.chat_template([USER], tools=TOOLS, tool_choice=choice, custom_template=source)
                plan = chat_sampling_plan(engine, result, GenerationParams())
            except LlamaException:
                continue
            if not plan.grammar:
                continue
            drive = _tokens(engine, output)
            if plan.prefill_grammar and output:
                # a template grammar that starts with the generation prompt: the output continues it
                drive = _tokens(engine, result.generation_prompt + output)[len(plan.prefill_tokens):]
            yield GrammarCase(
                f"template/{path.stem}/{choice_name}", grammar_class("template", plan.grammar_lazy), plan.grammar,
                trigger_patterns=plan.trigger_patterns if plan.grammar_lazy else (),
                trigger_tokens=plan.trigger_tokens if plan.grammar_lazy else (),
                prefill=plan.prefill_tokens if plan.prefill_grammar else (),
                drives=(drive,) if drive else ())


def schema_cases(engine: Any, names: list[str] | None = None) -> Iterator[GrammarCase]:
    """The schema corpus's schemas that convert (a user's ``json_schema``)."""
    for name, schema in SCHEMA_CORPUS:
        if names is not None and name not in names:
            continue
        try:
            grammar = json_schema_to_grammar(schema)
        except LlamaException:
            continue
        yield GrammarCase(f"schema/{name}", grammar_class("user", False), grammar)


def _strings_in_braces(cur: Cursor) -> list[str]:
    """A braced list of string expressions: the plain literals (elements built with token(...) or
    other calls are dropped); the cursor ends past the closing brace."""
    cur.expect("{")
    out: list[str] = []
    depth, plain = 0, True
    element: list[str] = []
    while True:
        tok = cur.peek()
        if tok is None:
            raise cur.error("unterminated list")
        if depth == 0 and tok.kind == "punct" and tok.text in (",", "}"):
            cur.next()
            if element and plain:
                out.append("".join(element))
            element, plain = [], True
            if tok.text == "}":
                return out
            continue
        if tok.kind == "string":
            element.append(cur.string())
            continue
        cur.next()
        plain = False
        if tok.text in ("(", "{"):
            depth += 1
        elif tok.text in (")", "}"):
            depth -= 1


def upstream_gbnf_cases(engine: Any, llama_cpp_dir: Path) -> Iterator[GrammarCase]:
    """tests/test-grammar-integration.cpp's ``test_grammar`` (GBNF) and ``test_schema`` calls, with their
    passing strings as drives."""
    tokens, rel = read_source(llama_cpp_dir, GRAMMAR_TEST_FILE)
    for callee in ("test_grammar", "test_schema"):
        for site in _call_sites(tokens, callee, rel):
            cur = Cursor(tokens, site.index, rel, f"{callee} call at line {tokens[site.index].line}")
            line = cur.next().line
            cur.expect("(")
            try:
                name = cur.string()
                cur.expect(",")
                text = cur.string()
                cur.expect(",")
                passing = _strings_in_braces(cur)
            except Exception:  # noqa: BLE001 - a call built some other way: not a data vector
                continue
            if callee == "test_schema":
                try:
                    text = json_schema_to_grammar(json.loads(text))
                except (LlamaException, ValueError):
                    continue
            drives = tuple(_tokens(engine, s) for s in passing if s)
            yield GrammarCase(f"upstream/{callee}:{line}/{name}", grammar_class("user", False), text,
                              drives=tuple(d for d in drives if d))



def fuzz_cases(engine: Any, count: int, seed: int = 0) -> Iterator[GrammarCase]:
    """``count`` random schemas (converted) and ``count`` random GBNF grammars from the fuzzer's
    generators, kept when llamact's front end accepts them under llama.cpp's limits and they match
    no model tokens (``<[id]>``: an engine matches those apart)."""
    from ..grammar.limits import check_grammar_limits
    from .fuzz import gen_gbnf, gen_schema

    rng = random.Random(seed)
    for i in range(count):
        try:
            grammar = json_schema_to_grammar(gen_schema.schema(rng))
            check_grammar_limits(grammar)
        except (LlamaException, ValueError, RecursionError):
            continue
        yield GrammarCase(f"fuzz/schema-{seed}-{i}", grammar_class("user", False), grammar)
    kept = 0
    for i in range(count * 20):   # most random GBNF is damaged on purpose or matches tokens
        if kept == count:
            break
        text = gen_gbnf.grammar(rng)
        if "<[" in text:
            continue
        try:
            check_grammar_limits(text)
        except (LlamaException, ValueError, RecursionError):
            continue
        kept += 1
        yield GrammarCase(f"fuzz/gbnf-{seed}-{i}", grammar_class("user", False), text)
