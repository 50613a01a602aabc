"""Every grammar llamact's converter produces is valid GBNF twice over: our Lark front end parses and
round-trips it, and llama.cpp's own grammar parser builds a sampler from it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from native_check import llama_cpp_accepts_grammar

from llamact.errors import LlamaUnsupportedException
from llamact.grammar import GbnfAcceptor, GbnfError, format_gbnf, json_schema_to_grammar, parse_gbnf
from llamact.native.model import Model, ModelLoadOptions
from llamact.parity.schema_corpus import SCHEMA_CORPUS
from llamact.parity.upstream_vectors import json_schema_vectors


def _schemas(repo_root: Path) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = list(SCHEMA_CORPUS)
    for vec in json_schema_vectors(repo_root / "vendor" / "llama.cpp"):
        try:
            out.append((f"upstream/{vec.name}", json.loads(vec.schema_text)))
        except ValueError:
            continue
    return out


@pytest.fixture(scope="module")
def produced(repo_root: Path) -> list[tuple[str, str]]:
    grammars = []
    for name, schema in _schemas(repo_root):
        try:
            grammars.append((name, json_schema_to_grammar(schema)))
        except LlamaUnsupportedException:
            continue
    assert len(grammars) > 350
    return grammars


@pytest.fixture(scope="module")
def vocab_model(smollm2_path: Path) -> Iterator[Model]:
    model = Model(smollm2_path, ModelLoadOptions(vocab_only=True))
    yield model
    model.close()


def _front_end(text: str) -> str | None:
    """None when our front end accepts ``text`` (and round-trips it), else its reason."""
    try:
        grammar = parse_gbnf(text)
    except GbnfError as exc:
        return str(exc)
    assert parse_gbnf(format_gbnf(grammar)) == grammar
    GbnfAcceptor(grammar)  # builds: no left recursion, every rule defined
    return None


def test_our_front_end_accepts_nearly_every_produced_grammar(produced: list[tuple[str, str]]) -> None:
    # Upstream's converter emits an unusable grammar for a few schemas (e.g. integer bounds near
    # int64, property names with quotes or brackets next to additionalProperties); llamact's
    # converter reproduces it byte for byte, and the front end is what catches it.
    rejected = [name for name, text in produced if _front_end(text) is not None]
    assert len(rejected) <= len(produced) // 50, rejected


@pytest.mark.model
def test_llama_cpp_agrees_with_our_front_end_on_every_produced_grammar(
    produced: list[tuple[str, str]], vocab_model: Model
) -> None:
    disagreements = []
    for name, text in produced:
        ours = _front_end(text)
        if ours is not None and "minimum above its maximum" in ours:
            continue  # llama.cpp's parser would loop ~2**64 times on {m,n} with m > n: never ask it
        ok, reason = llama_cpp_accepts_grammar(text, vocab_model)
        if ok != (ours is None):
            disagreements.append((name, ours, reason))
    assert not disagreements, disagreements[:5]
