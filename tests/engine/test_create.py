"""LlamaEngine.create(): the chunk stream, OpenAI shapes, named tool choice for every template
family on the bundled model, and bad input (typed errors; the engine usable after each).

The tool's only argument is an integer in 1..7, so the grammar (not the tiny model's judgement)
decides when a call is complete: whatever the family's layout, a forced call must end, parse, and
validate against the schema.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from llamact import AsyncLlamaEngine, GenerationParams, LlamaEngine, ModelParams
from llamact.chat import ChatRequestError, apply_chat_template
from llamact.chat.templates import normalized_source
from llamact.errors import LlamaException, LlamaStateException, LlamaUnsupportedException
from llamact.grammar import GbnfAcceptor, parse_gbnf
from llamact.jinja import JinjaRuntimeError

pytestmark = pytest.mark.model

TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"
SCHEMA = {"type": "object", "properties": {"day": {"type": "integer", "minimum": 1, "maximum": 7}},
          "required": ["day"]}
FORECAST = {"type": "function", "function": {"name": "forecast", "description": "The weather forecast for a day",
                                             "parameters": SCHEMA}}
OTHER = {"type": "function", "function": {"name": "other", "description": "Something else",
                                          "parameters": {"type": "object", "properties": {}}}}
ASK = [{"role": "user", "content": "What will the weather be on day 3?"}]
# one earlier exchange in the history: a tiny model copies the template's call layout from it
EXAMPLE_CALL = {"type": "function", "id": "Call00001",  # 9 alphanumerics: Mistral's templates insist
                "function": {"name": "forecast", "arguments": '{"day": 1}'}}
FEW_SHOT = [{"role": "user", "content": "And on day 1?"},
            {"role": "assistant", "content": "", "tool_calls": [EXAMPLE_CALL]},
            {"role": "tool", "tool_call_id": "Call00001", "name": "forecast", "content": "sunny"},
            {"role": "assistant", "content": "It will be sunny."}, *ASK]
NAMED = {"type": "function", "function": {"name": "forecast"}}
GREEDY = GenerationParams(greedy=True, max_tokens=96)

# one vendored template per family (the specialized families, and autoparser layouts)
FAMILY_TEMPLATES = [
    "mistralai-Ministral-3-14B-Reasoning-2512", "muse-glimmer", "meetkai-functionary-medium-v3.2",
    "Kimi-K2-Instruct", "inclusionai-ling-3.0-flash", "GigaChat3-10B-A1.8B", "MiniMax-M3", "deepseek-ai-DeepSeek-V3.2",
    "google-gemma-4-31B-it", "openbmb-MiniCPM5-1B", "Qwen3-Coder",
    # autoparser: JSON in tags, bare JSON, tagged arguments, [TOOL_CALLS] arrays, Python-ish, reasoning first
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "meta-llama-Llama-3.1-8B-Instruct",
    "mistralai-Mistral-Nemo-Instruct-2407", "GLM-4.6", "ByteDance-Seed-OSS", "Qwen-Qwen3-0.6B",
    "ibm-granite-granite-4.0", "deepseek-ai-DeepSeek-V3.1",
]
# Families whose forced grammar admits more than the bundled tiny model can finish within max_tokens:
# the check there is that every token stayed inside the forced grammar (no free content).
UNFINISHED_BY_SMOLLM2 = {
    # the thought is always opened (enable_thinking ignored) and the budget cannot see its start:
    # SmolLM2's BPE splits "<|open|>think<|sep|>" differently inside the prompt than alone
    "Kimi-K3": "thinks until max_tokens",
    "Cohere2MoE": "thinks until max_tokens",
    # upstream's LFM2 grammar takes any Python/JSON value for an argument, repeated at will
    "LFM2-8B-A1B": "repeats the argument",
    "LFM2.5-Instruct": "repeats the argument",
    # the family admits any number of analysis messages before the call
    "openai-gpt-oss-120b": "writes analysis messages until max_tokens",
}


@pytest.fixture(scope="module")
def engine(smollm2_path: Path):
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=4096, n_threads=1)) as eng:
        yield eng


def _template(name: str) -> str:
    return (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")


def _forced(engine: LlamaEngine, template: str) -> Any:
    # thinking off, and a budget of 0 for a thought all the same: the tiny model would think until
    # max_tokens (its BPE splits the thought tags differently inside the prompt than alone, so the
    # budget may not see a thought start, as upstream's would not)
    return engine.complete_chat(FEW_SHOT, tools=[FORECAST, OTHER], tool_choice=NAMED, custom_template=template,
                                    params=GREEDY, template_now=1768478400, enable_thinking=False,
                                    thinking_budget_tokens=0)


@pytest.mark.parametrize("name", FAMILY_TEMPLATES)
def test_a_named_tool_choice_calls_that_function_with_valid_arguments(engine: LlamaEngine, name: str) -> None:
    template = _template(name)
    family = apply_chat_template(template, ASK, tools=[FORECAST, OTHER], tool_choice=NAMED).family
    completion = _forced(engine, template)
    calls = completion.tool_calls
    assert completion.finish_reason == "tool_calls", (family, completion.text)
    assert len(calls) == 1 and calls[0].name == "forecast", (family, completion.text)
    jsonschema.validate(json.loads(calls[0].arguments), SCHEMA)
    assert completion.content.strip() == "", (family, completion.content)


@pytest.mark.parametrize("name", sorted(UNFINISHED_BY_SMOLLM2))
def test_a_named_tool_choice_keeps_every_token_inside_the_forced_grammar(engine: LlamaEngine, name: str) -> None:
    template = _template(name)
    completion = _forced(engine, template)
    assert completion.finish_reason == "length", UNFINISHED_BY_SMOLLM2[name]
    forced = engine.chat_template(FEW_SHOT, tools=[FORECAST, OTHER], tool_choice=NAMED, custom_template=template,
                                  template_now=1768478400, enable_thinking=False)
    assert completion.prompt == forced.prompt
    acceptor = GbnfAcceptor(parse_gbnf(forced.grammar))
    assert acceptor.is_viable_prefix(forced.generation_prompt + completion.text), completion.text


def test_the_stream_reassembles_to_the_final_message_and_speaks_openai(engine: LlamaEngine) -> None:
    template = _template("Qwen-Qwen3-0.6B")
    with engine.create(ASK, tools=[FORECAST], tool_choice="required", custom_template=template,
                       params=GREEDY) as stream:
        chunks = list(stream)
        completion = stream.completion()
    assert chunks[0].role == "assistant" and chunks[-1].finish_reason == completion.finish_reason
    assert all(c.finish_reason is None for c in chunks[:-1])
    content = "".join(c.content or "" for c in chunks)
    thinking = "".join(c.thinking or "" for c in chunks)
    assert (content, thinking) == (completion.content, completion.thinking)
    arguments: dict[int, str] = {}
    for c in chunks:
        for call in c.tool_calls:
            arguments[call.index] = arguments.get(call.index, "") + call.arguments
    assert [arguments[i] for i in sorted(arguments)] == [c.arguments for c in completion.tool_calls]
    usage, timings = chunks[-1].usage, chunks[-1].timings
    assert usage is not None and timings is not None and usage.completion_tokens == timings.predicted_n > 0
    wire = [j for c in chunks for j in c.to_openai("chatcmpl-x", "m", 1, include_usage=True)]
    assert wire[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert wire[-1]["choices"] == [] and wire[-1]["usage"]["total_tokens"] == usage.total_tokens
    assert "timings" in wire[-1] and all(j["object"] == "chat.completion.chunk" for j in wire)
    whole = completion.to_openai("chatcmpl-x", "m", 1)
    assert whole["object"] == "chat.completion" and whole["choices"][0]["finish_reason"] == completion.finish_reason
    json.dumps(wire), json.dumps(whole)  # plain JSON


def test_both_modes_generate_the_same_tokens(engine: LlamaEngine) -> None:
    """The output-side deviations change what is read from the tokens, not the tokens (a named choice:
    deviation 9's grammar in both modes; "required" has deviation 19's grammar only by default)."""
    template = _template("NousResearch-Hermes-3-Llama-3.1-8B-tool_use")
    texts = []
    # without the prompt cache: the second request would evaluate only the last prompt token, and
    # logits depend (slightly) on how a prompt was batched
    fresh = GenerationParams(greedy=True, max_tokens=96, cache_prompt=False)
    for compat in (False, True):
        completion = engine.complete_chat(ASK, tools=[FORECAST], tool_choice=NAMED, custom_template=template,
                                          params=fresh, upstream_compat=compat)
        texts.append(completion.text)
    assert texts[0] == texts[1]


def test_required_answers_with_calls_alone(engine: LlamaEngine) -> None:
    """Deviation 19: by default every token of a "required" reply is inside a grammar of calls alone (the
    envelope first, nothing after the last call); upstream_compat keeps upstream's grammar, which lets
    the model write text first (what llama-server then does with SmolLM2:
    tests/parity/test_chat_sampling_server.py)."""
    template = _template("NousResearch-Hermes-3-Llama-3.1-8B-tool_use")
    ask = [{"role": "user", "content": "What is the weather in Paris? Answer briefly."}]
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    params = GenerationParams(greedy=True, max_tokens=64, cache_prompt=False)
    results = {}
    for compat in (False, True):
        forced = engine.chat_template(ask, tools=[weather, FORECAST], tool_choice="required",
                                      custom_template=template, upstream_compat=compat)
        completion = engine.complete_chat(ask, tools=[weather, FORECAST], tool_choice="required",
                                          custom_template=template, params=params, upstream_compat=compat)
        assert GbnfAcceptor(parse_gbnf(forced.grammar)).is_viable_prefix(forced.generation_prompt + completion.text)
        results[compat] = (forced, completion)
    (ours_grammar, ours), (theirs_grammar, _) = results[False], results[True]
    assert ours_grammar.grammar != theirs_grammar.grammar and ours_grammar.prompt == theirs_grammar.prompt
    assert ours.text.startswith("<tool_call>") and ours.content == "", ours.text
    if ours.finish_reason == "tool_calls":
        assert {c.name for c in ours.tool_calls} <= {"get_weather", "forecast"} and ours.tool_calls
        assert ours.text.endswith("</tool_call>"), ours.text
    else:
        assert ours.finish_reason == "length" and not ours.tool_calls   # deviation 5: a cut reply has no calls
    acceptor = GbnfAcceptor(parse_gbnf(theirs_grammar.grammar))
    assert acceptor.is_viable_prefix(theirs_grammar.generation_prompt + "Sure, ")   # upstream's: text first


# -- bad input: typed errors, and the engine stays usable --------------------------------------------


def _still_usable(engine: LlamaEngine) -> None:
    done = engine.complete_chat(ASK, params=GenerationParams(greedy=True, max_tokens=4))
    assert done.finish_reason in ("stop", "length")


@pytest.mark.parametrize("call, error", [
    (lambda e: e.create(ASK, tools=[{"type": "function", "function": {"description": "x"}}]), ChatRequestError),
    (lambda e: e.create(ASK, tool_choice="required"), ChatRequestError),
    (lambda e: e.create(ASK, tools=[FORECAST], tool_choice={"type": "function", "function": {"name": "nope"}}),
     ChatRequestError),
    (lambda e: e.create(ASK, response_format={"type": "xml"}), LlamaUnsupportedException),
    # the template raises while the autoparser renders it: upstream's "Unable to generate parser ..."
    (lambda e: e.create(ASK, custom_template="{{ raise_exception('no thanks') }}"), LlamaUnsupportedException),
    (lambda e: e.create(ASK, custom_template=_template("Qwen3-Coder").replace(
        "{%- for message in loop_messages %}", "{{ raise_exception('no thanks') }}{%- for message in loop_messages %}",
        1)), JinjaRuntimeError),
    (lambda e: e.create([{"role": "user"}]), ChatRequestError),
])
def test_bad_requests_raise_typed_errors_and_leave_the_engine_usable(engine: LlamaEngine, call: Any,
                                                                     error: type[LlamaException]) -> None:
    with pytest.raises(error):
        call(engine)
    _still_usable(engine)


MULTIPLE_OF = {"type": "json_schema", "json_schema": {"schema": {
    "type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}}, "required": ["n"]}}}


def test_a_schema_the_grammar_cannot_enforce_is_refused_before_generating(engine: LlamaEngine) -> None:
    """Deviation 8 in create() as in create_structured (issue 26 found create() generating
    unconstrained '{"n": 10'); upstream_compat=True or lenient_schema=True generates as llama-server does."""
    async def first_async_chunk() -> None:
        async with AsyncLlamaEngine(engine).create(ASK, response_format=MULTIPLE_OF) as stream:
            await anext(aiter(stream))

    for call in (lambda: engine.create(ASK, response_format=MULTIPLE_OF),
                 lambda: engine.complete_chat(ASK, response_format=MULTIPLE_OF),
                 lambda: asyncio.run(first_async_chunk())):
        with pytest.raises(LlamaUnsupportedException, match="'multipleOf' at #/properties/n") as info:
            call()
        assert "upstream_compat=True" in str(info.value)
    _still_usable(engine)
    lenient = engine.complete_chat(ASK, response_format=MULTIPLE_OF, upstream_compat=True,
                                       params=GenerationParams(greedy=True, max_tokens=8))
    assert lenient.content.startswith("{")
    # lenient_schema=True alone (the server's --lenient-schemas) ignores the keyword, the rest of the
    # reply in llamact's mode
    lenient = engine.complete_chat(ASK, response_format=MULTIPLE_OF, lenient_schema=True,
                                   params=GenerationParams(greedy=True, max_tokens=8))
    assert lenient.content.startswith("{")
    # the prompt is still upstream's: rendering does not refuse (llama-server's /apply-template)
    assert engine.chat_template(ASK, response_format=MULTIPLE_OF).prompt


def test_a_second_create_while_one_runs_is_refused(engine: LlamaEngine) -> None:
    with engine.create(ASK, params=GenerationParams(greedy=True, max_tokens=8)) as first:
        next(first)
        with pytest.raises(LlamaStateException):
            engine.create(ASK)
    _still_usable(engine)


def test_a_stream_closed_early_releases_the_engine(engine: LlamaEngine) -> None:
    stream = engine.create(ASK, params=GenerationParams(greedy=True, max_tokens=64))
    next(stream)
    stream.close()
    _still_usable(engine)


def test_cancel_from_another_thread_mid_tool_call_ends_with_cancelled(engine: LlamaEngine) -> None:
    # Inside a call the stream yields nothing (a call is sent whole, deviation 5), so the cancel comes
    # from a watcher thread as soon as the raw output holds the call's name: one token's decode (~10 ms)
    # against a 1 ms poll, with a dozen tokens of the call still to come.
    template = _template("NousResearch-Hermes-3-Llama-3.1-8B-tool_use")
    done = threading.Event()
    with engine.create(ASK, tools=[FORECAST], tool_choice=NAMED, custom_template=template,
                       params=GenerationParams(greedy=True, max_tokens=200)) as stream:

        def watch() -> None:
            while not done.is_set():
                if '"name"' in stream.text:
                    engine.cancel()
                    return
                done.wait(0.001)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            chunks = list(stream)
        finally:
            done.set()
            watcher.join()
    assert '"name"' in stream.text and "</tool_call>" not in stream.text
    assert chunks[-1].finish_reason == "cancelled"
    assert not any(c.tool_calls for c in chunks)  # a cut-short call is never sent (deviation 5)
    _still_usable(engine)


def test_a_call_cut_by_max_tokens_is_not_sent(engine: LlamaEngine) -> None:
    template = _template("NousResearch-Hermes-3-Llama-3.1-8B-tool_use")
    completion = engine.complete_chat(ASK, tools=[FORECAST], tool_choice=NAMED, custom_template=template,
                                          params=GenerationParams(greedy=True, max_tokens=8))
    assert completion.finish_reason == "length" and "<tool_call>" in completion.text
    assert completion.tool_calls == [] and completion.content == ""


README_TEMPLATE = """{% for m in messages %}<|im_start|>{{ m.role }}
{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>
{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}
</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""
README_WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def test_a_named_call_ends_when_the_call_ends(engine: LlamaEngine) -> None:
    """Issue 43, the README's first tool example: the forced call's grammar admitted whitespace after
    it, SmolLM2 wrote "\\n\\n" and blanks instead of its end token and ran out of 64 tokens
    (finish_reason "length", the call withheld). The grammar now ends with the call."""
    completion = engine.complete_chat([{"role": "user", "content": "Weather in Paris?"}], tools=[README_WEATHER],
                                      tool_choice={"type": "function", "function": {"name": "get_weather"}},
                                      custom_template=README_TEMPLATE, params=GREEDY)
    assert completion.finish_reason == "tool_calls" and completion.text.endswith("</tool_call>"), completion.text
    assert [c.name for c in completion.tool_calls] == ["get_weather"]


def test_context_overflow_ends_with_length_or_a_typed_error(smollm2_path: Path) -> None:
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=256, n_threads=1)) as small:
        long_ask = [{"role": "user", "content": "word " * 400}]
        with pytest.raises(LlamaException):
            small.complete_chat(long_ask, params=GenerationParams(greedy=True, max_tokens=8))
        done = small.complete_chat(ASK, params=GenerationParams(greedy=True, max_tokens=-1))
        assert done.finish_reason in ("stop", "length")


def test_family_names_of_the_templates_above_are_all_different_layouts() -> None:
    families = {apply_chat_template(normalized_source(_template(n)), ASK, tools=[FORECAST]).family
                for n in [*FAMILY_TEMPLATES, *UNFINISHED_BY_SMOLLM2]}
    assert len(families) >= 16  # every specialized family, plus the autoparser


def test_a_demanded_call_through_a_template_without_a_tool_call_format_is_refused(engine: LlamaEngine) -> None:
    """SmolLM2's own template has no tool-call format: "required" and a named function are refused the
    same way the server and ``llamact chat`` refuse them (chat/tool_format.py), not answered in text,
    and the message names the library's remedies; "auto" is answered (the tools are dropped)."""
    for choice in ("required", NAMED):
        with pytest.raises(LlamaUnsupportedException) as caught:
            engine.complete_chat(ASK, tools=[FORECAST], tool_choice=choice, params=GREEDY)
        message = str(caught.value)
        assert message.startswith("tool_choice ") and "has no tool-call format" in message, message
        assert 'LlamaEngine.load("qwen2.5-coder-0.5b")' in message and "custom_template" in message
        assert 'template_path("chatml-tools")' in message
    _still_usable(engine)
    assert engine.complete_chat(ASK, tools=[FORECAST], params=GenerationParams(greedy=True, max_tokens=4)).content


def test_the_shipped_tool_template_gives_the_default_model_tool_calls(engine: LlamaEngine) -> None:
    from llamact.chat.tool_format import template_path

    path = template_path("chatml-tools")
    assert path is not None and template_path("../engine") is None
    result = engine.chat_template(ASK, tools=[FORECAST], tool_choice="required", custom_template=path.read_text())
    assert result.grammar   # a tool-call format: the demanded call is constrained
    reply = engine.complete_chat(ASK, tools=[FORECAST], tool_choice=NAMED, custom_template=path.read_text(),
                                 params=GenerationParams(greedy=True, max_tokens=160))
    assert [call.name for call in reply.tool_calls] == ["forecast"]
