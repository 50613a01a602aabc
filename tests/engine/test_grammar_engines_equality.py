"""The differential test of the grammar engines, a sample: along seeded walks (a rendered tool call or
upstream's passing strings, then random tokens both allow), at every step the tokens llguidance
allows over SmolLM2's whole vocabulary equal llama.cpp's grammar's, end of generation included.
The whole corpus runs in scripts/grammar_engine_equality.py (its numbers: docs/design.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from llamact import LlamaEngine, ModelParams
from llamact.engine.grammar_equality import INVALID_UTF8, GrammarCase, compare_grammar
from llamact.parity.grammar_corpus import schema_cases, template_cases, upstream_gbnf_cases

pytestmark = pytest.mark.model

LLAMA_CPP = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp"
TEMPLATES = ["NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", "Qwen3-Coder", "meta-llama-Llama-3.1-8B-Instruct",
             "Apertus-8B-Instruct"]
SCHEMAS = ["mixed-realistic", "tool-call-like", "deep-nesting"]


@pytest.fixture(scope="module")
def engine(smollm2_path: Path) -> Iterator[LlamaEngine]:
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=512, n_threads=1, n_threads_batch=1)) as eng:
        yield eng


def _check(engine: LlamaEngine, case: GrammarCase, steps: int = 12) -> int:
    result = compare_grammar(engine, case, steps=steps, random_walks=1, seed=42)
    assert result.skipped is None, result.skipped
    other = [d for d in result.differences if d.kind != INVALID_UTF8]
    assert other == [] and result.equal, (case.name, other[:2])
    assert result.steps > 0 and result.tokens_compared == result.steps * engine.n_vocab
    return result.ended


def test_template_tool_grammars_under_each_tool_choice(engine: LlamaEngine) -> None:
    cases = list(template_cases(engine, LLAMA_CPP / "models" / "templates", TEMPLATES))
    assert {c.cls for c in cases} == {"template", "template-lazy"}
    assert any(c.trigger_patterns or c.trigger_tokens for c in cases)
    for case in cases:
        _check(engine, case)


def test_schema_grammars(engine: LlamaEngine) -> None:
    cases = list(schema_cases(engine, SCHEMAS))
    assert len(cases) == len(SCHEMAS)
    for case in cases:
        _check(engine, case)


def test_upstream_gbnf_vectors(engine: LlamaEngine) -> None:
    cases = [c for c in upstream_gbnf_cases(engine, LLAMA_CPP) if c.drives][:6]
    assert cases
    ended = sum(_check(engine, case, steps=24) for case in cases)
    assert ended > 0   # some walk reached the end of generation (its allowed set compared too)


def test_the_comparison_reports_a_real_difference(engine: LlamaEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a test that cannot fail: when the llguidance side runs another grammar, the walk reports it."""
    import llamact.engine.grammar_equality as eq

    real = eq.grammar_sampler_spec
    monkeypatch.setattr(eq, "grammar_sampler_spec",
                        lambda model, text, **kw: real(model, 'root ::= "a" [0-9]', **kw))
    result = compare_grammar(engine, GrammarCase("x", "user", 'root ::= "a" [0-9a-f]'), steps=4)
    assert result.differences and result.differences[0].step == 0   # "ab" .. "af": only llama.cpp's grammar
    assert result.differences[0].n_only_llama > 0 and result.differences[0].n_only_llguidance == 0


def test_deviation_20_llama_cpp_admits_invalid_utf8_llguidance_does_not(engine: LlamaEngine) -> None:
    """After a token that ends in the lead byte 0xED, llama.cpp's grammar admits any continuation byte
    whose decoded value its class holds -- 0xA0-0xBF make a surrogate (U+D800-DFFF), which is not
    UTF-8 -- and llguidance admits 0x80-0x9F only (valid UTF-8). Everything else is the same."""
    from llamact.engine.grammar_engines import grammar_sampler_spec
    from llamact.native import sampler as s
    from llamact.native.matcher_grammar import GrammarProbe

    grammar = 'root ::= [^"]*'
    pieces = {t: engine.model.vocab.token_to_piece(t, special=True) for t in range(engine.n_vocab)}
    lead = next(t for t, p in pieces.items() if p == b"\xed")
    llama = GrammarProbe(engine.model, s.Grammar(grammar))
    guidance = GrammarProbe(engine.model, grammar_sampler_spec(engine.model, grammar, engine="llguidance"))
    try:
        assert np.array_equal(llama.allowed(), guidance.allowed())
        for probe in (llama, guidance):
            probe.accept(lead)
        a, b = llama.allowed(), guidance.allowed()
        only_llama = {pieces[int(t)] for t in np.nonzero(a & ~b)[0]}
        assert only_llama and all(0xA0 <= p[0] <= 0xBF for p in only_llama)
        assert not (b & ~a).any()
        valid = [t for t, p in pieces.items() if len(p) == 1 and 0x80 <= p[0] <= 0x9F]
        assert valid and all(a[t] and b[t] for t in valid)
    finally:
        llama.close()
        guidance.close()
