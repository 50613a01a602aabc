"""Named tool choice (docs/design.md deviation 9) checked on a template with what a model following it writes.

    check_template(oracle, name, source) -> NamedToolRow
    python -m llamact.parity.named_tool [STEM ...]      the table, every vendored template by default

There is no upstream answer to compare with (llama-server reads a named choice as "auto"), so the
check is built from the template itself, as the corpus synthesises outputs: the oracle renders an
assistant turn holding a call of ``get_weather`` (alone, after a thought, after some content) and
one holding a call of ``calculate``; what the turn adds after the prompt's head is what a model
following the template writes (it stops somewhere in the turn's end-of-turn tail, at a token the
text does not show: the longest prefix the grammar completes is taken). Where the generation prompt
opens a thought that the rendered turn leaves out (templates that drop thoughts from history), the
thought is closed with the template's own end tag (noted "thought closed by the check"). Four
templates whose turn cannot show a call upstream reads get a written call instead, itself checked
to be read by upstream's parser as the call (``HAND_WRITTEN``). Then, on llamact's result for
``tool_choice={"type": "function", "function": {"name": "get_weather"}}`` with both tools:

* the prompt and generation prompt are upstream's for ``tool_choice="required"``;
* the grammar (GbnfAcceptor) accepts the generation prompt + the call, or + thought + call where
  the template has a thought; rejects the content + call turn (or, where an open thought reads that
  text as thought, parses it with no content) and raw text where the call must start (at the
  start unless a thought is open, and right after the thought); rejects the ``calculate`` call;
  rejects ending with no call, and a second call (of the same tool);
* the parser reads the accepted output back as upstream's parser does (the oracle's parse with the
  ``"required"`` parser): one call, ``get_weather``, the rendered arguments, no content.

A template llamact refuses (``LlamaUnsupportedException``) is checked to be one upstream cannot read
a call from either: upstream fails on the request too, or its parse of the template's own call turn
yields no tool call.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..chat.request import chat_inputs
from ..chat.result import ChatTemplateResult
from ..chat.templates import load_chat_templates
from ..errors import LlamaException, LlamaUnsupportedException
from ..grammar import GbnfAcceptor, parse_gbnf
from ..json_types import Json
from .components import ORACLE_NOW
from .corpus import BOS_TOKEN, EOS_TOKEN, _strip_turn_tail, _turn_tail
from .oracle import OracleClient, OracleError
from .scenarios import CALL_CALC_TYPED, CALL_WEATHER, TOOLS, USER

NAMED = "get_weather"
NAMED_CHOICE: Json = {"type": "function", "function": {"name": NAMED}}
THOUGHT = "I should look up the forecast."
CONTENT = "Let me check that for you."
RAW_CONTENT = "Sure thing. "
REASONING_FORMAT = "deepseek"
SECOND_CALL: Json = {"id": "call_0003", "type": "function",
                     "function": {"name": NAMED, "arguments": '{"city": "Tokyo"}'}}


@dataclass
class NamedToolRow:
    """One template's results; a check that does not apply (the template cannot show it) is None."""

    template: str
    family: str = ""
    supported: bool = True
    accepted_call: bool | None = None
    accepted_thought_call: bool | None = None
    rejected_content: bool | None = None
    rejected_other_tool: bool | None = None
    rejected_no_call: bool | None = None
    rejected_second_call: bool | None = None
    parsed: bool | None = None
    upstream_reads_call: bool | None = None  # refused templates: upstream's parse finds a call in the turn
    prompt_equal: bool | None = None  # prompt and generation prompt are upstream's for tool_choice="required"
    accepted_output: str | None = None  # the model output (after the generation prompt) the grammar accepted
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        if not self.supported:
            return self.upstream_reads_call is False
        checks = (self.rejected_content, self.rejected_other_tool, self.rejected_no_call, self.rejected_second_call,
                  self.parsed)
        return bool(self.accepted_call or self.accepted_thought_call) and all(c is not False for c in checks) \
            and self.parsed is True and self.rejected_other_tool is True and self.prompt_equal is True

    def cells(self) -> list[str]:
        def mark(value: bool | None) -> str:
            return "n/a" if value is None else ("yes" if value else "NO")

        if not self.supported:
            upstream = {None: "?", True: "upstream reads a call!", False: "upstream reads no call either"}
            notes = "; ".join([upstream[self.upstream_reads_call], *self.notes])
            return [self.template, self.family, "refused", "", "", "", "", "", "", notes]
        return [self.template, self.family, mark(self.accepted_call), mark(self.accepted_thought_call),
                mark(self.rejected_content), mark(self.rejected_other_tool), mark(self.rejected_no_call),
                mark(self.rejected_second_call), mark(self.parsed), "; ".join(self.notes)]


HEADER = ["template", "family", "accepted call", "accepted thought+call", "rejected content",
          "rejected other tool", "rejected no call", "rejected 2nd call", "parsed", "notes"]


def named_result(source: str, reasoning_format: str = REASONING_FORMAT) -> ChatTemplateResult:
    """llamact's result for the named choice of ``get_weather`` with both tools (the oracle's tokens and clock)."""
    from ..chat.pipeline import apply_templates

    templates = load_chat_templates(source, bos_token=BOS_TOKEN, eos_token=EOS_TOKEN, origin="vendored template")
    inputs = chat_inputs([USER], tools=TOOLS, tool_choice=NAMED_CHOICE, reasoning_format=reasoning_format,
                         template_now=ORACLE_NOW)
    return apply_templates(templates, inputs)


# Templates checked with a written call instead of their own rendering, each checked to be read by upstream's
# parser as get_weather(city="Paris", unit="celsius"): LFM2 and LFM2.5-Instruct render no tool calls in
# history (the model writes them in its content); for Mistral Small 3.2 and Solar Open, upstream's
# autoparser reads neither the template's [CALL_ID] nor its call id (its tool_choice="required" grammar
# rejects the template's own call too), so the call is written the way that parser reads it.
_LFM2_CALLS = ('<|tool_call_start|>[get_weather(city="Paris", unit="celsius")]<|tool_call_end|>',
               '<|tool_call_start|>[calculate(expression="2+2")]<|tool_call_end|>')
HAND_WRITTEN: dict[str, tuple[str, str]] = {
    "LFM2-8B-A1B": _LFM2_CALLS,
    "LFM2.5-Instruct": _LFM2_CALLS,
    "Mistral-Small-3.2-24B-Instruct-2506": (
        '[TOOL_CALLS]get_weather[ARGS][CALL_ID]call_0001[ARGS]{"city": "Paris", "unit": "celsius"}',
        '[TOOL_CALLS]calculate[ARGS][CALL_ID]call_0002[ARGS]{"expression": "2+2"}'),
    "upstage-Solar-Open-100B": (
        '<|tool_calls|><|tool_call:begin|>call00001<|tool_call:name|>get_weather<|tool_call:args|>'
        '{"city": "Paris", "unit": "celsius"}<|tool_call:end|><|calls|>',
        '<|tool_calls|><|tool_call:begin|>call00001<|tool_call:name|>calculate<|tool_call:args|>'
        '{"expression": "2+2"}<|tool_call:end|><|calls|>'),
}


def _render(oracle: OracleClient, source: str, messages: list[Json], add_generation_prompt: bool,
            tool_choice: str = "auto") -> Json:
    inputs = {"messages": messages, "tools": TOOLS, "tool_choice": tool_choice, "parallel_tool_calls": False,
              "reasoning_format": REASONING_FORMAT, "enable_thinking": True,
              "add_generation_prompt": add_generation_prompt, "continue_final_message": False,
              "chat_template_kwargs": {}}
    return oracle.request("chat_apply", template=source, bos_token=BOS_TOKEN, eos_token=EOS_TOKEN, add_bos=False,
                          add_eos=False, inputs=inputs)


def _opened_thought_split(gen: str, turn: str, start_tag: str) -> int:
    """How much of the generation prompt the rendered turn shares, not cutting into the thinking start tag."""
    common = len(os.path.commonprefix([gen, turn]))
    at = gen.rfind(start_tag) if start_tag else -1
    if at >= 0 and at < common < at + len(start_tag):
        common = at
    return common


class _Synthesiser:
    """What a model following the template writes after the generation prompt for an assistant
    message: the turn the template renders, less its end-of-turn tail (upstream's renders, via the
    oracle; ``upstream`` is its ``tool_choice="required"`` answer for the same conversation)."""

    def __init__(self, oracle: OracleClient, source: str, upstream: Json, row: NamedToolRow) -> None:
        self.oracle, self.source, self.upstream, self.row = oracle, source, upstream, row
        self.tail = _turn_tail(oracle, source)

    def __call__(self, message: Json, label: str) -> list[str] | None:
        """The rendered turn after the generation prompt, end-of-turn tail included (the model stops
        somewhere in it: :func:`_longest_sentence` finds where the grammar lets it). When the
        generation prompt opens a thought the rendered turn leaves out (templates that drop thoughts
        from history), variants close the thought with the template's own end tag before the rest of
        the turn (noted). None (noted) when the turn cannot be lined up with the prompt."""
        base = _render(self.oracle, self.source, [USER], True)
        full = _render(self.oracle, self.source, [USER, message], False)
        if isinstance(base, OracleError) or isinstance(full, OracleError):
            self.row.notes.append(f"{label}: upstream cannot render it")
            return None
        prompt, gen = base["prompt"], base["generation_prompt"]
        head = len(prompt) - len(gen)
        if not prompt.endswith(gen) or not full["prompt"].startswith(prompt[:head]):
            self.row.notes.append(f"{label}: the rendered turn changes the prompt before it")
            return None
        rendered = full["prompt"][head:]
        turn = _strip_turn_tail(rendered, self.tail)  # where the thought's opening is looked for
        if turn.startswith(gen):
            split = len(gen)
            openers = [""]
        elif self.upstream["supports_thinking"] and self.upstream["thinking_end_tags"]:
            split = _opened_thought_split(gen, turn, self.upstream["thinking_start_tag"])
            end_tag = self.upstream["thinking_end_tags"][0]
            if any(tag.strip() and tag in turn[split:] for tag in self.upstream["thinking_end_tags"]):
                openers = [""]  # the turn closes the thought itself
            else:
                openers = [THOUGHT + end_tag + sep for sep in ("\n\n", "\n", "")]
            self.row.notes.append(f"{label}: thought closed by the check")
        else:
            self.row.notes.append(f"{label}: the rendered turn does not extend the generation prompt")
            return None
        return [opener + rendered[split:] for opener in openers]


def _call_message(*, reasoning: str = "", content: str = "", call: Json = CALL_WEATHER,
                  calls: tuple[Json, ...] = ()) -> Json:
    message: Json = {"role": "assistant", "content": content, "tool_calls": list(calls or (call,))}
    if reasoning:
        message["reasoning_content"] = reasoning
    return message


def _required_request(source: str) -> Json:
    """The oracle's request for the same conversation with ``tool_choice="required"``."""
    inputs = {"messages": [USER], "tools": TOOLS, "tool_choice": "required", "parallel_tool_calls": False,
              "reasoning_format": REASONING_FORMAT, "enable_thinking": True, "add_generation_prompt": True,
              "continue_final_message": False, "chat_template_kwargs": {}}
    return {"template": source, "bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN, "add_bos": False,
            "add_eos": False, "inputs": inputs}


def _upstream_parse(oracle: OracleClient, upstream: Json, text: str) -> Json:
    return oracle.request("chat_parse", parser=upstream["parser"], format=upstream["format"],
                          generation_prompt=upstream["generation_prompt"], reasoning_format=REASONING_FORMAT,
                          text=text, is_partial=False)


def _thought_end(text: str, end_tags: Sequence[str]) -> int | None:
    """Where the call may start in ``text`` (generation prompt + thought + call): after the first
    thinking end tag that follows the thought, and the whitespace after it."""
    at = text.find(THOUGHT)
    found = [(text.find(tag, at), tag) for tag in end_tags if tag.strip()] if at >= 0 else []
    ends = sorted((i, tag) for i, tag in found if i >= 0)
    if not ends:
        return None
    i, tag = ends[0]
    end = i + len(tag)
    while end < len(text) and text[end].isspace():
        end += 1
    return end


def _longest_sentence(acceptor: GbnfAcceptor, gen: str, variants: list[str] | None) -> str | None:
    """The longest output (after ``gen``) that is a prefix of a variant and a sentence of the grammar:
    where generation stops on the template's turn (its tail holds end-of-generation tokens)."""
    best: str | None = None
    for variant in variants or []:
        ends = [n for n in acceptor.sentence_prefixes(gen + variant) if n >= len(gen)]
        if ends and (best is None or ends[-1] - len(gen) > len(best)):
            best = (gen + variant)[len(gen):ends[-1]]
    return best


def _thought_state(result: ChatTemplateResult) -> str:
    """What the generation prompt does with the template's thought: "none" (no thinking), "open"
    (it opens one), "closed" (it holds a closed one: no thought to come) or "optional"."""
    if not result.supports_thinking:
        return "none"
    gen, start = result.generation_prompt, result.thinking_start_tag.strip()
    opened = gen.rfind(start) if start else -1
    if opened < 0:
        return "optional"
    closed = any(tag.strip() and tag.strip() in gen[opened:] for tag in result.thinking_end_tags)
    return "closed" if closed else "open"


def _parse(result: ChatTemplateResult, output: str) -> Json:
    try:
        return result.output_parser().parse(output, is_partial=False).to_dict()
    except LlamaException as exc:
        return {"error": exc.message}


def _is_named_call(message: Json) -> bool:
    calls = message.get("tool_calls") or []
    if len(calls) != 1 or message.get("content", "").strip() or message.get("content_parts"):
        return False
    try:
        arguments = json.loads(calls[0]["arguments"])
    except ValueError:
        return False
    return bool(calls[0]["name"] == NAMED and arguments == json.loads(CALL_WEATHER["function"]["arguments"]))


@dataclass(frozen=True)
class _Outputs:
    """The model outputs one template is checked with (lists of variants; None: the template cannot show it)."""

    call: list[str] | None
    thought_call: list[str] | None
    content_call: list[str] | None
    other_tool: list[str] | None
    two_calls: list[str] | None


def _outputs(oracle: OracleClient, name: str, source: str, upstream: Json, result: ChatTemplateResult,
             row: NamedToolRow) -> _Outputs:
    hand_written = HAND_WRITTEN.get(name)
    if hand_written is not None:
        call, other = hand_written
        parsed = _upstream_parse(oracle, upstream, call)
        row.notes.append("hand-written call" + ("" if not isinstance(parsed, OracleError) and _is_named_call(parsed)
                                                else ", which upstream does not read as the call!"))
        if isinstance(parsed, OracleError) or not _is_named_call(parsed):
            return _Outputs(None, None, None, None, None)
        return _Outputs([call], None, [CONTENT + call], [other], [call + call.replace("Paris", "Tokyo")])
    synthesise = _Synthesiser(oracle, source, upstream, row)
    can_think = _thought_state(result) in ("open", "optional")
    thought_call = synthesise(_call_message(reasoning=THOUGHT), "thought+call") if can_think else None
    return _Outputs(synthesise(_call_message(), "call"),
                    thought_call if thought_call and any(THOUGHT in v for v in thought_call) else None,
                    synthesise(_call_message(content=CONTENT), "content+call"),
                    synthesise(_call_message(call=CALL_CALC_TYPED), "other tool"),
                    synthesise(_call_message(calls=(CALL_WEATHER, SECOND_CALL)), "two calls"))


def _check_refused(oracle: OracleClient, source: str, upstream: Json, row: NamedToolRow) -> None:
    """A refused template: upstream must not read a call from the template's own call turn either."""
    if isinstance(upstream, OracleError):
        row.upstream_reads_call = False
        row.notes.append("upstream fails as well: " + " ".join(upstream.message.split())[:100])
        return
    synthesise = _Synthesiser(oracle, source, upstream, row)
    row.upstream_reads_call = False
    for text in synthesise(_call_message(), "call") or []:
        parsed = _upstream_parse(oracle, upstream, _strip_turn_tail(text, synthesise.tail))
        if not isinstance(parsed, OracleError) and parsed.get("tool_calls"):
            row.upstream_reads_call = True


def check_template(oracle: OracleClient, name: str, source: str) -> NamedToolRow:
    """Run every check of the module docstring on one template."""
    row = NamedToolRow(name)
    upstream = oracle.request("chat_apply", **_required_request(source))
    try:
        result = named_result(source)
    except LlamaUnsupportedException as exc:
        row.supported = False
        row.family = str(exc.details.get("family", ""))
        _check_refused(oracle, source, upstream, row)
        return row
    row.family = result.family
    if isinstance(upstream, OracleError):
        row.notes.append("upstream fails on tool_choice=required: " + " ".join(upstream.message.split())[:100])
        return row
    row.prompt_equal = (upstream["prompt"], upstream["generation_prompt"]) == (result.prompt, result.generation_prompt)
    gen = result.generation_prompt
    acceptor = GbnfAcceptor(parse_gbnf(result.grammar))
    outputs = _outputs(oracle, name, source, upstream, result, row)

    accepted = _longest_sentence(acceptor, gen, outputs.call)
    row.accepted_call = None if outputs.call is None else accepted is not None
    accepted_thought = _longest_sentence(acceptor, gen, outputs.thought_call)
    row.accepted_thought_call = None if outputs.thought_call is None else accepted_thought is not None
    accepted = accepted or accepted_thought
    row.accepted_output = accepted
    if accepted is None:
        if not upstream["grammar_lazy"] and upstream["grammar"]:
            required = GbnfAcceptor(parse_gbnf(upstream["grammar"]))
            if _longest_sentence(required, gen, (outputs.call or []) + (outputs.thought_call or [])) is None:
                row.notes.append("upstream's tool_choice=required grammar rejects the template's own call too")
        return row

    parsed = _parse(result, accepted)
    upstream_parsed = _upstream_parse(oracle, upstream, accepted)
    row.parsed = _is_named_call(parsed) and parsed == upstream_parsed
    if not row.parsed:
        row.notes.append(f"parsed {parsed}, upstream {upstream_parsed}")

    content_ok = []
    if outputs.content_call is not None and any(CONTENT in v for v in outputs.content_call):
        taken = _longest_sentence(acceptor, gen, outputs.content_call)
        if taken is None or CONTENT not in taken:
            content_ok.append(True)
        else:  # only where the template's open thought reads the text as thought: no content then
            content_ok.append(not _parse(result, taken).get("content", "").strip())
            row.notes.append("content+call: read as thought")
    if _thought_state(result) != "open":  # else raw text at the start is a thought
        content_ok.append(not acceptor.is_viable_prefix(gen + RAW_CONTENT))
    no_call = [not acceptor.accepts(gen), not acceptor.accepts(gen.rstrip())]
    if accepted_thought is not None:
        end = _thought_end(gen + accepted_thought, result.thinking_end_tags)
        if end is not None:
            after_thought = (gen + accepted_thought)[:end]
            content_ok.append(not acceptor.is_viable_prefix(after_thought + RAW_CONTENT))
            no_call += [not acceptor.accepts(after_thought), not acceptor.accepts(after_thought.rstrip())]
    row.rejected_content = all(content_ok) if content_ok else None
    row.rejected_no_call = all(no_call)
    if outputs.other_tool is not None:
        row.rejected_other_tool = _longest_sentence(acceptor, gen, outputs.other_tool) is None
    if outputs.two_calls is not None and any("Tokyo" in v for v in outputs.two_calls):
        taken = _longest_sentence(acceptor, gen, outputs.two_calls)
        row.rejected_second_call = taken is None or "Tokyo" not in taken
    return row


def _table(rows: list[NamedToolRow]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from .locate import find_llama_cpp

    stems = set(argv if argv is not None else sys.argv[1:])
    root = find_llama_cpp(None) / "models" / "templates"
    rows = []
    with OracleClient() as oracle:
        for path in sorted(root.glob("*.jinja")):
            if not stems or path.stem in stems:
                rows.append(check_template(oracle, path.stem, path.read_text(encoding="utf-8")))
    print(_table(rows))
    bad = [row.template for row in rows if not row.ok]
    supported = sum(row.supported for row in rows)
    print(f"\n{len(rows)} templates: {supported} supported, {len(rows) - supported} refused (no tool-call format); "
          f"failing: {', '.join(bad) or 'none'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
