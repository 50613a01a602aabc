"""The sampling half of a chat request against llama-server itself (llamact/parity/completion_reference.py).

For each case the apply result (llamact's, equal to upstream's) goes to llama-server's ``/completion``
as the chat path would send it, and to ``chat_sampler_config`` + the engine's generation loop. Compared:
the triggers and preserved token ids the server derived, and the greedy tokens both generate (grammar
checked after the chain, prefill, lazy triggers, reasoning budget, stops). llamact runs with the
server's thread count: the CPU backend's numbers change with it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from llamact import GenerationParams, LlamaEngine, ModelParams
from llamact.chat.result import ChatTemplateResult
from llamact.engine.chat_sampling import chat_sampler_config, chat_sampling_plan
from llamact.engine.generator import StopReason, generate
from llamact.parity.completion_reference import completion_body, server_sampling
from llamact.parity.llama_server import LlamaServer, ServerConfig

pytestmark = [pytest.mark.parity, pytest.mark.model, pytest.mark.slow]

TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"
MESSAGES = [{"role": "user", "content": "What is the weather in Paris? Answer briefly."}]
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Get the weather for a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "calculate", "description": "Evaluate an arithmetic expression",
     "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}},
]
NAMED = {"type": "function", "function": {"name": "get_weather"}}
N_PREDICT = 48

# (template, tool_choice): lazy grammars with word / pattern triggers, "required" grammars (prefilled;
# deviation 19's calls alone, and upstream's under upstream_compat), named tool choice (a grammar on every
# token: the check-then-resample path)
TOOL_CASES = [
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "auto"),
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "required"),
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "named"),
    ("meta-llama-Llama-3.1-8B-Instruct", "named"),
    ("mistralai-Mistral-Nemo-Instruct-2407", "auto"),
    ("mistralai-Mistral-Nemo-Instruct-2407", "named"),
    ("Qwen-Qwen3-0.6B", "required"),
    ("Qwen3-Coder", "auto"),
    ("Qwen3-Coder", "named"),
    ("openai-gpt-oss-120b", "required"),
    ("Qwen-Qwen3-0.6B", "named"),
    ("Qwen-QwQ-32B", "named"),
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "required_upstream"),   # upstream_compat: upstream's grammar
]
# templates whose generation prompt opens the thought, with budgets (-1: none; 0: closed at once)
BUDGET_CASES = [("Qwen-QwQ-32B", 0), ("Qwen-QwQ-32B", 6), ("Qwen-QwQ-32B", -1), ("Qwen3.5-4B", 4),
                ("MiniMax-M2", 3)]


@pytest.fixture(scope="module")
def engine(smollm2_path: Path) -> Iterator[LlamaEngine]:
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=4096, n_threads=1, n_threads_batch=1)) as eng:
        yield eng


@pytest.fixture(scope="module")
def server(smollm2_path: Path) -> Iterator[LlamaServer]:
    with LlamaServer(ServerConfig(smollm2_path)) as srv:
        yield srv


def apply(engine: LlamaEngine, name: str, choice: str, **kwargs: object) -> ChatTemplateResult:
    source = (TEMPLATES / f"{name}.jinja").read_text()
    tools = TOOLS if choice != "none" else None
    if choice == "required_upstream":
        choice, kwargs = "required", {**kwargs, "upstream_compat": True}
    return engine.chat_template(MESSAGES, tools=tools, tool_choice=NAMED if choice == "named" else choice,
                                custom_template=source, **kwargs)  # type: ignore[arg-type]


def llamact_tokens(engine: LlamaEngine, result: ChatTemplateResult, budget: int = -1,
                   grammar_first: bool = False, max_tokens: int = N_PREDICT) -> tuple[list[int], StopReason]:
    params = GenerationParams(greedy=True, max_tokens=max_tokens)
    with chat_sampler_config(engine, result, params, budget, grammar_first=grammar_first) as sampling:
        prompt = engine.tokenize(result.prompt, add_special=True, parse_special=True)
        engine.context.memory_clear()
        chunks = list(generate(engine.context, sampling.sampler, prompt, params.max_tokens, sampling.stops))
    reason = chunks[-1].stop_reason
    assert reason is not None
    return [c.token for c in chunks if c.token is not None], reason


def assert_same(engine: LlamaEngine, server: LlamaServer, result: ChatTemplateResult, budget: int = -1) -> None:
    answer = server_sampling(server.post("/completion", completion_body(result, n_predict=N_PREDICT,
                                                                        thinking_budget_tokens=budget)))
    plan = chat_sampling_plan(engine, result, GenerationParams(greedy=True), budget)
    assert plan.triggers == answer.triggers
    assert plan.preserved_tokens == answer.preserved_tokens
    assert plan.grammar_lazy == answer.grammar_lazy
    tokens, _ = llamact_tokens(engine, result, budget)
    assert tokens == list(answer.tokens), (
        f"llama-server: {answer.content!r}\nllamact:      {engine.detokenize(tokens)!r}")


@pytest.mark.parametrize(("name", "choice"), TOOL_CASES, ids=[f"{n}-{c}" for n, c in TOOL_CASES])
def test_tool_sampling_equals_llama_server(engine: LlamaEngine, server: LlamaServer, name: str, choice: str) -> None:
    assert_same(engine, server, apply(engine, name, choice))


# the README's first tool example: SmolLM2's template has no tool-call format, so it brings its own
README_TEMPLATE = """{% for m in messages %}<|im_start|>{{ m.role }}
{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>
{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}
</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


def test_a_named_call_ends_where_its_grammar_ends(engine: LlamaEngine, server: LlamaServer) -> None:
    """Issue 43: with the README's example SmolLM2 spelt the forced call, then wrote "\\n\\n" and blanks
    that the grammar's trailing whitespace admitted, and ran out of 64 tokens (finish_reason length,
    no call). The named grammar (deviation 9) now ends with the call: llama.cpp's sampler allows only
    the end token there, in llama-server as in llamact (the same tokens). Given the grammar as it was,
    llama-server writes the same blanks and stops at the limit: the grammar was the cause, not the
    sampling."""
    result = engine.chat_template([{"role": "user", "content": "Weather in Paris?"}], tools=TOOLS[:1],
                                  tool_choice=NAMED, custom_template=README_TEMPLATE)
    assert "tool-calls ::= (tool-call)\n" in result.grammar
    answer = server.post("/completion", completion_body(result, n_predict=64))
    assert answer["stop_type"] == "eos" and answer["content"].endswith("</tool_call>"), answer["content"]
    tokens, reason = llamact_tokens(engine, result, max_tokens=64)
    assert (tokens, reason) == (list(server_sampling(answer).tokens), StopReason.EOG)
    before = replace(result, grammar=result.grammar.replace("tool-calls ::= (tool-call)\n",
                                                            "tool-calls ::= (tool-call space)\n"))
    answer = server.post("/completion", completion_body(before, n_predict=64))
    assert answer["stop_type"] == "limit" and "</tool_call>" in answer["content"]
    assert not answer["content"].endswith("</tool_call>") and not answer["content"].split("</tool_call>")[1].strip()


def test_a_required_reply_is_calls_where_upstreams_grammar_lets_text_come_first(engine: LlamaEngine,
                                                                                 server: LlamaServer) -> None:
    """Deviation 19: upstream's "required" grammar admits content before the calls and whitespace after
    them; given it, llama-server lets SmolLM2 write prose here and stops at the limit (its chat answer:
    the apply result is upstream's, tools/server passes that grammar). Given the default mode's grammar
    (calls alone), it writes the call at once and ends there, with llamact's tokens."""
    name = "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"
    theirs = apply(engine, name, "required", upstream_compat=True)
    ours = apply(engine, name, "required")
    assert ours.grammar != theirs.grammar and ours.prompt == theirs.prompt
    upstream = server.post("/completion", completion_body(theirs, n_predict=64))
    assert upstream["stop_type"] == "limit" and not upstream["content"].startswith("<tool_call>"), upstream["content"]
    answer = server.post("/completion", completion_body(ours, n_predict=64))
    assert answer["stop_type"] == "eos" and answer["content"].startswith("<tool_call>"), answer["content"]
    assert answer["content"].endswith("</tool_call>"), answer["content"]
    tokens, reason = llamact_tokens(engine, ours, max_tokens=64)
    assert (tokens, reason) == (list(server_sampling(answer).tokens), StopReason.EOG)


@pytest.mark.parametrize(("name", "budget"), BUDGET_CASES, ids=[f"{n}-{b}" for n, b in BUDGET_CASES])
def test_reasoning_budget_equals_llama_server(engine: LlamaEngine, server: LlamaServer, name: str,
                                              budget: int) -> None:
    result = apply(engine, name, "none")
    assert result.thinking_end_tags
    assert_same(engine, server, result, budget)


def test_reasoning_budget_with_tools_equals_llama_server(engine: LlamaEngine, server: LlamaServer) -> None:
    # a lazy grammar beside a thought: the grammar stays out of the thought, then reads its end tag
    result = apply(engine, "Qwen-QwQ-32B", "auto")
    assert result.grammar_lazy and result.thinking_end_tags
    assert_same(engine, server, result, 5)


@pytest.mark.parametrize("preserved", [(), ("<|im_end|>",)])
def test_end_token_text_equals_llama_server(engine: LlamaEngine, server: LlamaServer,
                                            preserved: tuple[str, ...]) -> None:
    # the end token's own piece ends the text when it is preserved (SmolLM2's <|im_end|>, forced by a bias)
    (im_end,) = engine.tokenize("<|im_end|>", add_special=False, parse_special=True)
    result = replace(engine.chat_template(MESSAGES), preserved_tokens=preserved)
    body = completion_body(result, n_predict=4) | {"logit_bias": [[im_end, 100.0]]}
    answer = server.post("/completion", body)
    params = GenerationParams(greedy=True, max_tokens=4, logit_bias={im_end: 100.0})
    with chat_sampler_config(engine, result, params) as sampling:
        prompt = engine.tokenize(result.prompt, add_special=True, parse_special=True)
        engine.context.memory_clear()
        text = "".join(c.text for c in generate(engine.context, sampling.sampler, prompt, 4, sampling.stops))
    assert text == answer["content"] == ("<|im_end|>" if preserved else "")


SEEDED_CASES = [("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "named", 7), ("Qwen-QwQ-32B", "auto", 123),
                ("mistralai-Mistral-Nemo-Instruct-2407", "required", 7)]


@pytest.mark.parametrize(("name", "choice", "seed"), SEEDED_CASES, ids=[f"{n}-{c}" for n, c, _ in SEEDED_CASES])
def test_seeded_sampling_equals_llama_server(engine: LlamaEngine, server: LlamaServer, name: str, choice: str,
                                            seed: int) -> None:
    # upstream's whole default chain (penalties ... top-k, top-p, min-p, temperature, dist) with a seed:
    # a refused draw is redrawn after the grammar pass, the random state moving twice, as upstream's
    result = apply(engine, name, choice)
    body = completion_body(result, n_predict=N_PREDICT, thinking_budget_tokens=6) | {"seed": seed, "temperature": 0.9}
    answer = server_sampling(server.post("/completion", body))
    params = GenerationParams(max_tokens=N_PREDICT, seed=seed, temperature=0.9)
    with chat_sampler_config(engine, result, params, 6) as sampling:
        prompt = engine.tokenize(result.prompt, add_special=True, parse_special=True)
        engine.context.memory_clear()
        chunks = list(generate(engine.context, sampling.sampler, prompt, N_PREDICT, sampling.stops))
        refused = sampling.sampler.stats.refused
    assert [c.token for c in chunks if c.token is not None] == list(answer.tokens), answer.content
    if choice == "named":
        assert refused > 0  # the redraw path ran


RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {"name": "place", "schema": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.mark.parametrize("name", [None, "Qwen-Qwen3-0.6B", "mistralai-Mistral-Nemo-Instruct-2407"])
def test_response_format_sampling_equals_llama_server(engine: LlamaEngine, server: LlamaServer,
                                                      name: str | None) -> None:
    # a non-lazy output-format grammar, prefilled with the generation prompt (None: SmolLM2's own template)
    source = (TEMPLATES / f"{name}.jinja").read_text() if name else None
    result = engine.chat_template([{"role": "user", "content": "Where is the Eiffel tower? Reply in JSON."}],
                                  response_format=RESPONSE_FORMAT, custom_template=source)
    assert result.grammar and not result.grammar_lazy
    assert_same(engine, server, result)
