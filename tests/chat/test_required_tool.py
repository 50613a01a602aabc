"""``tool_choice: "required"`` answers with calls (docs/design.md deviation 19): by default the grammar is
upstream's ``"required"`` grammar with its content taken out (the envelope first, then one call or more,
whitespace only between calls); ``upstream_compat`` keeps upstream's. The rest of the result (prompt,
parser, stops, preserved tokens) is upstream's either way.

The per-template check reuses deviation 9's (``llamact.parity.named_tool``): the call a model following
the template writes (rendered by upstream, the oracle) must be admitted, raw text where the call must
start must not. The end-to-end checks are in tests/engine/test_create.py and, against llama-server,
tests/parity/test_chat_sampling_server.py.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from llamact.chat import ChatRequest, apply_chat_template
from llamact.chat.deviations.named_grammar import call_only_grammar
from llamact.chat.peg_builder import ChatPegBuilder, build_chat_peg_parser
from llamact.chat.result import ChatTemplateResult
from llamact.errors import LlamaException
from llamact.grammar import GbnfAcceptor, parse_gbnf
from llamact.parity.named_tool import RAW_CONTENT, _thought_state, check_template
from llamact.parity.oracle import OracleClient
from llamact.parity.scenarios import TOOLS, USER

TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
CALC = '<tool_call>\n{"name": "calculate", "arguments": {"expression": "1+1"}}\n</tool_call>'
FENCED = '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'


def _source(stem: str) -> str:
    return (TEMPLATES / f"{stem}.jinja").read_text(encoding="utf-8")


def _acceptor(grammar: str) -> GbnfAcceptor:
    return GbnfAcceptor(parse_gbnf(grammar))


def _required(stem: str, upstream: bool = False, **options: object) -> ChatTemplateResult:
    return apply_chat_template(_source(stem), [USER], tools=TOOLS, tool_choice="required", template_now=0,
                               upstream_compat=upstream, **options)


def test_the_reply_is_calls_alone_and_ends_with_them() -> None:
    """Qwen 2.5's template (Qwen2.5-Coder ships it): upstream's grammar lets the model write content
    first -- Qwen2.5-Coder writes its call as a fenced block there, then newlines to max_tokens."""
    ours, theirs = _required("Qwen-Qwen2.5-7B-Instruct"), _required("Qwen-Qwen2.5-7B-Instruct", upstream=True)
    gen = ours.generation_prompt
    acceptor, upstream = _acceptor(ours.grammar), _acceptor(theirs.grammar)
    # upstream: content first, and whitespace after the last call
    assert upstream.is_viable_prefix(gen + FENCED + "\n\n\n")
    assert upstream.accepts(gen + FENCED + "\n" + CALL) and upstream.accepts(gen + CALL + "\n")
    # llamact: the envelope at once, one call or more, nothing after the last one
    assert not acceptor.is_viable_prefix(gen + "`") and not acceptor.is_viable_prefix(gen + RAW_CONTENT)
    assert acceptor.accepts(gen + CALL) and acceptor.accepts(gen + CALL + "\n" + CALC)
    assert not acceptor.accepts(gen + CALL + "\n") and not acceptor.is_viable_prefix(gen + CALL + "\nDone")
    assert not acceptor.accepts(gen)
    assert acceptor.is_viable_prefix(gen + CALL + "\n<tool_call>")   # a second call stays possible


def test_a_thought_the_generation_prompt_opens_stays_admitted_without_reasoning_extraction() -> None:
    """DeepSeek R1's generation prompt opens a thought ("<think>\n"). With reasoning_format "none" the
    thought is content to upstream's parser, and a grammar with the content taken out admitted no
    generation prompt: every such request failed (the server_e2e case llama-cpp-deepseek-r1/
    reasoning-none). The grammar comes from the "deepseek" parse, as deviation 9's does."""
    for reasoning in ("none", "deepseek"):
        ours = _required("llama-cpp-deepseek-r1", reasoning_format=reasoning)
        theirs = _required("llama-cpp-deepseek-r1", upstream=True, reasoning_format=reasoning)
        assert ours.generation_prompt.endswith("<think>\n") and ours.grammar != theirs.grammar
        acceptor = _acceptor(ours.grammar)
        assert acceptor.is_viable_prefix(ours.generation_prompt + "The user asks about Paris."), reasoning
        assert ours.prompt == theirs.prompt and ours.parser == theirs.parser   # the parser stays upstream's


def test_only_the_grammar_differs_from_upstreams() -> None:
    ours, theirs = _required("Qwen-Qwen2.5-7B-Instruct"), _required("Qwen-Qwen2.5-7B-Instruct", upstream=True)
    different = {f.name for f in fields(ChatTemplateResult) if getattr(ours, f.name) != getattr(theirs, f.name)}
    assert different == {"grammar"}
    assert (ours.grammar_lazy, ours.grammar_triggers, ours.named_tool) == (False, (), None)
    # the parser is upstream's: it reads the calls the grammar admits, and content where none constrained it
    message = ours.output_parser().parse(CALL + "\n" + CALC, is_partial=False)
    assert [c.name for c in message.tool_calls] == ["get_weather", "calculate"] and not message.content


@pytest.mark.parametrize(("stem", "content"), [
    ("Qwen-Qwen3-0.6B", RAW_CONTENT), ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", RAW_CONTENT),
    ("mistralai-Mistral-Nemo-Instruct-2407", RAW_CONTENT),
    ("openai-gpt-oss-120b", "<|channel|>commentary<|message|>Sure"),   # its preamble channel is content
])
def test_other_families_lose_their_content_too(stem: str, content: str) -> None:
    ours, theirs = _required(stem, reasoning_format="deepseek"), _required(stem, True, reasoning_format="deepseek")
    assert ours.grammar != theirs.grammar and ours.prompt == theirs.prompt and ours.parser == theirs.parser
    gen = ours.generation_prompt
    assert _acceptor(theirs.grammar).is_viable_prefix(gen + content)
    assert not _acceptor(ours.grammar).is_viable_prefix(gen + content)


def test_the_request_sets_it_only_for_required_without_upstream_compat() -> None:
    def flag(**options: object) -> bool:
        return ChatRequest([USER], tools=TOOLS, **options).inputs.required_calls_only  # type: ignore[arg-type]

    assert flag(tool_choice="required")
    assert not flag(tool_choice="required", upstream_compat=True)
    assert not flag(tool_choice="auto") and not flag(tool_choice="none")
    assert not flag(tool_choice={"type": "function", "function": {"name": "get_weather"}})   # deviation 9's


@pytest.mark.parametrize("stem", ["google-gemma-2-2b-it", "microsoft-Phi-3.5-mini-instruct"])
def test_a_template_without_a_tool_call_format_keeps_upstreams_result(stem: str) -> None:
    assert _required(stem) == _required(stem, upstream=True)


def test_continuing_a_message_keeps_upstreams_result() -> None:
    messages = [USER, {"role": "assistant", "content": "Let me check"}]
    source = _source("Qwen-Qwen2.5-7B-Instruct")
    ours, theirs = (apply_chat_template(source, messages, tools=TOOLS, tool_choice="required", template_now=0,
                                        continue_final_message=True, upstream_compat=compat)
                    for compat in (False, True))
    assert ours == theirs


def _call(p: ChatPegBuilder) -> object:
    return p.trigger_rule("call", p.tool(p.tool_open(p.literal("<call>")) + p.tool_name(p.literal("f"))
                                         + p.literal("</call>")))


def test_the_calls_keep_their_count_and_whitespace_stays_between_them() -> None:
    arena = build_chat_peg_parser(lambda p: p.literal("<gen>") + p.optional(p.content(p.until("<call>")))
                                  + p.one_or_more(p.sequence([_call(p), p.space()])) + p.end())
    acceptor = _acceptor(call_only_grammar(arena, one_call=False) or "")
    assert acceptor.accepts("<gen><call>f</call>") and acceptor.accepts("<gen>\n<call>f</call>")
    assert acceptor.accepts("<gen><call>f</call>\n<call>f</call><call>f</call>")
    assert not acceptor.is_viable_prefix("<gen>Hi") and not acceptor.accepts("<gen><call>f</call>\n")
    one = _acceptor(call_only_grammar(arena) or "")   # deviation 9's: one call
    assert one.accepts("<gen><call>f</call>") and not one.is_viable_prefix("<gen><call>f</call>\n<")


# upstream's own "required" grammar rejects the template's call (its autoparser reads no [CALL_ID] there)
UPSTREAM_REJECTS = {"Mistral-Small-3.2-24B-Instruct-2506"}


@pytest.mark.parity
@pytest.mark.parametrize("stem", sorted(p.stem for p in TEMPLATES.glob("*.jinja")))
def test_every_template_admits_its_own_call_and_no_text_before_it(oracle: OracleClient, stem: str) -> None:
    """Every vendored template: where deviation 9 forces a named call (the template has a tool-call
    format), the required grammar admits the call the template renders (upstream's rendering, read back
    by upstream's parser: llamact.parity.named_tool) wherever upstream's "required" grammar admits it
    (``UPSTREAM_REJECTS``: see named_tool.HAND_WRITTEN), and no raw text where the call must start
    (unless the generation prompt opens a thought: then that text is thought); where it refuses, or
    the template's call cannot be shown, only that. (Some families' "required" grammars admit no
    content to begin with: there the grammar is upstream's, whitespace aside.)"""
    row = check_template(oracle, stem, _source(stem))
    try:
        theirs = _required(stem, upstream=True, reasoning_format="deepseek")
    except LlamaException as exc:   # upstream's pipeline fails on the request: so does this one
        with pytest.raises(type(exc)):
            _required(stem, reasoning_format="deepseek")
        return
    ours = _required(stem, reasoning_format="deepseek")
    if not row.supported:
        assert ours.grammar == theirs.grammar, stem   # no tool-call path: upstream's grammar
        return
    acceptor, upstream = _acceptor(ours.grammar), _acceptor(theirs.grammar)
    gen = ours.generation_prompt
    if row.accepted_output is not None:
        admitted = upstream.accepts(gen + row.accepted_output)
        assert admitted == (stem not in UPSTREAM_REJECTS), stem
        assert acceptor.accepts(gen + row.accepted_output) == admitted, (stem, row.accepted_output)
    if _thought_state(ours) != "open":
        assert not acceptor.is_viable_prefix(gen + RAW_CONTENT), stem
