"""Generation through the guided sampler on the bundled models: the grammar checked after the chain
gives grammar-first's tokens, named tool choice yields the call, the reasoning budget ends the
thought on time, preserved tokens come out as text. (Equality with llama-server's own sampling:
tests/parity/test_chat_sampling_server.py; speed both ways: scripts/bench/bench_guided.py.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from llamact import GenerationParams, LlamaEngine, ModelParams
from llamact.chat.result import ChatTemplateResult
from llamact.engine.chat_sampling import chat_sampler_config
from llamact.engine.generator import GenerationChunk, StopReason, generate
from llamact.native.guided import GuidedSampler, GuidedStats
from llamact.native.reasoning_budget import BudgetState
from llamact.native.sampler import Greedy

pytestmark = pytest.mark.model

TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Get the weather for a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "calculate", "description": "Evaluate an arithmetic expression",
     "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}},
]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


def load(path: Path) -> Iterator[LlamaEngine]:
    with LlamaEngine.load(path, ModelParams(n_ctx=4096, n_threads=1, n_threads_batch=1)) as eng:
        yield eng


@pytest.fixture(scope="module")
def engine(smollm2_path: Path) -> Iterator[LlamaEngine]:
    yield from load(smollm2_path)


@pytest.fixture(scope="module")
def gemma(gemma3_path: Path) -> Iterator[LlamaEngine]:
    yield from load(gemma3_path)


def apply(engine: LlamaEngine, name: str, tool_choice: object, tools: object = TOOLS) -> ChatTemplateResult:
    return engine.chat_template(MESSAGES, tools=tools, tool_choice=tool_choice,  # type: ignore[arg-type]
                                custom_template=(TEMPLATES / f"{name}.jinja").read_text())


def run_with_stats(engine: LlamaEngine, result: ChatTemplateResult, max_tokens: int, budget: int | None = None,
                   grammar_first: bool = False, params: GenerationParams | None = None
                   ) -> tuple[list[GenerationChunk], GuidedStats]:
    params = params or GenerationParams(greedy=True, max_tokens=max_tokens)
    with chat_sampler_config(engine, result, params, budget, grammar_first=grammar_first) as sampling:
        prompt = engine.tokenize(result.prompt, add_special=True, parse_special=True)
        engine.context.memory_clear()
        chunks = list(generate(engine.context, sampling.sampler, prompt, params.max_tokens, sampling.stops,
                               params.render_special))
        return chunks, sampling.sampler.stats


def run(engine: LlamaEngine, result: ChatTemplateResult, max_tokens: int, budget: int | None = None,
        grammar_first: bool = False, params: GenerationParams | None = None) -> list[GenerationChunk]:
    return run_with_stats(engine, result, max_tokens, budget, grammar_first, params)[0]


def tokens_of(chunks: list[GenerationChunk]) -> list[int]:
    return [c.token for c in chunks if c.token is not None]


# -- the grammar checked after the chain = the grammar over every candidate -------------------------

SAME_TOKEN_CASES = [
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "required"),
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "named"),
    ("meta-llama-Llama-3.1-8B-Instruct", "named"),
    ("mistralai-Mistral-Nemo-Instruct-2407", "required"),
    ("mistralai-Mistral-Nemo-Instruct-2407", "named"),
    ("Qwen3-Coder", "named"),
    ("openai-gpt-oss-120b", "required"),
]


SEEN: list[GuidedStats] = []


@pytest.mark.parametrize(("name", "choice"), SAME_TOKEN_CASES, ids=[f"{n}-{c}" for n, c in SAME_TOKEN_CASES])
def test_grammar_check_gives_grammar_first_tokens(engine: LlamaEngine, name: str, choice: str) -> None:
    result = apply(engine, name, NAMED if choice == "named" else choice)
    assert result.grammar and not result.grammar_lazy
    checked, stats = run_with_stats(engine, result, 40)
    first, first_stats = run_with_stats(engine, result, 40, grammar_first=True)
    assert tokens_of(checked) == tokens_of(first)
    assert first_stats.full_passes == first_stats.sampled  # grammar-first: the whole vocabulary every token
    assert stats.full_passes + stats.runners_up == stats.refused < stats.sampled == first_stats.sampled
    SEEN.append(stats)


def test_the_cases_above_took_every_path() -> None:
    # accepted first choices, refused ones replaced by a runner-up, and full grammar passes all occurred
    assert len(SEEN) == len(SAME_TOKEN_CASES)
    assert sum(s.runners_up for s in SEEN) > 0 and sum(s.full_passes for s in SEEN) > 0
    assert sum(s.sampled - s.refused for s in SEEN) > sum(s.refused for s in SEEN)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "choice"), [("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "named"),
                                              ("mistralai-Mistral-Nemo-Instruct-2407", "required")])
def test_grammar_check_gives_grammar_first_tokens_gemma(gemma: LlamaEngine, name: str, choice: str) -> None:
    result = apply(gemma, name, NAMED if choice == "named" else choice)
    assert tokens_of(run(gemma, result, 32)) == tokens_of(run(gemma, result, 32, grammar_first=True))


def test_sampled_chain_redraws_inside_the_grammar(engine: LlamaEngine) -> None:
    # with a seeded dist sampler, every emitted token still follows the grammar (a rejected draw is
    # redrawn among the grammar's candidates); the parse of the output is the named call
    result = apply(engine, "NousResearch-Hermes-3-Llama-3.1-8B-tool_use", NAMED)
    params = GenerationParams(max_tokens=60, seed=7, temperature=0.9)
    chunks = run(engine, result, 60, params=params)
    message = result.output_parser().parse("".join(c.text for c in chunks), is_partial=False)
    assert [call.name for call in message.tool_calls] == ["get_weather"]


# -- named tool choice: the call arrives ---------------------------------------------------------

# (GPT-OSS is left out: SmolLM2 thinks in its analysis channel until max_tokens, and the reasoning
# budget cannot stop it there, as in llama-server: SmolLM2 spells the channel tags in other tokens
# than the tags alone, and the budget matches tags as token sequences.)
NAMED_FAMILIES = ["NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "meta-llama-Llama-3.1-8B-Instruct",
                  "mistralai-Mistral-Nemo-Instruct-2407", "Qwen3-Coder", "Qwen-Qwen3-0.6B"]


@pytest.mark.parametrize("name", NAMED_FAMILIES)
def test_named_tool_call_arrives(engine: LlamaEngine, name: str) -> None:
    result = apply(engine, name, NAMED)
    assert result.named_tool == "get_weather"
    chunks = run(engine, result, 120)
    assert chunks[-1].stop_reason in (StopReason.EOG, StopReason.STOP_STRING), chunks[-1]
    text = "".join(c.text for c in chunks)
    message = result.output_parser().parse(text, is_partial=False)
    assert [call.name for call in message.tool_calls] == ["get_weather"], text
    arguments = json.loads(message.tool_calls[0].arguments)
    assert isinstance(arguments, dict) and isinstance(arguments.get("city"), str), text
    assert not message.content.strip(), text


# -- the reasoning budget on a real model --------------------------------------------------------

@pytest.mark.parametrize("budget", [1, 4, 9])
def test_budget_ends_the_thought_with_the_end_tag_after_n_tokens(engine: LlamaEngine, budget: int) -> None:
    result = apply(engine, "Qwen-QwQ-32B", "none", tools=None)  # its generation prompt opens "<think>\n"
    with chat_sampler_config(engine, result, GenerationParams(greedy=True), budget) as sampling:
        plan_budget = sampling.plan.budget
        assert plan_budget is not None
        start, end = plan_budget.start[0], plan_budget.end[0]
        prefill = list(sampling.plan.prefill_tokens)
    # the tokens after the start tag already in the prompt count against the budget, as upstream's
    after_start = next(len(prefill) - i - len(start) for i in range(len(prefill)) if tuple(prefill[i:i + len(start)])
                       == start)
    tokens = tokens_of(run(engine, result, budget + 20, budget))
    thought = budget - after_start
    assert tokens[thought:thought + len(end)] == list(end), engine.detokenize(tokens)
    assert list(end) not in [tokens[i:i + len(end)] for i in range(thought)]  # not closed earlier
    free = tokens_of(run(engine, result, budget + 20))
    assert free[:thought] == tokens[:thought] and free[thought:thought + len(end)] != list(end)
    message = result.output_parser().parse(engine.detokenize(tokens), is_partial=True)
    assert message.reasoning_content.strip() == engine.detokenize(tokens[:thought]).strip()


def test_end_thought_forces_the_end_tag_next(engine: LlamaEngine) -> None:
    result = apply(engine, "Qwen-QwQ-32B", "none", tools=None)
    params = GenerationParams(greedy=True, max_tokens=12)
    with chat_sampler_config(engine, result, params, reasoning_control=True) as sampling:
        sampler = sampling.sampler
        assert sampler.budget_state is BudgetState.COUNTING  # the prompt opened the thought
        prompt = engine.tokenize(result.prompt, add_special=True, parse_special=True)
        engine.context.memory_clear()
        stream = generate(engine.context, sampler, prompt, params.max_tokens, sampling.stops)
        first = [next(stream).token for _ in range(3)]
        assert sampling.end_thought() and not sampling.end_thought()
        rest = [c.token for c in stream if c.token is not None]
        end = sampling.plan.budget.end[0] if sampling.plan.budget else ()
        assert rest[:len(end)] == list(end), engine.detokenize(first + rest)
        assert sampler.budget_state is BudgetState.DONE


# -- preserved tokens are rendered as text ------------------------------------------------------------

def test_preserved_tokens_render_as_text(engine: LlamaEngine) -> None:
    (im_start,) = engine.tokenize("<|im_start|>", add_special=False, parse_special=True)
    base = engine.chat_template(MESSAGES)
    params = GenerationParams(greedy=True, max_tokens=3, logit_bias={im_start: 100.0})  # the model says it
    plain = run(engine, base, 3, params=params)
    preserved = run(engine, replace(base, preserved_tokens=("<|im_start|>",)), 3, params=params)
    special = run(engine, base, 3, params=replace(params, render_special=True))
    assert tokens_of(plain) == tokens_of(preserved) == [im_start] * 3
    assert "".join(c.text for c in plain) == ""  # a special token, not rendered
    assert "".join(c.text for c in preserved) == "<|im_start|>" * 3
    assert "".join(c.text for c in special) == "<|im_start|>" * 3


def test_a_preserved_end_token_ends_the_text_with_its_own(engine: LlamaEngine) -> None:
    # llama-server appends the end token's piece to the text: "<|eom_id|>" when preserved, as
    # Functionary v3.1's template does on Llama 3 (SmolLM2's end token stands in for it here)
    (im_end,) = engine.tokenize("<|im_end|>", add_special=False, parse_special=True)
    assert engine.model.vocab.is_eog(im_end)
    base = engine.chat_template(MESSAGES)
    params = GenerationParams(greedy=True, max_tokens=3, logit_bias={im_end: 100.0})
    plain = run(engine, base, 3, params=params)
    preserved = run(engine, replace(base, preserved_tokens=("<|im_end|>",)), 3, params=params)
    special = run(engine, base, 3, params=replace(params, render_special=True))
    for chunks in (plain, preserved, special):
        assert chunks[-1].stop_reason is StopReason.EOG and tokens_of(chunks) == []
    assert [c.text for c in plain] == [""]
    assert [c.text for c in preserved] == [c.text for c in special] == ["<|im_end|>"]
    stopped = run(engine, replace(base, preserved_tokens=("<|im_end|>",)), 3,
                  params=replace(params, stop=("im_end",)))
    assert [c.text for c in stopped] == ["<|"] and stopped[-1].stop_reason is StopReason.STOP_STRING


def test_guided_sampler_refuses_tokens_its_grammar_does_not_admit(engine: LlamaEngine) -> None:
    from llamact.errors import LlamaInferenceException
    from llamact.native.sampler import Grammar

    with GuidedSampler(engine.model, [Greedy()], grammar=Grammar('root ::= "yes"')) as sampler:
        (no,) = engine.tokenize("no", add_special=False)
        with pytest.raises(LlamaInferenceException, match="not allowed by the grammar"):
            sampler.accept(no)
        eos = engine.model.vocab.eos
        assert eos is not None
        with pytest.raises(LlamaInferenceException, match="not allowed by the grammar"):
            sampler.accept(eos)  # llama.cpp would abort the process on an end token the grammar refuses
        (yes,) = engine.tokenize("yes", add_special=False)
        sampler.accept(yes)
        sampler.accept(eos)


def test_engine_generate_with_a_chat_sampling(engine: LlamaEngine) -> None:
    # what create() does: the request's sampler and stops in place of GenerationParams' chain and stop
    from llamact.errors import LlamaStateException

    result = apply(engine, "NousResearch-Hermes-3-Llama-3.1-8B-tool_use", NAMED)
    params = GenerationParams(greedy=True, max_tokens=80, stop=("never",))
    prompt = engine.tokenize(result.prompt, add_special=True, parse_special=True)
    sampling = chat_sampler_config(engine, result, params)
    stream = engine.generate(prompt, params, sampling=sampling)
    other = chat_sampler_config(engine, result, params)
    with pytest.raises(LlamaStateException, match="already generating"):
        engine.generate(prompt, params, sampling=other)
    assert other.sampler.closed  # handed over, so closed with the refused call
    text = "".join(chunk.text for chunk in stream)
    assert sampling.sampler.closed  # closed with the stream
    message = result.output_parser().parse(text, is_partial=False)
    assert [call.name for call in message.tool_calls] == ["get_weather"]
    assert text == "".join(c.text for c in run(engine, result, 80))
