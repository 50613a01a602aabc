"""Named tool choice (docs/design.md, deviation 9): ``tool_choice={"type": "function", "function": {"name": N}}``
forces an immediate call of N.

    apply_named_tool(templates, inputs) -> ChatTemplateResult      (``inputs.named_tool`` set)

llama-server reads a named tool choice as "auto"; llamact makes the model call N at once: the
grammar admits the template's generation prompt, the template's own thought where it has one
(optional, or forced when the generation prompt opens it), then exactly one call of N, and nothing
else -- no content before or after (a little whitespace where the template puts newlines), no other
tool, no second call. ``"required"`` keeps upstream's meaning.

How it is built, for every family (specialized or autoparser) alike:

* the request is applied as upstream applies ``tool_choice="required"`` with all its tools: the
  prompt (the model sees its whole tool list), the parser (it reads any of the tools), stops,
  preserved tokens and thinking tags are that result's;
* it is applied again with only N (``"required"``, one call, reasoning extracted so that the
  family's parser keeps a thought apart from content), and that parser's grammar, with every
  content part taken out and its calls made one (``named_grammar.call_only_grammar``), is the
  grammar. It begins with the same generation prompt, as upstream's ``"required"`` grammars do
  (checked: a template whose generation prompt changed with the tool list is refused).

With ``parallel_tool_calls`` the parser still reads several calls, but the grammar admits one.

``response_format`` constrains a text answer; a forced call has none, so it does not apply to this
turn (OpenAI's reading too). With ``reasoning_format="none"`` the grammar still lets the model think
first (where the template has a thought) and the parser returns that thought in ``content``, as
upstream does for that format.

Wiring the sampler (engine): the grammar is NOT lazy and has no triggers; like upstream's
``"required"`` grammars (``common_grammar_needs_prefill``: type TOOL_CALLS) it must be prefilled with
the tokenized ``generation_prompt`` (accepted by the grammar sampler before the first sampled
token), since its root begins with that text. It applies from the first token on, the thought
included: a thought is free text up to the family's end tag, so the reasoning-budget sampler may
force that end tag and the grammar accepts it; once the thought is closed only the call is
admitted, and after the call only end of generation (or an ``additional_stops`` string). Upstream's
trick of sampling first and applying the grammar only when the sampled token is rejected
(``common_sampler_sample``) matters here: the grammar is active on every token, and checking a
whole vocabulary against it per token is slow.

Raises ``ChatRequestError`` (N is not among the tools; a request this cannot serve: pure content,
continuing the final message) and ``LlamaUnsupportedException`` naming the template when it has no
tool-call format (nothing to constrain).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ...errors import LlamaUnsupportedException
from ..apply import ChatTemplateInputs, upstream_apply
from ..oai import ChatRequestError, ChatTool
from ..render import CONTINUATION_NONE, TOOL_CHOICE_REQUIRED
from ..result import ChatTemplateResult
from ..templates import ChatTemplates
from ..tool_format import LIBRARY_REMEDY, cannot_call
from .named_grammar import call_only_grammar

__all__ = ["apply_named_tool", "require_tool"]


def require_tool(name: str, tools: Sequence[ChatTool]) -> None:
    """Raise ``ChatRequestError`` unless ``name`` is one of ``tools``."""
    names = [tool.name for tool in tools]
    if name not in names:
        listed = ", ".join(repr(n) for n in names) or "none"
        raise ChatRequestError(f"tool_choice names the function {name!r}, which is not among the request's tools "
                               f"({listed})", {"tool_choice": name, "tools": names})


def _check(inputs: ChatTemplateInputs, name: str) -> None:
    require_tool(name, inputs.tools)
    if inputs.force_pure_content:
        raise ChatRequestError("a tool_choice naming a function forces a tool call; it cannot be combined with "
                               "force_pure_content, which reads the whole output as content", {"tool_choice": name})
    if inputs.continue_final_message != CONTINUATION_NONE:
        raise ChatRequestError("a tool_choice naming a function forces a new tool call; it cannot continue the "
                               "final message (send the request without continue_final_message)",
                               {"tool_choice": name})


def apply_named_tool(templates: ChatTemplates, inputs: ChatTemplateInputs) -> ChatTemplateResult:
    """The prompt, parser and forced-call grammar for ``inputs.named_tool`` (see the module docstring)."""
    name = inputs.named_tool
    if name is None:
        raise ValueError("apply_named_tool needs inputs.named_tool")
    _check(inputs, name)
    request = replace(inputs, tool_choice=TOOL_CHOICE_REQUIRED, named_tool=None, json_schema=None)
    result = upstream_apply(templates, request)

    only = tuple(tool for tool in inputs.tools if tool.name == name)[:1]
    reasoning_format = "deepseek" if inputs.reasoning_format == "none" else inputs.reasoning_format
    forced = upstream_apply(templates, replace(request, tools=only, parallel_tool_calls=False,
                                               reasoning_format=reasoning_format))
    grammar = call_only_grammar(forced.parser) if forced.parser is not None else None
    origin = templates.for_request(True).origin
    if grammar is None:
        raise LlamaUnsupportedException(
            cannot_call(f"the chat template from {origin}", f"names the function {name!r}", LIBRARY_REMEDY),
            {"origin": origin, "family": forced.family, "tool_choice": name})
    if forced.generation_prompt != result.generation_prompt:
        # the grammar begins with its own generation prompt, the sampler is prefilled with the request's
        raise LlamaUnsupportedException(
            f"The chat template from {origin} opens the assistant turn differently when it lists only "
            f"{name!r}, so tool_choice cannot force a call of it with this template.",
            {"origin": origin, "family": forced.family, "tool_choice": name})
    return replace(result, grammar=grammar, grammar_lazy=False, grammar_triggers=(), named_tool=name)
