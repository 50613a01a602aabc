"""``tool_choice: "required"`` answers with tool calls (docs/design.md, deviation 19).

    apply_required_calls(templates, inputs) -> ChatTemplateResult     (``inputs.required_calls_only`` set)

Upstream's ``"required"`` grammars let content come first (``root ::= GEN space CONTENT? tool-calls``,
content being anything up to the tool-call opener) and admit whitespace after each call. A model
that does not use its template's envelope on its own (Qwen2.5-Coder writes a fenced JSON call) then
writes its call as content, cannot end (the grammar still wants a call), and fills ``max_tokens``
with newlines: the reply is cut short, and the calls it wrote are withheld (deviation 5). OpenAI's
``"required"`` means the reply is tool calls, so by default llamact forces the envelope at once:

* the prompt, parser, stops, preserved tokens and thinking tags are upstream's ``"required"`` ones
  (the parser still reads content, which can now only be whitespace);
* the grammar is that parser's with every content part taken out, as deviation 9 derives it
  (``named_grammar.call_only_grammar``), but with all the tools and the family's number of calls
  (one or more where its parser reads several); whitespace stays between calls only, so the grammar
  is complete, and llama.cpp allows only an end token, where a call ends;
* not lazy and without triggers (upstream's ``"required"`` grammars are not lazy either), prefilled
  with the generation prompt, which the grammar begins with;
* with ``reasoning_format="none"`` the grammar is derived from the ``"deepseek"`` parse, as deviation 9
  does, so that a thought the generation prompt opens stays admitted (the parser is still upstream's).

Where the parser has no tool-call path (a template without a tool-call format, ``force_pure_content``)
and when the request continues the final message, the result is upstream's. ``upstream_compat``
gives upstream's grammar (``ChatRequest`` sets ``required_calls_only`` only without it).
"""

from __future__ import annotations

from dataclasses import replace

from ..apply import ChatTemplateInputs, upstream_apply
from ..render import CONTINUATION_NONE, TOOL_CHOICE_REQUIRED
from ..result import ChatTemplateResult
from ..templates import ChatTemplates
from .named_grammar import call_only_grammar

__all__ = ["apply_required_calls"]


def apply_required_calls(templates: ChatTemplates, inputs: ChatTemplateInputs) -> ChatTemplateResult:
    """Upstream's ``"required"`` result with the grammar of calls alone (see the module docstring)."""
    if inputs.tool_choice != TOOL_CHOICE_REQUIRED or inputs.named_tool is not None:
        raise ValueError("apply_required_calls needs tool_choice \"required\" without a named tool")
    result = upstream_apply(templates, inputs)
    if result.parser is None or not result.grammar or inputs.continue_final_message != CONTINUATION_NONE:
        return result
    parser = result.parser
    if inputs.reasoning_format == "none":
        # as deviation 9: the grammar comes from a parse that keeps a thought apart from content (with
        # "none" the thought is content, and content is taken out: the generation prompt's "<think>" would
        # not be admitted); the parser stays upstream's, which returns the thought in content
        thought = upstream_apply(templates, replace(inputs, reasoning_format="deepseek"))
        if thought.parser is None or thought.generation_prompt != result.generation_prompt:
            return result
        parser = thought.parser
    grammar = call_only_grammar(parser, one_call=False)
    if grammar is None:
        return result
    return replace(result, grammar=grammar, grammar_lazy=False, grammar_triggers=())
