"""The bounded check every grammar passes before llama.cpp sees it (``llamact.grammar.limits``).

Each hostile shape below crashed or stalled llama.cpp (or llama-server) before the check: a grammar
nested 20,000 deep overflowed the C stack (SIGSEGV), an enum of 100,000 values held a slot for more
than 14 minutes on one token. Each must now be a typed error that names its limit, and the
grammars llamact itself makes (templates' tool calls, the schema corpus) must all pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from llamact.engine import GenerationParams, LlamaEngine, ModelParams
from llamact.errors import LlamaInferenceException, LlamaUnsupportedException
from llamact.grammar import json_schema_to_grammar
from llamact.grammar.gbnf import MAX_PARSE_DEPTH, GbnfError, parse_gbnf
from llamact.grammar.limits import (
    GrammarLimitError,
    GrammarLimits,
    check_grammar_limits,
    default_limits,
    set_default_limits,
)
from llamact.grammar.schema import MAX_SCHEMA_DEPTH, SchemaError

DEEP_PARENS = "root ::= " + "(" * 20000 + '"a"' + ")" * 20000
RULE_CHAIN = "\n".join([f'r{i} ::= r{i + 1} "x"' for i in range(20000)] + ['r20000 ::= "a"', "root ::= r0"])


def _enum(n: int) -> str:
    return json_schema_to_grammar({"enum": [f"value-{i}" for i in range(n)]})


@pytest.mark.parametrize(("text", "limit"), [
    (DEEP_PARENS, "max_depth"),
    (RULE_CHAIN, "max_depth"),
    (_enum(100_000), "max_bytes"),
    (_enum(2000), "max_alternatives"),
    # the fan-out counts through the rules at a position: 2 x 600 stacks open at the start
    ("root ::= a | b\na ::= " + " | ".join(f'"a{i}"' for i in range(600)) + "\nb ::= "
     + " | ".join(f'"b{i}"' for i in range(600)), "max_alternatives"),
    # through a nullable first item too
    ('root ::= "x"? (' + " | ".join(f'"v{i}"' for i in range(1100)) + ")", "max_alternatives"),
    ("root ::= " + " ".join(['("abcdefghij"){2000}'] * 60), "max_elements"),
], ids=["parens-20000", "rule-chain-20000", "enum-100000", "enum-2000", "fan-out-through-rules",
        "fan-out-after-nullable", "repetitions-expanded"])
def test_each_hostile_shape_is_refused_by_its_limit(text: str, limit: str) -> None:
    with pytest.raises(GrammarLimitError) as info:
        check_grammar_limits(text)
    assert info.value.limit == limit
    assert info.value.details["limit"] == limit
    assert info.value.details["value"] > info.value.details["maximum"]
    assert f"--grammar-{limit.replace('_', '-')}" in str(info.value)   # the caller learns which knob


def test_a_lone_surrogate_is_a_grammar_error() -> None:
    with pytest.raises(GbnfError, match="lone surrogate"):
        check_grammar_limits('root ::= "\ud800"')


def test_an_enum_under_the_limit_passes() -> None:
    assert check_grammar_limits(_enum(1000)).rules


def test_left_recursion_is_refused_without_recursing() -> None:
    # llama.cpp refuses left recursion too, with a check that recurses over the rules
    with pytest.raises(GbnfError, match="left recursion"):
        check_grammar_limits('root ::= a "x" | "y"\na ::= b\nb ::= root')
    # repetitions of what can match nothing are not left recursion to llama.cpp's iterative stack
    # expansion: its own tool-call grammars hold `tool-calls ::= (tool-call? space)+`
    for text in ('root ::= ("a"?)+ "b"', 'root ::= x* "b"\nx ::= "a" | ""', 'root ::= ("a"?){0,5} "b"',
                 'root ::= (tool-call? space)+\ntool-call ::= "<t>"\nspace ::= | " "'):
        assert check_grammar_limits(text).rules
    chain = "\n".join([f"r{i} ::= r{i + 1}" for i in range(5000)] + ["r5000 ::= r0", "root ::= r0"])
    with pytest.raises(GbnfError):
        check_grammar_limits(chain, GrammarLimits(max_depth=None))


def test_parse_gbnf_itself_refuses_nesting_it_cannot_read() -> None:
    with pytest.raises(GbnfError, match=f"above the {MAX_PARSE_DEPTH} levels"):
        parse_gbnf(DEEP_PARENS)
    inside_a_literal = 'root ::= "' + "(" * 5000 + '"'   # parentheses in literals and classes do not nest
    assert parse_gbnf(inside_a_literal).rules
    assert parse_gbnf("root ::= [(]" + " [(]" * 300).rules


def test_limits_can_be_lifted_or_tightened() -> None:
    assert check_grammar_limits(_enum(2000), GrammarLimits(max_alternatives=None)).rules
    with pytest.raises(GrammarLimitError):
        check_grammar_limits(_enum(10), GrammarLimits(max_alternatives=5))


@pytest.fixture
def strict_default() -> Iterator[None]:
    before = default_limits()
    set_default_limits(GrammarLimits(max_alternatives=3))
    try:
        yield
    finally:
        set_default_limits(before)


@pytest.mark.usefixtures("strict_default")
def test_the_process_default_applies_everywhere() -> None:
    with pytest.raises(GrammarLimitError):
        check_grammar_limits('root ::= "a" | "b" | "c" | "d"')


@pytest.fixture(scope="module")
def engine(smollm2_path: Path) -> Iterator[LlamaEngine]:
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=512)) as loaded:
        yield loaded


@pytest.mark.model
def test_every_native_grammar_passes_the_check(engine: LlamaEngine) -> None:
    """The native Grammar spec is the one door to llama.cpp's grammar code: a hostile grammar is a
    typed error there (before: SIGSEGV), from a chain and from the guided sampler alike."""
    from llamact.native import sampler as s
    from llamact.native.guided import GuidedSampler

    model = engine.model
    for text in (DEEP_PARENS, RULE_CHAIN, _enum(2000)):
        with pytest.raises(GbnfError):
            s.SamplerChain(model, [s.Grammar(text), s.Greedy()])
        with pytest.raises(GbnfError):
            GuidedSampler(model, [s.Greedy()], grammar=s.Grammar(text))


@pytest.mark.model
def test_generation_params_grammar_is_checked(engine: LlamaEngine) -> None:
    with pytest.raises(LlamaInferenceException) as info:
        list(engine.generate("hi", GenerationParams(grammar=DEEP_PARENS, max_tokens=2)))
    assert isinstance(info.value, GrammarLimitError)


@pytest.mark.model
def test_the_batched_raw_path_is_checked(engine: LlamaEngine) -> None:
    """Finding 1 of issue 26: the raw route on parallel slots handed its grammar to llama.cpp
    unchecked (the process died in a stack overflow)."""
    from llamact.engine.batched import BatchScheduler

    scheduler = BatchScheduler(engine)
    try:
        with pytest.raises(GrammarLimitError):
            scheduler.generate("hi", GenerationParams(grammar=DEEP_PARENS, max_tokens=2))
        stream = scheduler.generate("hi", GenerationParams(grammar='root ::= "ok"', max_tokens=4))
        assert "".join(c.text for c in stream) == "ok"
    finally:
        scheduler.close()


@pytest.mark.model
def test_a_schema_made_grammar_over_a_limit_is_refused_before_generating(engine: LlamaEngine) -> None:
    """On llama.cpp's engine; ``auto`` runs a response_format on llguidance (issue 42), where the
    alternatives limit does not apply and the enum is answered."""
    schema = {"type": "string", "enum": [f"value-{i}" for i in range(4000)]}
    response_format = {"type": "json_schema", "json_schema": {"schema": schema}}
    with pytest.raises(GrammarLimitError, match="alternatives"):
        engine.complete_chat([{"role": "user", "content": "pick"}], response_format=response_format,
                             params=GenerationParams(grammar_engine="llama"))
    answer = engine.complete_chat([{"role": "user", "content": "pick"}], response_format=response_format,
                                  params=GenerationParams(max_tokens=12, greedy=True))
    assert answer.finish_reason == "stop" and json.loads(answer.content) in schema["enum"], answer.content
    assert engine.complete_chat([{"role": "user", "content": "hi"}],
                                    params=GenerationParams(max_tokens=2)).finish_reason == "length"


def test_a_schema_nested_too_deep_is_refused_without_recursion_errors() -> None:
    schema: dict[str, object] = {"type": "string"}
    for _ in range(1000):
        schema = {"type": "object", "properties": {"a": schema}}
    with pytest.raises(SchemaError, match=f"deeper than {MAX_SCHEMA_DEPTH} levels") as info:
        json_schema_to_grammar(schema)
    assert isinstance(info.value, LlamaUnsupportedException)
    shallow: dict[str, object] = {"type": "string"}
    for _ in range(MAX_SCHEMA_DEPTH // 2 - 1):
        shallow = {"type": "object", "properties": {"a": shallow}}
    assert json_schema_to_grammar(shallow)


@pytest.mark.model
def test_a_grammar_no_token_can_follow_is_the_requests_error(engine: LlamaEngine) -> None:
    """A grammar this model cannot continue (here: token 0, then nothing but an end SmolLM2 does not
    have) fails as the request's constraint, which the server answers 400, not as llama.cpp's."""
    from llamact.errors import LlamaGrammarDeadEndException, LlamaRequestException

    with pytest.raises(LlamaGrammarDeadEndException) as raw:
        list(engine.generate("hi", GenerationParams(grammar="root ::= <[0]>", max_tokens=3)))
    with pytest.raises(LlamaGrammarDeadEndException) as chat:
        engine.complete_chat([{"role": "user", "content": "hi"}], grammar="root ::= <[0]>",
                                 params=GenerationParams(max_tokens=3))
    for info in (raw, chat):
        assert isinstance(info.value, LlamaRequestException) and isinstance(info.value, LlamaInferenceException)


@pytest.mark.model
def test_a_sampler_parameter_out_of_range_is_the_requests_error(engine: LlamaEngine) -> None:
    from llamact.errors import LlamaRequestException, LlamaSamplerParameterException

    for params in (GenerationParams(top_p=5, max_tokens=2), GenerationParams(mirostat=7, max_tokens=2)):
        with pytest.raises(LlamaSamplerParameterException) as info:
            list(engine.generate("hi", params))
        assert isinstance(info.value, LlamaRequestException)
