"""The sampling plan of a chat request (llamact/engine/chat_sampling.py): llama-server's rules as values.

What the server itself derives for real templates (triggers, preserved ids, generated tokens) is
compared in tests/parity/test_chat_sampling_server.py; here each rule is pinned on its own, with
the regex escape checked against upstream's own function through the oracle.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from llamact import GenerationParams, LlamaEngine, ModelParams
from llamact.chat.result import ChatTemplateResult, GrammarTrigger
from llamact.engine.chat_sampling import (
    GRAMMAR_NONE,
    GRAMMAR_TEMPLATE,
    GRAMMAR_USER,
    anchor_full_pattern,
    chat_sampler_config,
    chat_sampling_plan,
    generation_prompt_tokens,
    regex_escape,
)
from llamact.errors import LlamaInferenceException, LlamaRequestException, LlamaStateException
from llamact.native.reasoning_budget import UNLIMITED

pytestmark = pytest.mark.model

TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather for a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
GREEDY = GenerationParams(greedy=True, max_tokens=8)
TOOL_GRAMMAR = 'root ::= "<tool_call>" [a-z]+'


@pytest.fixture(scope="module")
def engine(smollm2_path: Path):
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=2048, n_threads=1, n_threads_batch=1)) as eng:
        yield eng


@pytest.fixture(scope="module")
def base(engine: LlamaEngine) -> ChatTemplateResult:
    """SmolLM2's own template, no tools: no grammar, no thinking tags."""
    return engine.chat_template(MESSAGES)


def template(name: str) -> str:
    return (TEMPLATES / f"{name}.jinja").read_text()


# -- regex escape and anchoring (common_sampler_init) --------------------------------------------

ESCAPE_CASES = ["<tool_call>", "[TOOL_CALLS]", "a.b*c+d?e", "(x|y)", "^start$", "{\"name\": ", "back\\slash",
                "<|python_tag|>", "[{]}", "-/:,#&'\"~`!@%=", "é→漢字 .", "", "\n\t"]


@pytest.mark.parity
@pytest.mark.parametrize("text", ESCAPE_CASES)
def test_regex_escape_equals_upstream(oracle, text: str) -> None:
    assert regex_escape(text) == oracle.call("regex_escape", text=text)


@pytest.mark.parametrize(("pattern", "anchored"), [
    ("", "^$"), ("abc", "^abc$"), ("^abc", "^abc$"), ("abc$", "^abc$"), ("^abc$", "^abc$"),
    ("(?:.|\\n)*<tool>", "^(?:.|\\n)*<tool>$"), ("^", "^$"), ("$", "^$"),
])
def test_pattern_full_anchoring(pattern: str, anchored: str) -> None:
    # upstream: "^" prepended unless the pattern starts with it, "$" appended unless it ends with it
    assert anchor_full_pattern(pattern) == anchored


# -- triggers and preserved tokens (server-schema.cpp) ---------------------------------------------

def lazy(base: ChatTemplateResult, triggers: tuple[GrammarTrigger, ...], preserved: tuple[str, ...] = ()
         ) -> ChatTemplateResult:
    return replace(base, grammar=TOOL_GRAMMAR, grammar_lazy=True, grammar_triggers=triggers, preserved_tokens=preserved)


def test_single_token_word_trigger_becomes_a_token_trigger(engine: LlamaEngine, base: ChatTemplateResult) -> None:
    (im_start,) = engine.tokenize("<|im_start|>", add_special=False, parse_special=True)
    result = lazy(base, (GrammarTrigger("word", "<|im_start|>"), GrammarTrigger("word", "<tool_call>"),
                         GrammarTrigger("pattern", "[\\s\\S]*?(<tool_call>)"),
                         GrammarTrigger("pattern_full", "(?:.|\\n)*(<tool_call>)")),
                  preserved=("<|im_start|>", "<tool_call>", "two words"))
    plan = chat_sampling_plan(engine, result, GREEDY)
    assert plan.triggers[0] == GrammarTrigger("token", "<|im_start|>", im_start)
    assert plan.triggers[1:] == result.grammar_triggers[1:]  # several tokens: stays a word
    assert plan.trigger_tokens == (im_start,)
    assert plan.trigger_patterns == ("<tool_call>", "[\\s\\S]*?(<tool_call>)", "^(?:.|\\n)*(<tool_call>)$")
    assert plan.preserved_tokens == (im_start,)  # only strings that are one token
    assert plan.grammar_kind == GRAMMAR_TEMPLATE and plan.grammar_lazy and not plan.prefill_grammar


def test_single_token_word_trigger_must_be_preserved(engine: LlamaEngine, base: ChatTemplateResult) -> None:
    (hello,) = engine.tokenize("Hello", add_special=False, parse_special=True)
    with pytest.raises(LlamaInferenceException, match="Grammar trigger word should be marked as preserved token: "
                                                       "Hello") as info:
        chat_sampling_plan(engine, lazy(base, (GrammarTrigger("word", "Hello"),)), GREEDY)
    assert info.value.details["token"] == hello


def test_lazy_grammar_needs_a_trigger(engine: LlamaEngine, base: ChatTemplateResult) -> None:
    with pytest.raises(LlamaInferenceException, match="no triggers set for lazy grammar"):
        chat_sampling_plan(engine, lazy(base, ()), GREEDY)


# -- grammar kinds and prefill (common_sampler_init) -----------------------------------------------

def test_template_grammar_is_prefilled_user_grammar_is_not(engine: LlamaEngine, base: ChatTemplateResult) -> None:
    prompt_tokens = engine.tokenize(base.generation_prompt, add_special=False, parse_special=True)
    template_plan = chat_sampling_plan(engine, replace(base, grammar=TOOL_GRAMMAR), GREEDY)
    assert template_plan.grammar_kind == GRAMMAR_TEMPLATE and template_plan.prefill_grammar
    assert template_plan.prefill_tokens == tuple(prompt_tokens)
    user_plan = chat_sampling_plan(engine, base, replace(GREEDY, grammar='root ::= "yes" | "no"'))
    assert user_plan.grammar_kind == GRAMMAR_USER and not user_plan.prefill_grammar
    assert user_plan.prefill_tokens == tuple(prompt_tokens)  # still fed to a reasoning budget
    assert chat_sampling_plan(engine, base, GREEDY).grammar_kind == GRAMMAR_NONE


def test_a_grammar_from_both_sides_is_refused(engine: LlamaEngine, base: ChatTemplateResult) -> None:
    with pytest.raises(LlamaInferenceException, match="cannot be combined"):
        chat_sampling_plan(engine, replace(base, grammar=TOOL_GRAMMAR), replace(GREEDY, grammar='root ::= "x"'))


class SpacePrefixingVocab:
    """A SentencePiece-like tokenizer that puts a space token before a leading special token (none of
    the bundled models does): only what the prefill rule reads."""

    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        assert not add_special and parse_special
        return [1, *(ord(c) for c in text)]

    def token_to_piece(self, token: int, special: bool = False) -> bytes:
        return b" " if token == 1 else chr(token).encode()


def test_prefill_skips_a_leading_space_token_the_prompt_does_not_have(engine: LlamaEngine) -> None:
    vocab = SpacePrefixingVocab()
    assert generation_prompt_tokens(vocab, "<s>") == [ord(c) for c in "<s>"]  # type: ignore[arg-type]
    assert generation_prompt_tokens(vocab, " <s>") == [1, *(ord(c) for c in " <s>")]  # type: ignore[arg-type]
    assert generation_prompt_tokens(vocab, "") == []  # type: ignore[arg-type]
    # the real tokenizer: nothing to drop, the tokens are the prompt's
    for prompt in (" Hi", "<|im_start|>assistant\n"):
        assert generation_prompt_tokens(engine.model.vocab, prompt) == engine.tokenize(prompt, add_special=False,
                                                                              parse_special=True)


def test_a_grammar_that_does_not_start_with_the_generation_prompt_is_refused(engine: LlamaEngine,
                                                                            base: ChatTemplateResult) -> None:
    with pytest.raises(LlamaInferenceException, match="does not start with its generation prompt"):
        chat_sampler_config(engine, replace(base, grammar='root ::= "x"'), GREEDY)
    assert engine.complete("Hi", GREEDY).tokens  # the engine stays usable


# -- reasoning budget (server-common.cpp, common_sampler_init) -------------------------------------

def test_budget_is_created_exactly_when_upstream_creates_it(engine: LlamaEngine, base: ChatTemplateResult) -> None:
    thinking = replace(base, thinking_start_tag="<think>", thinking_end_tags=("</think>", "<tool_call>"))
    assert chat_sampling_plan(engine, thinking, GREEDY).budget is None  # no budget, no lazy grammar, no control
    plan = chat_sampling_plan(engine, thinking, GREEDY, 16)
    assert plan.budget is not None and plan.budget.budget == 16
    tokens = [tuple(engine.tokenize(t, add_special=False, parse_special=True)) for t in ("<think>", "</think>",
                                                                                         "<tool_call>")]
    assert plan.budget.start == (tokens[0],) and plan.budget.end == (tokens[1], tokens[2])
    assert plan.budget.forced == tokens[1]  # the first end tag
    unlimited = chat_sampling_plan(engine, thinking, GREEDY, reasoning_control=True).budget
    assert unlimited is not None and unlimited.budget == UNLIMITED
    lazy_grammar = lazy(thinking, (GrammarTrigger("word", "<tool_call>"),))
    assert chat_sampling_plan(engine, lazy_grammar, GREEDY).budget is not None  # thought kept out of the grammar
    message = chat_sampling_plan(engine, thinking, GREEDY, 0, reasoning_budget_message=" Enough.").budget
    assert message is not None
    assert message.forced == tuple(engine.tokenize(" Enough.", add_special=False, parse_special=True)) + tokens[1]
    # the server passes no budget fields without end tags, and a budget needs a start tag
    assert chat_sampling_plan(engine, replace(thinking, thinking_end_tags=()), GREEDY, 16).budget is None
    assert chat_sampling_plan(engine, replace(thinking, thinking_start_tag=""), GREEDY, 16).budget is None


@pytest.mark.parametrize("bad", [-2, 2**31, 1.5, True])
def test_bad_budget_values(engine: LlamaEngine, base: ChatTemplateResult, bad: object) -> None:
    # a request option: the request's error (the server answers it with 400)
    with pytest.raises(LlamaRequestException, match="thinking_budget_tokens"):
        chat_sampling_plan(engine, base, GREEDY, bad)  # type: ignore[arg-type]


# -- stops, suppress tokens, lifetime ---------------------------------------------------------------

def test_stops_and_chain(engine: LlamaEngine) -> None:
    result = engine.chat_template(MESSAGES, tools=TOOLS, tool_choice="required",
                                  custom_template=template("poolside-Laguna-XS-2.1"))
    assert result.additional_stops
    plan = chat_sampling_plan(engine, result, replace(GREEDY, stop=("END",)))
    assert plan.stops == ("END", *result.additional_stops)
    assert plan.suppress_tokens == engine.model.vocab.suppress_tokens() == ()  # SmolLM2 suppresses nothing
    banned = replace(plan, suppress_tokens=(5, 7))
    (bias, _greedy) = banned.chain_specs(replace(GREEDY, logit_bias={5: 2.0, 9: 1.0}))
    assert dict(bias.biases) == {5: float("-inf"), 9: 1.0, 7: float("-inf")}  # type: ignore[attr-defined]


def test_chat_sampling_closes_with_its_model(smollm2_path: Path) -> None:
    eng = LlamaEngine.load(smollm2_path, ModelParams(n_ctx=512, n_threads=1))
    sampling = chat_sampler_config(eng, eng.chat_template(MESSAGES), GREEDY)
    eng.close()
    with pytest.raises(LlamaStateException):
        sampling.end_thought()
    sampling.close()  # idempotent after the model closed it
