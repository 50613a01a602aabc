"""The sampling half of a chat request, wired as llama-server wires it.

    chat_sampling_plan(vocab, result, params, thinking_budget_tokens) -> ChatSamplingPlan   (values)
    chat_sampler_config(engine, result, params, thinking_budget_tokens) -> ChatSampling     (native, per request)

What enters: the apply result of the request (``ChatTemplateResult``: grammar, lazy flag, triggers,
preserved tokens, generation prompt, thinking tags, additional stops) and its ``GenerationParams``.
What leaves: the sampler llama-server would build for it, with the stop strings and the tokens to
render as text. The steps, in upstream's order and with upstream's rules:

* preserved tokens (server-schema.cpp): each preserved string that tokenizes to one token;
* grammar triggers (server-schema.cpp): a WORD that tokenizes to one token becomes a TOKEN trigger,
  and must be preserved ("Grammar trigger word should be marked as preserved token"); then
  (common_sampler_init) WORD -> ``regex_escape``, PATTERN as is, PATTERN_FULL anchored ``^...$``,
  TOKEN -> a trigger token; a lazy grammar without triggers is refused;
* the grammar: the template's (tools, response_format), lazy with those triggers or else prefilled
  with the tokenized generation prompt (its root starts with that text); or the user's
  ``GenerationParams.grammar``, never prefilled; not both;
* the reasoning budget (server-common.cpp, common_sampler_init): when the template has thinking
  end tags and a start tag, and the grammar is lazy or a budget is set (``thinking_budget_tokens``
  >= 0) or ``reasoning_control`` is asked for; it forces ``reasoning_budget_message`` + the first
  end tag when the budget runs out, and is prefilled with the generation prompt too (a prompt that
  opens the thought starts the count);
* the chain: ``GenerationParams``' samplers in upstream's order, the vocabulary's suppress tokens
  merged into the logit bias as -inf;
* stops: ``params.stop`` then ``result.additional_stops``.

Sampling itself (grammar checked after the chain, budget, preserved tokens as text) runs in C: see
``llamact/native/guided.py``. Raises ``LlamaInferenceException`` where llama-server answers an error.

How a generation uses it (``create()``)::

    result = engine.chat_template(messages, tools=..., ...)
    sampling = chat_sampler_config(engine, result, params, thinking_budget_tokens)   # per request
    try:
        prompt = engine.tokenize(result.prompt, add_special=True, parse_special=True)
        for chunk in generate(engine.context, sampling.sampler, prompt, params.max_tokens,
                              sampling.stops, params.render_special):
            ...   # chunk.text: preserved tokens already as text; feed result.output_parser()
    finally:
        sampling.close()

``sampling.end_thought()`` (any thread) ends a thought early when the request asked for
``reasoning_control`` or a budget.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..chat.request import thinking_budget
from ..chat.result import ChatTemplateResult, GrammarTrigger
from ..errors import LlamaArgumentException, LlamaInferenceException
from ..native import sampler as s
from ..native.guided import GuidedSampler
from ..native.matcher_grammar import MatcherGrammar
from ..native.model import Model, Vocab
from ..native.reasoning_budget import UNLIMITED, BudgetState, ReasoningBudgetSpec
from .grammar_engines import grammar_sampler_spec
from .params import GenerationParams
from .sampling import check_grammar, sampler_specs

__all__ = ["ChatSampling", "ChatSamplingPlan", "anchor_full_pattern", "chat_sampler_config", "chat_sampling_plan",
           "generation_prompt_tokens", "regex_escape"]

GRAMMAR_NONE, GRAMMAR_TEMPLATE, GRAMMAR_USER = "none", "template", "user"

_REGEX_SPECIAL = re.compile(r"[.^$|()*+?\[\]{}\\]")
_C_SPACE = b" \t\n\v\f\r"  # std::isspace in the C locale


def regex_escape(text: str) -> str:
    """upstream's ``regex_escape`` (common.cpp): a backslash before each of ``.^$|()*+?[]{}\\``."""
    return _REGEX_SPECIAL.sub(lambda m: "\\" + m.group(0), text)


def anchor_full_pattern(pattern: str) -> str:
    """A PATTERN_FULL trigger as common_sampler_init passes it: anchored at both ends."""
    if not pattern:
        return "^$"
    return ("" if pattern.startswith("^") else "^") + pattern + ("" if pattern.endswith("$") else "$")


@dataclass(frozen=True)
class ChatSamplingPlan:
    """What llama-server derives for its sampler from one chat request, as plain values."""

    grammar: str
    grammar_kind: str                       # GRAMMAR_NONE, GRAMMAR_TEMPLATE or GRAMMAR_USER
    grammar_lazy: bool
    triggers: tuple[GrammarTrigger, ...]    # after the server's processing (WORD -> TOKEN where one token)
    trigger_patterns: tuple[str, ...]       # as llama_sampler_init_grammar_lazy_patterns gets them
    trigger_tokens: tuple[int, ...]
    preserved_tokens: tuple[int, ...]       # sorted
    prefill_tokens: tuple[int, ...]         # the tokenized generation prompt
    prefill_grammar: bool                   # the grammar reads them too (a non-lazy template grammar)
    budget: ReasoningBudgetSpec | None
    stops: tuple[str, ...]
    suppress_tokens: tuple[int, ...]

    def grammar_spec(self, model: Model | None = None, engine: str = "llama") -> s.Grammar | MatcherGrammar | None:
        """The grammar's sampler spec on the engine ``engine`` picks (``GenerationParams.grammar_engine``;
        a model is needed for any engine but llama.cpp's)."""
        if not self.grammar:
            return None
        patterns, tokens = (self.trigger_patterns, self.trigger_tokens) if self.grammar_lazy else ((), ())
        if model is None or engine == "llama":
            return s.Grammar(self.grammar, trigger_patterns=patterns, trigger_tokens=tokens)
        return grammar_sampler_spec(model, self.grammar, engine=engine, kind=self.grammar_kind,
                                    trigger_patterns=patterns, trigger_tokens=tokens)

    def chain_specs(self, params: GenerationParams) -> list[s.SamplerSpec]:
        """``params``' samplers without the grammar (it runs beside the chain), suppress tokens banned."""
        bias = dict(params.logit_bias)
        for token in self.suppress_tokens:
            bias[token] = float("-inf")
        return sampler_specs(replace(params, grammar=None, logit_bias=bias))


def _model_of(source: Any) -> Model:
    """The model of a LlamaEngine, a Model or a Vocab (engine imports this module: no isinstance on it)."""
    model = source if isinstance(source, Model) else getattr(source, "model", None)
    if not isinstance(model, Model):
        raise TypeError(f"expected a LlamaEngine, Model or Vocab, got {type(source).__name__}")
    return model


def _vocab_of(source: Any) -> Vocab:
    return source if isinstance(source, Vocab) else _model_of(source).vocab


def _tokens(vocab: Vocab, text: str) -> list[int]:
    """common_tokenize(vocab, text, add_special=false, parse_special=true)."""
    return vocab.tokenize(text, add_special=False, parse_special=True) if text else []


def _server_triggers(vocab: Vocab, triggers: Sequence[GrammarTrigger], preserved: set[int]) -> list[GrammarTrigger]:
    out: list[GrammarTrigger] = []
    for trigger in triggers:
        if trigger.type == "word":
            ids = _tokens(vocab, trigger.value)
            if len(ids) == 1:
                if ids[0] not in preserved:
                    raise LlamaInferenceException(
                        f"Grammar trigger word should be marked as preserved token: {trigger.value} (the chat "
                        f"template's trigger is one token of this model, which the template does not preserve)",
                        {"trigger": trigger.value, "token": ids[0]},
                    )
                out.append(GrammarTrigger("token", trigger.value, ids[0]))
                continue
        elif trigger.type not in ("pattern", "pattern_full", "token"):
            raise LlamaInferenceException(f"unknown grammar trigger type {trigger.type!r}", {"trigger": trigger.value})
        out.append(trigger)
    return out


def _lazy_arguments(triggers: Sequence[GrammarTrigger]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    patterns: list[str] = []
    tokens: list[int] = []
    for trigger in triggers:
        if trigger.type == "word":
            patterns.append(regex_escape(trigger.value))
        elif trigger.type == "pattern":
            patterns.append(trigger.value)
        elif trigger.type == "pattern_full":
            patterns.append(anchor_full_pattern(trigger.value))
        else:
            tokens.append(trigger.token)
    return tuple(patterns), tuple(tokens)


def generation_prompt_tokens(vocab: Vocab, generation_prompt: str) -> list[int]:
    """The generation prompt's tokens, without a first token whose text starts with a space the
    prompt does not start with (some tokenizers add one before a leading special token)."""
    tokens = _tokens(vocab, generation_prompt)
    if tokens and generation_prompt.encode("utf-8")[0] not in _C_SPACE:
        first = vocab.token_to_piece(tokens[0], special=True)
        if first[:1] and first[0] in _C_SPACE:
            tokens = tokens[1:]
    return tokens


def _budget_spec(vocab: Vocab, result: ChatTemplateResult, budget: int, message: str, lazy: bool,
                 reasoning_control: bool) -> ReasoningBudgetSpec | None:
    if not result.thinking_end_tags:  # the server passes no budget fields at all then
        return None
    start = _tokens(vocab, result.thinking_start_tag)
    ends = [_tokens(vocab, tag) for tag in result.thinking_end_tags if tag]
    if not start or not ends or not (lazy or budget >= 0 or reasoning_control):
        return None
    forced = (_tokens(vocab, message) if message else []) + ends[0]
    return ReasoningBudgetSpec((tuple(start),), tuple(tuple(e) for e in ends), tuple(forced),
                               UNLIMITED if budget < 0 else budget, BudgetState.IDLE)


def chat_sampling_plan(engine_or_vocab: Any, result: ChatTemplateResult, params: GenerationParams,
                       thinking_budget_tokens: int | None = None, *, reasoning_budget_message: str = "",
                       reasoning_control: bool = False) -> ChatSamplingPlan:
    """What llama-server derives for its sampler from this request (see the module docstring).
    ``thinking_budget_tokens`` None or -1: no limit."""
    vocab = _vocab_of(engine_or_vocab)
    budget = thinking_budget(thinking_budget_tokens)
    if result.grammar and params.grammar:
        raise LlamaArgumentException(
            "GenerationParams.grammar cannot be combined with the grammar this request already has (from its "
            "tools, response_format or grammar): give one of them",
            {"family": result.family},
        )
    if result.grammar:
        grammar, kind, lazy = result.grammar, GRAMMAR_TEMPLATE, result.grammar_lazy
    elif params.grammar:
        check_grammar(params.grammar, params.grammar_engine)
        grammar, kind, lazy = params.grammar, GRAMMAR_USER, False
    else:
        grammar, kind, lazy = "", GRAMMAR_NONE, result.grammar_lazy

    preserved = {ids[0] for ids in (_tokens(vocab, text) for text in result.preserved_tokens) if len(ids) == 1}
    triggers = _server_triggers(vocab, result.grammar_triggers, preserved)
    if lazy and not triggers:
        raise LlamaInferenceException("Error: no triggers set for lazy grammar! (the chat template's result has a "
                                      "lazy grammar and nothing that starts it)", {"family": result.family})
    patterns, trigger_tokens = _lazy_arguments(triggers)
    return ChatSamplingPlan(
        grammar=grammar, grammar_kind=kind, grammar_lazy=lazy, triggers=tuple(triggers),
        trigger_patterns=patterns, trigger_tokens=trigger_tokens, preserved_tokens=tuple(sorted(preserved)),
        prefill_tokens=tuple(generation_prompt_tokens(vocab, result.generation_prompt)),
        prefill_grammar=kind == GRAMMAR_TEMPLATE and not lazy,
        budget=_budget_spec(vocab, result, budget, reasoning_budget_message, lazy, reasoning_control),
        stops=tuple(params.stop) + tuple(result.additional_stops),
        suppress_tokens=vocab.suppress_tokens(),
    )


class ChatSampling:
    """The sampler of one chat generation, with what the generation loop needs beside it.

    ``sampler`` goes to ``generate()`` in place of a ``SamplerChain``; ``stops`` are its stop strings;
    preserved tokens are rendered as text by the sampler's own step. Close it (or use ``with``) when
    the generation ends: it owns native memory.
    """

    def __init__(self, plan: ChatSamplingPlan, sampler: GuidedSampler) -> None:
        self.plan = plan
        self.sampler = sampler

    @property
    def stops(self) -> tuple[str, ...]:
        return self.plan.stops

    @property
    def preserved_tokens(self) -> frozenset[int]:
        return self.sampler.preserved_tokens

    def end_thought(self) -> bool:
        """End the thought in progress now (its end tag is forced next); needs a reasoning budget, i.e.
        ``reasoning_control=True`` or a budget. False when no thought is being counted."""
        return self.sampler.end_thought()

    def close(self) -> None:
        self.sampler.close()

    def __enter__(self) -> ChatSampling:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def chat_sampler_config(engine_or_vocab: Any, result: ChatTemplateResult, params: GenerationParams,
                        thinking_budget_tokens: int | None = None, *, reasoning_budget_message: str = "",
                        reasoning_control: bool = False, grammar_first: bool = False) -> ChatSampling:
    """The sampler llama-server would build for this request (see the module docstring), built
    natively for the model of ``engine_or_vocab`` (a LlamaEngine, Model or Vocab). ``grammar_first``
    applies the grammar to every candidate on every token (upstream's other mode, for comparison; the
    same tokens, slower)."""
    model = _model_of(engine_or_vocab)
    plan = chat_sampling_plan(model.vocab, result, params, thinking_budget_tokens,
                              reasoning_budget_message=reasoning_budget_message, reasoning_control=reasoning_control)
    try:
        grammar = plan.grammar_spec(model, params.grammar_engine)
        sampler = GuidedSampler(model, plan.chain_specs(params), grammar=grammar, budget=plan.budget,
                                prefill=plan.prefill_tokens, prefill_grammar=plan.prefill_grammar,
                                preserved_tokens=plan.preserved_tokens, grammar_first=grammar_first)
    except LlamaInferenceException as exc:
        if plan.prefill_grammar and "prefill" in exc.details:
            raise LlamaInferenceException(
                f"the grammar of this request does not start with its generation prompt "
                f"{result.generation_prompt!r} ({exc.message})", {"family": result.family, **exc.details},
            ) from exc
        raise
    return ChatSampling(plan, sampler)
