"""Named tool choice (docs/design.md deviation 9): ``tool_choice={"type": "function", "function": {"name": ...}}``
forces an immediate call of that function, on every vendored template that has a tool-call format.

The per-template check (``llamact.parity.named_tool``) renders, through upstream (the oracle), what a
model following the template writes for a call of the named tool, and checks llamact's grammar and
parser on it; the other tests pin the request layer, the grammar derivation and the errors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llamact.chat import ChatRequestError, apply_chat_template, chat_inputs
from llamact.chat.deviations.named_grammar import call_only_arena, call_only_grammar
from llamact.chat.peg_builder import ChatPegBuilder, build_chat_peg_parser
from llamact.errors import LlamaInferenceException, LlamaUnsupportedException
from llamact.grammar import GbnfAcceptor, parse_gbnf
from llamact.json_types import Json
from llamact.parity.named_tool import HEADER, NamedToolRow, check_template, named_result
from llamact.parity.oracle import OracleClient
from llamact.parity.scenarios import CALL_WEATHER, RESPONSE_SCHEMA, TOOLS, USER
from llamact.peg.nodes import Space

TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"
NAMED = {"type": "function", "function": {"name": "get_weather"}}
QWEN35_CALL = ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
               "</tool_call>")


def _source(stem: str) -> str:
    return (TEMPLATES / f"{stem}.jinja").read_text(encoding="utf-8")


def _acceptor(grammar: str) -> GbnfAcceptor:
    return GbnfAcceptor(parse_gbnf(grammar))


# -- every vendored template, against what upstream renders ------------------------------------------


_ROWS: dict[str, NamedToolRow] = {}


def _row(oracle: OracleClient, stem: str) -> NamedToolRow:
    """The per-template check, once per session (both tests below read it)."""
    if stem not in _ROWS:
        _ROWS[stem] = check_template(oracle, stem, _source(stem))
    return _ROWS[stem]


@pytest.mark.parity
@pytest.mark.parametrize("stem", sorted(p.stem for p in TEMPLATES.glob("*.jinja")))
def test_every_template_forces_the_named_call_or_is_refused_like_upstream(oracle: OracleClient, stem: str) -> None:
    row = _row(oracle, stem)
    assert row.ok, dict(zip(HEADER, row.cells(), strict=True))


@pytest.fixture(scope="module")
def smollm2_engine(smollm2_path: Path) -> Any:
    from llamact import LlamaEngine, ModelParams

    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=512)) as engine:
        yield engine


@pytest.mark.parity
@pytest.mark.model
@pytest.mark.parametrize("stem", sorted(p.stem for p in TEMPLATES.glob("*.jinja")))
def test_llama_cpp_takes_the_grammar_prefilled_with_the_generation_prompt(oracle: OracleClient, smollm2_engine: Any,
                                                                          stem: str) -> None:
    """As the engine wires it: llama.cpp's own grammar sampler, the generation prompt's tokens accepted
    first (prefill), then the template's call token by token, then the end of generation."""
    from llamact.native.sampler import Grammar, SamplerChain

    row = _row(oracle, stem)
    if not row.supported:
        return  # refused: there is no grammar (the test above checks upstream reads no call either)
    assert row.accepted_output is not None
    result = named_result(_source(stem))
    engine = smollm2_engine
    prefill = engine.tokenize(result.generation_prompt, add_special=False, parse_special=True)
    eos = engine.model.vocab.eos

    def prefilled() -> Any:
        sampler = SamplerChain(engine.model, [Grammar(result.grammar)])
        for token in prefill:
            sampler.accept(token)
        return sampler

    with prefilled() as sampler, pytest.raises(LlamaInferenceException, match="not allowed by the grammar"):
        sampler.accept(eos)  # no call yet
    with prefilled() as sampler:
        for token in engine.tokenize(row.accepted_output, add_special=False, parse_special=True):
            sampler.accept(token)
        sampler.accept(eos)


@pytest.mark.model
def test_the_engine_hands_out_the_forced_call(smollm2_engine: Any) -> None:
    result = smollm2_engine.chat_template([USER], tools=TOOLS, tool_choice=NAMED,
                                          custom_template=_source("NousResearch-Hermes-3-Llama-3.1-8B-tool_use"))
    assert (result.named_tool, result.grammar_lazy, result.grammar_triggers) == ("get_weather", False, ())
    with pytest.raises(ChatRequestError, match="'get_time', which is not among"):
        smollm2_engine.chat_template([USER], tools=TOOLS, tool_choice={"type": "function",
                                                                        "function": {"name": "get_time"}})


@pytest.mark.parametrize("stem", ["NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "Qwen-Qwen2.5-7B-Instruct",
                                  "meta-llama-Llama-3.1-8B-Instruct", "mistralai-Mistral-Nemo-Instruct-2407"])
def test_the_grammar_admits_nothing_after_the_call(stem: str) -> None:
    """The forced call ends the reply: no whitespace after it (issue 43: a model that prefers blanks
    to its end token ran out of max_tokens on a complete call)."""
    result = named_result(_source(stem))
    acceptor = _acceptor(result.grammar)
    sentences = [n for n in acceptor.sentence_prefixes(result.generation_prompt + "x") if n]
    assert sentences == []   # no sentence without the call
    call = _call_text(stem)
    text = result.generation_prompt + call
    assert acceptor.accepts(text), text
    for after in (" ", "\n", "\t"):
        assert not acceptor.is_viable_prefix(text + after), (stem, after)


def _call_text(stem: str) -> str:
    args = '{"city": "Paris"}'
    hermes = f'<tool_call>\n{{"name": "get_weather", "arguments": {args}}}\n</tool_call>'
    return {
        "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": hermes,
        "Qwen-Qwen2.5-7B-Instruct": hermes,
        "meta-llama-Llama-3.1-8B-Instruct": f'{{"name": "get_weather", "parameters": {args}}}',
        "mistralai-Mistral-Nemo-Instruct-2407":
            f'[TOOL_CALLS][{{"name": "get_weather", "arguments": {args}, "id": "abcdefghi"}}]',
    }[stem]


# -- the request layer ----------------------------------------------------------------------------------


def test_a_named_choice_reads_as_required_plus_the_name() -> None:
    inputs = chat_inputs([USER], tools=TOOLS, tool_choice=NAMED)
    assert (inputs.tool_choice, inputs.named_tool) == ("required", "get_weather")
    assert chat_inputs([USER], tools=TOOLS, tool_choice="required").named_tool is None


@pytest.mark.parametrize("choice, tools, fragment", [
    ({"type": "function", "function": {"name": "get_time"}}, TOOLS, "'get_time', which is not among"),
    (NAMED, None, "not among the request's tools (none)"),
    ({"type": "function"}, TOOLS, 'tool_choice must be "auto", "required", "none" or'),
    ({"type": "tool", "function": {"name": "get_weather"}}, TOOLS, "tool_choice must be"),
    ({"type": "function", "function": {"name": 3}}, TOOLS, "tool_choice must be"),
    (["get_weather"], TOOLS, "tool_choice must be"),
])
def test_a_bad_named_choice_is_a_request_error(choice: Json, tools: Json, fragment: str) -> None:
    with pytest.raises(ChatRequestError) as info:
        chat_inputs([USER], tools=tools, tool_choice=choice)
    assert fragment in info.value.message


def test_a_named_choice_cannot_take_a_custom_grammar() -> None:
    with pytest.raises(ChatRequestError, match="Cannot use custom grammar constraints with tools"):
        chat_inputs([USER], tools=TOOLS, tool_choice=NAMED, grammar='root ::= "x"')


@pytest.mark.parametrize("options, fragment", [
    ({"continue_final_message": True, "messages": [USER, {"role": "assistant", "content": "Let me"}]},
     "cannot continue the final message"),
])
def test_requests_a_forced_call_cannot_serve_are_refused(options: Json, fragment: str) -> None:
    messages = options.pop("messages", [USER])
    with pytest.raises(ChatRequestError, match=fragment):
        apply_chat_template(_source("Qwen3.5-4B"), messages, tools=TOOLS, tool_choice=NAMED, **options)


def test_force_pure_content_is_refused() -> None:
    from dataclasses import replace

    from llamact.chat import apply_templates, load_chat_templates

    inputs = replace(chat_inputs([USER], tools=TOOLS, tool_choice=NAMED), force_pure_content=True)
    with pytest.raises(ChatRequestError, match="force_pure_content"):
        apply_templates(load_chat_templates(_source("Qwen3.5-4B")), inputs)


# -- the result ----------------------------------------------------------------------------------------


def test_the_result_is_the_required_one_with_the_forced_grammar() -> None:
    source = _source("Qwen3.5-4B")
    named = apply_chat_template(source, [USER], tools=TOOLS, tool_choice=NAMED, template_now=0)
    required = apply_chat_template(source, [USER], tools=TOOLS, tool_choice="required", template_now=0)
    assert named.named_tool == "get_weather" and required.named_tool is None
    assert (named.grammar_lazy, named.grammar_triggers) == (False, ())
    assert named.grammar != required.grammar
    # the model sees every tool; the parser reads every tool's calls
    for field in ("prompt", "generation_prompt", "format", "family", "preserved_tokens", "additional_stops",
                  "thinking_start_tag", "thinking_end_tags"):
        assert getattr(named, field) == getattr(required, field), field
    assert named.parser == required.parser
    assert named.to_json()["grammar"] == named.grammar and "named_tool" not in named.to_json()


def test_the_grammar_admits_a_thought_then_the_call_and_nothing_else() -> None:
    named = apply_chat_template(_source("Qwen3.5-4B"), [USER], tools=TOOLS, tool_choice=NAMED)
    gen = named.generation_prompt
    assert gen.endswith("<think>\n")
    acceptor = _acceptor(named.grammar)
    assert acceptor.accepts(gen + "The user wants Paris.\n</think>\n\n" + QWEN35_CALL)
    assert acceptor.accepts(gen + "\n</think>\n\n" + QWEN35_CALL)
    assert not acceptor.is_viable_prefix(gen + "Paris.\n</think>\n\nSure: ")
    assert not acceptor.accepts(gen + "Paris.\n</think>\n\n")
    assert not acceptor.is_viable_prefix(gen + "Paris.\n</think>\n\n<tool_call>\n<function=calculate>")
    # one call: a second one, or content after the call, is not admitted
    assert not acceptor.is_viable_prefix(gen + "\n</think>\n\n" + QWEN35_CALL + "\n<tool_call>")
    assert not acceptor.is_viable_prefix(gen + "\n</think>\n\n" + QWEN35_CALL + "\nDone")


def test_thinking_off_leaves_only_the_call() -> None:
    named = apply_chat_template(_source("Qwen3.5-4B"), [USER], tools=TOOLS, tool_choice=NAMED,
                                enable_thinking=False)
    gen = named.generation_prompt
    assert "</think>" in gen
    acceptor = _acceptor(named.grammar)
    assert acceptor.accepts(gen + QWEN35_CALL)
    assert not acceptor.is_viable_prefix(gen + "<think>")
    assert not acceptor.is_viable_prefix(gen + "Sure")


def test_without_reasoning_extraction_the_model_still_thinks_first_and_the_thought_is_content() -> None:
    named = apply_chat_template(_source("Qwen3.5-4B"), [USER], tools=TOOLS, tool_choice=NAMED,
                                reasoning_format="none")
    output = "Paris, then.\n</think>\n\n" + QWEN35_CALL
    assert _acceptor(named.grammar).accepts(named.generation_prompt + output)
    message = named.output_parser().parse(output, is_partial=False)
    assert [c.name for c in message.tool_calls] == ["get_weather"]
    assert "Paris, then." in message.content and not message.reasoning_content


def test_response_format_does_not_apply_to_a_forced_call() -> None:
    named = apply_chat_template(_source("Qwen3.5-4B"), [USER], tools=TOOLS, tool_choice=NAMED,
                                response_format={"type": "json_schema", "json_schema": {"schema": RESPONSE_SCHEMA}})
    output = "\n</think>\n\n" + QWEN35_CALL
    assert _acceptor(named.grammar).accepts(named.generation_prompt + output)
    message = named.output_parser().parse(output, is_partial=False)
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [("get_weather", {"city": "Paris"})]


def test_one_call_only_where_the_family_admits_several() -> None:
    # Hermes's "required" grammar admits one or more calls; the forced one admits exactly one
    named = apply_chat_template(_source("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use"), [USER], tools=TOOLS,
                                tool_choice=NAMED, parallel_tool_calls=True)
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    acceptor = _acceptor(named.grammar)
    assert acceptor.accepts(named.generation_prompt + call)
    assert not acceptor.is_viable_prefix(named.generation_prompt + call + "\n<tool_call>")
    required = apply_chat_template(_source("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use"), [USER], tools=TOOLS,
                                   tool_choice="required", parallel_tool_calls=True)
    assert _acceptor(required.grammar).is_viable_prefix(required.generation_prompt + call + "\n<tool_call>")


def test_the_other_tools_stay_readable_by_the_parser() -> None:
    # the parser is the request's (all tools): a call of another tool, which the grammar never admits,
    # is still read, so that nothing is lost when no grammar constrained the output
    named = apply_chat_template(_source("NousResearch-Hermes-3-Llama-3.1-8B-tool_use"), [USER], tools=TOOLS,
                                tool_choice=NAMED)
    output = '<tool_call>\n{"name": "calculate", "arguments": {"expression": "1+1"}}\n</tool_call>'
    assert not _acceptor(named.grammar).accepts(named.generation_prompt + output)
    assert [c.name for c in named.output_parser().parse(output, is_partial=False).tool_calls] == ["calculate"]


@pytest.mark.parametrize("stem", ["google-gemma-2-2b-it", "microsoft-Phi-3.5-mini-instruct"])
def test_a_template_without_a_tool_call_format_is_refused_naming_it(stem: str) -> None:
    with pytest.raises(LlamaUnsupportedException) as info:
        apply_chat_template(_source(stem), [USER], tools=TOOLS, tool_choice=NAMED)
    assert "per-call custom_template" in info.value.message and "'get_weather'" in info.value.message
    assert info.value.details["tool_choice"] == "get_weather"
    # the same request with tool_choice="required" still applies (upstream's behaviour)
    apply_chat_template(_source(stem), [USER], tools=TOOLS, tool_choice="required")


def test_the_call_synthesised_from_history_parses_with_its_arguments() -> None:
    # a cheap end-to-end check without the oracle: llamact renders the call turn itself
    source = _source("Qwen3.5-4B")
    named = apply_chat_template(source, [USER], tools=TOOLS, tool_choice=NAMED, template_now=0)
    turn = apply_chat_template(source, [USER, {"role": "assistant", "content": "", "tool_calls": [CALL_WEATHER]}],
                               tools=TOOLS, add_generation_prompt=False, template_now=0).prompt
    head = named.prompt[: -len(named.generation_prompt)]
    output = turn[len(head):].removesuffix("<|im_end|>\n")
    assert output.startswith(named.generation_prompt)
    output = output[len(named.generation_prompt):]
    assert _acceptor(named.grammar).accepts(named.generation_prompt + output)
    message = named.output_parser().parse(output, is_partial=False)
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("get_weather", {"city": "Paris", "unit": "celsius"})]


# -- the grammar derivation ------------------------------------------------------------------------------


def _arena(build: Any) -> Any:
    return build_chat_peg_parser(build)


def _call(p: ChatPegBuilder) -> Any:
    return p.trigger_rule("call", p.tool(p.tool_open(p.literal("<call>")) + p.tool_name(p.literal("f"))
                                         + p.literal("</call>")))


def test_content_becomes_whitespace_and_the_rest_stays() -> None:
    arena = _arena(lambda p: p.literal("<gen>") + p.content(p.until("<call>")) + _call(p))
    rewritten = call_only_arena(arena)
    assert rewritten is not None and len(rewritten.parsers) == len(arena.parsers)
    assert sum(isinstance(n, Space) for n in rewritten.parsers) == 1
    acceptor = _acceptor(call_only_grammar(arena) or "")
    assert acceptor.accepts("<gen><call>f</call>") and acceptor.accepts("<gen>\n\n<call>f</call>")
    assert not acceptor.is_viable_prefix("<gen>Hi")


def test_content_only_alternatives_and_optional_parts_go() -> None:
    arena = _arena(lambda p: p.literal("<gen>")
                   + p.zero_or_more(p.choice([p.literal("<t>") + p.reasoning(p.until("</t>")) + p.literal("</t>"),
                                              p.literal("<c>") + p.content(p.until("</c>")) + p.literal("</c>")]))
                   + p.optional(p.literal("<r>") + p.content(p.until("</r>")) + p.literal("</r>"))
                   + p.choice([_call(p), p.content(p.rest())]))
    acceptor = _acceptor(call_only_grammar(arena) or "")
    assert acceptor.accepts("<gen><t>hm</t><call>f</call>")
    assert acceptor.accepts("<gen><call>f</call>")
    assert not acceptor.is_viable_prefix("<gen><c>")  # the content channel
    assert not acceptor.is_viable_prefix("<gen><r>")  # the optional response wrapper
    assert not acceptor.accepts("<gen>")              # "content or calls": the calls
    assert not acceptor.accepts("<gen>text")


def test_repeated_calls_become_one() -> None:
    arena = _arena(lambda p: p.literal("<gen>") + p.one_or_more(_call(p))
                   + p.zero_or_more(p.literal(",") + p.tool(p.tool_name(p.literal("g")))))
    acceptor = _acceptor(call_only_grammar(arena) or "")
    assert acceptor.accepts("<gen><call>f</call>")
    assert not acceptor.is_viable_prefix("<gen><call>f</call><call>")
    assert not acceptor.is_viable_prefix("<gen><call>f</call>,")


def test_an_arena_without_a_tool_call_gives_no_grammar() -> None:
    arena = _arena(lambda p: p.literal("<gen>") + p.content(p.rest()))
    assert call_only_arena(arena) is None and call_only_grammar(arena) is None


def test_where_a_call_can_come_alone_content_before_it_goes() -> None:
    # Functionary v3.2's shape: "all\nTEXT" then a call, or the call alone; with the text taken out,
    # "all\n" would stay admissible, and the family's parser reads what follows it as content
    arena = _arena(lambda p: p.literal("<gen>")
                   + p.choice([p.literal("<c>") + p.content(p.until("<call>")) + _call(p), _call(p)]))
    acceptor = _acceptor(call_only_grammar(arena) or "")
    assert acceptor.accepts("<gen><call>f</call>")
    assert not acceptor.is_viable_prefix("<gen><c>")


def test_a_content_prefix_stays_where_the_call_cannot_come_alone() -> None:
    arena = _arena(lambda p: p.literal("<gen>") + p.literal("<c>") + p.content(p.until("<call>")) + _call(p))
    acceptor = _acceptor(call_only_grammar(arena) or "")
    assert acceptor.accepts("<gen><c><call>f</call>")


def test_functionary_forces_the_recipient_not_the_content_channel() -> None:
    named = apply_chat_template(_source("meetkai-functionary-medium-v3.2"), [USER], tools=TOOLS, tool_choice=NAMED)
    acceptor = _acceptor(named.grammar)
    call = named.generation_prompt + 'get_weather\n{"city": "Paris"}'
    assert acceptor.accepts(call)
    assert not acceptor.is_viable_prefix(named.generation_prompt + "all")
    message = named.output_parser().parse(call[len(named.generation_prompt):], is_partial=False)
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [("get_weather", {"city": "Paris"})]
