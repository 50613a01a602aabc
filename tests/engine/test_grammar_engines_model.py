"""Both grammar engines on the bundled SmolLM2: the same greedy tokens from the same requests, the
limits that follow the engine, hostile grammars refused on both, the cache of compiled grammars, the
fallback when llguidance cannot load, and a failure inside the matcher reported as the request's."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llamact import GenerationParams, LlamaEngine, ModelParams
from llamact.engine.chat_sampling import chat_sampler_config
from llamact.engine.generator import generate
from llamact.engine.grammar_engines import choose_grammar_engine, grammar_sampler_spec, llguidance_tokenizer
from llamact.errors import LlamaGrammarDeadEndException, LlamaInferenceException
from llamact.grammar import json_schema_to_grammar, parse_gbnf
from llamact.grammar.acceptor import GbnfAcceptor
from llamact.grammar.engines import GrammarUnfitError, llguidance_engine
from llamact.grammar.limits import GrammarLimitError
from llamact.native import sampler as s
from llamact.native.matcher_grammar import MatcherGrammar

pytestmark = pytest.mark.model

TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"
ASK = [{"role": "user", "content": "Describe a person as JSON."}]
PERSON = {"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"},
    "email": {"type": "string"}, "active": {"type": "boolean"}, "score": {"type": "number"}},
    "required": ["name", "age", "city", "email", "active", "score"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather for a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


@pytest.fixture(scope="module")
def engine(smollm2_path: Path) -> Iterator[LlamaEngine]:
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=1024, n_threads=1, n_threads_batch=1)) as eng:
        yield eng


def _run(engine: LlamaEngine, grammar_engine: str, max_tokens: int = 48, **request: Any) -> list[int]:
    """The greedy tokens of a chat request on one grammar engine (the generation's own sampler)."""
    result = engine.chat_template(request.pop("messages", ASK), **request)
    params = GenerationParams(greedy=True, max_tokens=max_tokens, grammar_engine=grammar_engine)
    with chat_sampler_config(engine, result, params) as sampling:
        prompt = engine.tokenize(result.prompt, add_special=True, parse_special=True)
        engine.context.memory_clear()
        chunks = list(generate(engine.context, sampling.sampler, prompt, max_tokens, sampling.stops, False))
    return [c.token for c in chunks if c.token is not None]


HERMES = TEMPLATES / "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja"


@pytest.mark.parametrize("request_kind", ["schema", "named-tool", "required-tool"])
def test_both_engines_give_the_same_greedy_output(engine: LlamaEngine, request_kind: str) -> None:
    """Equal allowed sets (the differential test) and llama-server's sampling order on both engines:
    the same greedy reply, token for token."""
    if request_kind == "schema":
        request: dict[str, Any] = {"response_format": {"type": "json_schema", "json_schema": {"schema": PERSON}}}
    else:
        request = {"tools": TOOLS, "tool_choice": NAMED if request_kind == "named-tool" else "required",
                   "custom_template": HERMES.read_text()}
    llama = _run(engine, "llama", **dict(request))
    assert len(llama) > 8
    assert _run(engine, "llguidance", **dict(request)) == llama


def _text(engine: LlamaEngine, grammar_engine: str, **request: Any) -> str:
    params = GenerationParams(greedy=True, max_tokens=48, grammar_engine=grammar_engine)
    return engine.complete_chat(ASK, params=params, **request).message.content or ""


def test_the_plain_prompt_paths_use_the_engine(engine: LlamaEngine) -> None:
    grammar = 'root ::= "yes" | "no" | "maybe so"'
    for grammar_engine in ("llama", "llguidance"):
        out = engine.complete("Answer:", GenerationParams(grammar=grammar, greedy=True, max_tokens=8,
                                                          grammar_engine=grammar_engine))
        assert out.text in ("yes", "no", "maybe so")
    assert isinstance(grammar_sampler_spec(engine.model, grammar, engine="llguidance"), MatcherGrammar)
    assert isinstance(grammar_sampler_spec(engine.model, grammar, engine="llama"), s.Grammar)


def test_llamas_cost_limits_do_not_bind_llguidance(engine: LlamaEngine) -> None:
    """A 2,000-value enum is over llama.cpp's alternatives limit (a full pass over the vocabulary per
    refused token costs ~0.6 s there); llguidance runs it under its own limits. (It once ended with
    "the sampled token is not admitted": see the next test.)"""
    values = [f"value-{i}" for i in range(2000)]
    request = {"response_format": {"type": "json_schema", "json_schema": {"schema": {"enum": values}}}}
    with pytest.raises(GrammarLimitError, match="max_alternatives"):
        _text(engine, "llama", **dict(request))
    assert json.loads(_text(engine, "llguidance", **dict(request))) in values


def test_an_end_token_is_allowed_once_the_grammar_has_matched_all_it_can(engine: LlamaEngine) -> None:
    """llguidance stops its matcher by itself once nothing may follow; from then on its
    validate_tokens refuses every token, the end tokens too, while its mask allows exactly those. The
    single-token check must say what the mask says, or the guide refuses the end it then samples."""
    matcher = llguidance_tokenizer(engine.model).compile('root ::= "ab"').matcher()
    for token in engine.tokenize("ab", add_special=False):
        assert matcher.allows(token)
        matcher.accept(token)
    eog = next(t for t in range(engine.n_vocab) if engine.model.vocab.is_eog(t))
    assert matcher.allowed()[eog] and matcher.allows(eog)
    assert not matcher.allows(engine.tokenize("a", add_special=False)[0])


@pytest.mark.parametrize("size", [10_000])
def test_a_large_enum_is_one_lexeme_on_llguidance(engine: LlamaEngine, size: int) -> None:
    """Over llama.cpp's limits tenfold, it compiles to one lexeme (not one parser symbol per
    character) and answers a value."""
    values = [f"value-{i}" for i in range(size)]
    schema = {"enum": values}
    compiled = llguidance_tokenizer(engine.model).compile(json_schema_to_grammar(schema))
    assert compiled.conversion.lexemes == 1 and compiled.conversion.fallback is None
    request = {"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}
    assert json.loads(_text(engine, "llguidance", **request)) in values


def test_a_100kb_schema_runs_on_llguidance(engine: LlamaEngine) -> None:
    """A ~100 KB schema (350 optional properties, each an object of 8): over llama.cpp's depth limit
    (its optional properties are a chain of 350 rules, which llama.cpp's stack expansion recurses
    through); the converter walks rules iteratively and llguidance runs it as one lexeme."""
    kinds = ["string", "integer", "boolean"]
    props = {f"field_{i}": {"type": "object", "properties": {f"sub_{j}": {"type": kinds[j % 3]} for j in range(8)}}
             for i in range(350)}
    schema = {"type": "object", "properties": props, "required": ["field_0"]}
    assert 100_000 < len(json.dumps(schema)) < 120_000
    grammar = json_schema_to_grammar(schema)
    with pytest.raises(GrammarLimitError, match="max_depth"):
        engine.complete("JSON:", GenerationParams(grammar=grammar, max_tokens=2, grammar_engine="llama"))
    assert llguidance_tokenizer(engine.model).compile(grammar).conversion.lexemes == 1
    params = GenerationParams(grammar=grammar, max_tokens=24, grammar_engine="llguidance")
    text = engine.complete("JSON:", params).text
    assert text.startswith("{") and GbnfAcceptor(parse_gbnf(grammar)).is_viable_prefix(text)


DEEP_PARENS = "root ::= " + "(" * 20000 + '"a"' + ")" * 20000
RULE_CHAIN = "\n".join([f'r{i} ::= r{i + 1} "x"' for i in range(20000)] + ['r20000 ::= "a"', "root ::= r0"])
RIGHT_CHAIN = "\n".join([f'r{i} ::= "x" r{i + 1}' for i in range(5000)] + ['r5000 ::= "a"', "root ::= r0"])
CYCLE = "\n".join([f'r{i} ::= "x" r{i + 1} | "y"' for i in range(5000)] + ['r5000 ::= "a" r0', "root ::= r0"])
HUGE_REPEAT = "root ::= " + " ".join(['("abcdefghij"){2000}'] * 60)


@pytest.mark.parametrize(("grammar", "on_llama", "on_llguidance"), [
    (DEEP_PARENS, GrammarLimitError, GrammarLimitError), (RULE_CHAIN, GrammarLimitError, GrammarUnfitError),
    (RIGHT_CHAIN, None, GrammarUnfitError), (CYCLE, None, GrammarUnfitError),
    (json_schema_to_grammar({"enum": [f"value-{i}" for i in range(100_000)]}), GrammarLimitError, GrammarLimitError),
    (HUGE_REPEAT, GrammarLimitError, None), ('root ::= "a" root2', LlamaInferenceException, LlamaInferenceException),
], ids=["parens-20000", "rule-chain-20000", "right-chain-5000", "cycle-5000", "enum-100000", "repetitions-1.2M",
        "undefined-rule"])
def test_hostile_grammars_are_refused_on_both_engines(engine: LlamaEngine, grammar: str,
                                                      on_llama: type[Exception] | None,
                                                      on_llguidance: type[Exception] | None) -> None:
    """Refused before any token, a typed error the server answers 400: the front end's size and
    nesting limits on both engines, and on llguidance the depth its compiler recurses to (a chain of
    5,000 rules, nested at any position, overflows its stack: the process died). llama.cpp's
    elements limit does not bind llguidance, which runs a grammar of 1.2M expanded elements under
    its own limits; llama.cpp runs the chains that are not left-nested."""
    for grammar_engine, expected in (("llama", on_llama), ("llguidance", on_llguidance)):
        params = GenerationParams(grammar=grammar, max_tokens=2, grammar_engine=grammar_engine)
        if expected is None:
            assert engine.complete("hi", params).text
            continue
        with pytest.raises(LlamaInferenceException) as info:
            list(engine.generate("hi", params))
        assert isinstance(info.value, expected), (grammar_engine, info.value)


def test_auto_falls_back_to_llama_for_a_grammar_llguidance_cannot_run(engine: LlamaEngine,
                                                                     caplog: pytest.LogCaptureFixture,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from llamact.grammar.engines import choice

    monkeypatch.setattr(choice, "PROVEN_CLASSES", frozenset({"user"}))
    import llamact.engine.grammar_engines as glue

    monkeypatch.setattr(glue, "PROVEN_CLASSES", frozenset({"user"}))
    with caplog.at_level(logging.INFO, logger="llamact.grammar"):
        spec = grammar_sampler_spec(engine.model, "root ::= <[12]> [a-z]", engine="auto")
        assert isinstance(spec, s.Grammar)
        assert any("llguidance cannot run this grammar" in r.getMessage() for r in caplog.records)
        assert isinstance(grammar_sampler_spec(engine.model, 'root ::= "x"', engine="auto"), MatcherGrammar)
    with pytest.raises(GrammarUnfitError, match="model tokens"):
        grammar_sampler_spec(engine.model, "root ::= <[12]> [a-z]", engine="llguidance")


def test_unproven_classes_stay_on_llama_under_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    import llamact.engine.grammar_engines as glue

    monkeypatch.setattr(glue, "PROVEN_CLASSES", frozenset({"template"}))
    assert choose_grammar_engine("auto", "template").engine == "llguidance"
    choice = choose_grammar_engine("auto", "user")
    assert choice.engine == "llama" and "not proven equal" in choice.reason
    assert choose_grammar_engine("llama", "template").engine == "llama"
    assert choose_grammar_engine("llguidance", "user").engine == "llguidance"


def test_a_machine_without_llguidance_falls_back_with_one_warning(engine: LlamaEngine,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    import llamact.engine.grammar_engines as glue

    monkeypatch.setattr(llguidance_engine, "_UNAVAILABLE", "ImportError: no wheel for this machine")
    monkeypatch.setattr(glue, "_WARNED", type(glue._WARNED)())
    with caplog.at_level(logging.WARNING, logger="llamact.grammar"):
        for _ in range(3):
            spec = grammar_sampler_spec(engine.model, 'root ::= "ok"', engine="llguidance")
            assert isinstance(spec, s.Grammar)
        out = engine.complete("x", GenerationParams(grammar='root ::= "ok"', max_tokens=4, grammar_engine="llguidance"))
    assert out.text == "ok"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "llguidance cannot be loaded" in warnings[0].getMessage()


def test_compiled_grammars_are_cached_by_text_and_bounded(engine: LlamaEngine) -> None:
    tokenizer = llguidance_tokenizer(engine.model)
    assert llguidance_tokenizer(engine.model) is tokenizer
    first = tokenizer.compile('root ::= "cached"')
    assert tokenizer.compile('root ::= "cached"') is first
    for i in range(llguidance_engine.CACHE_SIZE + 1):
        tokenizer.compile(f'root ::= "v{i}"')
    assert tokenizer.compile('root ::= "cached"') is not first


def test_a_failure_inside_the_matcher_is_the_requests_dead_end(engine: LlamaEngine) -> None:
    """A callback cannot raise into C: the matcher refuses every token after a failure, and the
    generation ends with the grammar's dead-end error (a 400), not a crash."""
    from llamact.native.guided import GuidedSampler

    compiled = llguidance_tokenizer(engine.model).compile('root ::= "abc"')

    class Broken:
        def __init__(self) -> None:
            self.inner = compiled.matcher()

        def allows(self, token: int) -> bool:
            raise RuntimeError("broken matcher")

        def allowed(self) -> Any:
            raise RuntimeError("broken matcher")

        def accept(self, token: int) -> None:
            self.inner.accept(token)

        def reset(self) -> None:
            pass

        def copy(self) -> Broken:
            return self

    sampler = GuidedSampler(engine.model, [s.Greedy()], grammar=MatcherGrammar(Broken))
    tokens = engine.tokenize("x", add_special=False)
    engine.context.memory_clear()
    with pytest.raises(LlamaGrammarDeadEndException):
        list(generate(engine.context, sampler, tokens, 4, (), False))
    assert sampler.closed


def test_over_llguidances_bounds_auto_goes_on_on_llama_and_llguidance_fails_loudly(
        engine: LlamaEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A grammar whose mask needs more Earley items than llguidance allows a step (here its bound is
    lowered to 300 to make one): under ``auto`` the tokens read so far are replayed into llama.cpp's
    grammar and the output is llama.cpp's, token for token; under ``llguidance`` it is an error,
    never an output ended early (the refuse-all of a failed callback once let the chain pick an end
    token)."""
    import llamact.engine.grammar_engines as glue

    monkeypatch.setattr(llguidance_engine, "STEP_MAX_ITEMS", 300)
    monkeypatch.setattr(glue, "PROVEN_CLASSES", frozenset({"user"}))
    # free text up to a marker (a template's until rules): one code point per lexeme there, an Earley
    # item per character of every token of the mask; a text no other test compiles (the cache)
    grammar = 'root ::= t "<|bounded|>"\nt ::= "" | [^<] t | [<] u\nu ::= "" | [^|<] t | [<] u'

    reference = engine.complete("Say a word:", GenerationParams(grammar=grammar, max_tokens=10, greedy=True,
                                                                   grammar_engine="llama")).text
    out = engine.complete("Say a word:", GenerationParams(grammar=grammar, max_tokens=10, greedy=True,
                                                             grammar_engine="auto"))
    assert out.text == reference and len(reference) > 5
    with pytest.raises(LlamaInferenceException, match="Too many items"):
        engine.complete("Say a word:", GenerationParams(grammar=grammar, max_tokens=10, greedy=True,
                                                        grammar_engine="llguidance"))
