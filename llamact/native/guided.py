"""Guided sampling: a sampler chain with a grammar and a reasoning budget beside it, sampled as
llama-server samples (src/shim/guided_sampling.cpp; upstream's common/sampling.cpp).

``GuidedSampler(model, specs, grammar=..., budget=..., prefill=..., preserved_tokens=...)`` owns
one native guide, which owns the chain, the grammar sampler and the budget sampler. Per token
(``TokenStepper`` calls ``llamact_guided_step``): the chain chooses from the raw logits, the grammar
checks that one token, and only a rejected token makes the grammar filter every candidate before
the chain chooses again. The budget, applied first, forces the end of a thought when it runs out;
a lazy grammar stays out of thoughts and reads the end tag that closes one. Preserved tokens are
rendered as their text.

The generation prompt's tokens (``prefill``) are fed in at creation, as upstream's
``common_sampler_init`` does: to the budget always (it may open the thought), to the grammar when
``prefill_grammar`` (a template grammar that starts with that prompt; never a user grammar).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ..errors import LlamaInferenceException
from . import llama_h
from ._handle import NativeHandle
from ._library import native
from .context import Context
from .matcher_grammar import MatcherGrammar, failure_of
from .model import Model
from .reasoning_budget import BudgetState, ReasoningBudgetSpec
from .sampler import Grammar, Greedy, SamplerSpec, build_sampler, native_failure, validate_specs
from .shim import ErrorBuffer


class GuidedStats(NamedTuple):
    """What the grammar cost so far: ``sampled`` tokens; ``refused`` first choices the grammar did not
    admit; of those, ``runners_up`` replaced by a greedy runner-up checked alone; ``full_passes`` of
    the grammar over the whole vocabulary (every token in grammar-first mode)."""

    sampled: int
    refused: int
    runners_up: int
    full_passes: int


class GuidedSampler(NativeHandle):
    """A chain (``specs``), an optional grammar and reasoning budget, and the preserved tokens."""

    _kind = "guided sampler"

    def __init__(self, model: Model, specs: Sequence[SamplerSpec], *, grammar: Grammar | MatcherGrammar | None = None,
                 budget: ReasoningBudgetSpec | None = None, prefill: Sequence[int] = (),
                 prefill_grammar: bool = False, preserved_tokens: Iterable[int] = (),
                 grammar_first: bool = False, no_perf: bool = True) -> None:
        n_vocab = model.vocab.n_tokens
        self.specs = validate_specs(specs, n_vocab)
        if any(spec.is_grammar for spec in self.specs):
            raise LlamaInferenceException("a guided sampler takes its grammar beside the chain (grammar=...), "
                                          "not as a chain member")
        if grammar is not None:
            grammar.validate(n_vocab)
        if budget is not None:
            budget.validate(n_vocab)
        prefill_ids = model.vocab.token_ids(prefill)
        # what the grammar was fed before the first token (a speculative grammar draft replays it)
        self.grammar_prefill: tuple[int, ...] = tuple(prefill_ids) if prefill_grammar and grammar is not None else ()
        self.preserved_tokens = frozenset(model.vocab.token_ids(preserved_tokens))
        self.model = model
        self.grammar = grammar
        self.budget = budget
        self.grammar_first = grammar_first
        # the chain is exactly one greedy sampler: the step takes the argmax itself (src/shim)
        self.greedy_only = len(self.specs) == 1 and isinstance(self.specs[0], Greedy)
        shim, lib = native().shim, model._lib
        self._shim, self._lib, self._err = shim, lib, ErrorBuffer()
        params = lib.llama_sampler_chain_default_params()
        params.no_perf = no_perf
        with model.pinned():  # the samplers point into the vocabulary: the model outlives them
            vocab_ptr = model._vocab_ptr
            owned: list[int] = []
            try:
                chain = int(lib.llama_sampler_chain_init(params))
                owned.append(chain)
                for spec in self.specs:
                    lib.llama_sampler_chain_add(chain, build_sampler(spec, lib, vocab_ptr))
                grammar_ptr = build_sampler(grammar, lib, vocab_ptr) if grammar is not None else None
                if grammar_ptr:
                    owned.append(grammar_ptr)
                budget_ptr = budget.build(vocab_ptr) if budget is not None else None
                if budget_ptr:
                    owned.append(budget_ptr)
                ids = sorted(self.preserved_tokens)
                guide = shim.llamact_guide_init(
                    chain, grammar_ptr, int(grammar is not None and grammar.lazy), budget_ptr,
                    (llama_h.llama_token * max(1, len(ids)))(*ids), len(ids), n_vocab,
                    int(self.greedy_only), int(grammar_first), *self._err.args,
                )
                if not guide:
                    raise LlamaInferenceException(f"could not create the guided sampler: {self._err.message}")
            except BaseException:
                for ptr in owned:
                    lib.llama_sampler_free(ptr)
                raise
            self._grammar_ptr = int(grammar_ptr or 0)   # owned by the guide; read for a matcher's failure
            super().__init__(int(guide), shim.llamact_guide_free)
            model._adopt(self)
        if prefill_ids:
            self._prefill(prefill_ids, prefill_grammar)

    def _prefill(self, tokens: list[int], into_grammar: bool) -> None:
        array = (llama_h.llama_token * len(tokens))(*tokens)
        with self.pinned() as guide:
            failed = self._shim.llamact_guide_prefill(guide, array, len(tokens), int(into_grammar), *self._err.args)
            failure = failure_of(self._grammar_ptr) if self._grammar_ptr else None
        if failed or failure:
            message = failure or self._err.message
            self.close()
            raise LlamaInferenceException(
                f"the grammar does not admit the generation prompt it must start with (tokens {tokens}): {message}",
                {"prefill": tokens, "native_error": message},
            )

    # -- what the generation loop asks -------------------------------------------------------

    def renders_as_text(self, token: int) -> bool:
        """Whether ``token`` is a preserved token (rendered as its text even without render_special)."""
        return token in self.preserved_tokens

    @property
    def budget_state(self) -> BudgetState | None:
        """The reasoning budget's state; None without a budget."""
        with self.pinned() as guide:
            state = int(self._shim.llamact_guide_budget_state(guide))
        return BudgetState(state) if state >= 0 else None

    @property
    def stats(self) -> GuidedStats:
        out = (ctypes.c_int64 * 4)()
        with self.pinned() as guide:
            self._shim.llamact_guide_stats(guide, out)
        return GuidedStats(*out)

    def end_thought(self) -> bool:
        """End the thought in progress: its end sequence is forced from the next token on (the server's
        reasoning control). False, changing nothing, when no thought is being counted. Safe from
        another thread: it waits for a step in progress."""
        with self.pinned() as guide:
            return bool(self._shim.llamact_guide_force_budget(guide))

    def sample(self, context: Context, index: int = -1) -> int:
        """Sample (and accept) the next token from ``context``'s logits at output ``index``."""
        with context.pinned() as ctx, self.pinned() as guide:  # context first, as TokenStepper does
            token = int(self._shim.llamact_guide_sample(guide, ctx, index, *self._err.args))
        if token == llama_h.LLAMA_TOKEN_NULL:
            raise self.abandon("sampling", self._err.message)
        return token

    def grammar_failure(self) -> str | None:
        """What went wrong inside a matcher grammar (llguidance's) since creation; None otherwise."""
        with self.pinned():
            return failure_of(self._grammar_ptr) if self._grammar_ptr else None

    def accept(self, token: int) -> None:
        """Record ``token`` as generated (``sample`` already does). A token the grammar does not admit
        here raises LlamaInferenceException and changes nothing."""
        token = self.model.vocab.token_ids([token])[0]
        with self.pinned() as guide:
            rc = int(self._shim.llamact_guide_accept(guide, token, *self._err.args))
        if rc == 1:
            raise LlamaInferenceException(f"token {token} is not allowed by the grammar at this point; "
                                          "accept only tokens the sampler could have chosen", {"token": token})
        if rc != 0:
            raise self.abandon(f"accepting token {token}", self._err.message)

    def abandon(self, what: str, message: str) -> LlamaInferenceException:
        """A C++ exception escaped the sampler: its state is undefined now, so close it and return the
        exception to raise."""
        self.close()
        return native_failure(what, message, "the guided sampler was closed")
