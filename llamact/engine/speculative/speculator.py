"""The drafting side of speculative decoding: an engine's draft sources and each sequence's share.

    speculator = Speculator(params, model, n_seq, draft_model)      # once per engine
    spec = speculator.sequence(seq, tokens, sampler)                # per generation: its history
    spec.begin()                                                    # the prompt is in the KV cache
    drafts = speculator.draft_all([(spec, pending, n_max), ...])    # one draft per sequence (maybe empty)
    spec.verified(pending, draft, chosen)                           # what the target chose after a draft
    spec.stepped(decoded, sampled)                                  # a plain step: what it decoded, sampled

Sources are tried in upstream's order of preference (``common_speculative_draft``): the first
that drafts anything is the draft, cut to ``n_max``. llamact's grammar drafts come first; when the
grammar forces fewer tokens than ``n_max``, the first of ngram-simple, ngram-mod and the draft
model that is on continues the draft from the end of the forced text (ngram-mod without learning
from it). ngram-map-k / -k4v draft only from the history itself.

Counters as llama-server keeps them: a sequence's ``n_draft`` (tokens drafted) and ``n_accepted``
(drafted tokens the target kept) for its timings' ``draft_n`` / ``draft_n_accepted``; the engine's
``totals`` for ``/metrics`` (with the verification steps and the accepted tokens per draft position).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...native.guided import GuidedSampler
from ...native.matcher_grammar import MatcherGrammar
from ...native.model import Model
from ...native.sampler import Grammar, SamplerChain
from .draft_model import DraftJob, DraftModel
from .grammar_draft import AcceptorCache, GrammarDraft
from .history import TokenHistory
from .ngram_map import NgramMap
from .ngram_mod import NgramMod
from .ngram_simple import ngram_simple_draft
from .params import SpeculativeParams

__all__ = ["SequenceSpeculation", "SpecTotals", "Speculator", "accepted_count"]


def accepted_count(draft: Sequence[int], chosen: Sequence[int]) -> int:
    """How many drafted tokens the target kept: all the chosen tokens but the last, and the last too
    when it equals its draft token (an end-of-generation token ends a run even where it agrees)."""
    n = len(chosen) - 1
    return n + 1 if n < len(draft) and chosen[n] == draft[n] else n


@dataclass
class SpecTotals:
    """``/metrics``' speculative counters (llama-server's ``spec_decode_*``)."""

    n_draft: int = 0            # draft tokens generated
    n_accepted: int = 0         # draft tokens accepted by the target
    n_steps: int = 0            # verification steps
    accepted_per_pos: list[int] = field(default_factory=list)


class Speculator:
    """An engine's draft sources and their shared state (the ngram-mod table, the draft model)."""

    def __init__(self, params: SpeculativeParams, model: Model, n_seq: int, draft_model: DraftModel | None = None):
        self.params = params
        types = set(params.types)
        self.n_max = params.n_max()
        self._model = model
        self._vocab = model.vocab
        self._simple = "ngram-simple" in types
        self._maps: dict[str, list[NgramMap]] = {}
        if "ngram-map-k" in types:
            self._maps["ngram-map-k"] = [NgramMap(params.ngram_map_k_size_n, params.ngram_map_k_size_m, True,
                                                  params.ngram_map_k_min_hits) for _ in range(n_seq)]
        if "ngram-map-k4v" in types:
            self._maps["ngram-map-k4v"] = [NgramMap(params.ngram_map_k4v_size_n, params.ngram_map_k4v_size_m,
                                                    False, params.ngram_map_k4v_min_hits) for _ in range(n_seq)]
        self._mod = (NgramMod(params.ngram_mod_n_match, params.ngram_mod_n_min, params.ngram_mod_n_max, n_seq)
                     if "ngram-mod" in types else None)
        self.draft_model = draft_model
        self._grammar = "grammar" in types
        self._acceptors = AcceptorCache()
        self._lock = threading.Lock()
        self.totals = SpecTotals(accepted_per_pos=[0] * self.n_max)

    def close(self) -> None:
        if self.draft_model is not None:
            self.draft_model.close()

    def sequence(self, seq: int, tokens: Sequence[int], sampler: SamplerChain | GuidedSampler | None = None
                 ) -> SequenceSpeculation:
        """A generation on sequence ``seq`` whose KV cache will hold ``tokens`` once its prompt is
        evaluated; ``sampler`` (its grammar) for grammar drafts."""
        return SequenceSpeculation(self, seq, TokenHistory(tokens), self._grammar_draft(sampler))

    def forget(self, seq: int) -> None:
        """A slot's cache was emptied or replaced behind the drafts' back."""
        if self.draft_model is not None:
            self.draft_model.forget(seq)

    def _grammar_draft(self, sampler: SamplerChain | GuidedSampler | None) -> GrammarDraft | None:
        if not self._grammar or sampler is None:
            return None
        if isinstance(sampler, GuidedSampler):
            grammar, prefill = sampler.grammar, sampler.grammar_prefill
        else:
            grammar = next((s for s in sampler.specs if isinstance(s, (Grammar, MatcherGrammar))), None)
            prefill = ()
        if grammar is None or grammar.lazy:   # a lazy grammar waits for a trigger the drafts cannot see
            return None
        acceptor = self._acceptors.get(grammar.grammar, grammar.root)
        return GrammarDraft(acceptor, self._vocab, prefill) if acceptor is not None else None

    # -- drafting ----------------------------------------------------------------------------

    def draft_all(self, requests: Sequence[tuple[SequenceSpeculation, int, int]]) -> list[list[int]]:
        """One draft per ``(sequence, pending token, n_max)``, in order (empty: none). The draft
        model drafts for every sequence left without a draft, in one batch per position."""
        drafts: list[list[int]] = []
        model_jobs: list[tuple[int, DraftJob, list[int]]] = []   # (request index, job, forced prefix)
        for index, (spec, pending, n_max) in enumerate(requests):
            draft, job = spec.propose(pending, n_max)
            drafts.append(draft)
            if job is not None:
                model_jobs.append((index, job, draft))
        if model_jobs and self.draft_model is not None:
            made = self.draft_model.draft([job for _i, job, _g in model_jobs])
            for (index, _job, forced), tail in zip(model_jobs, made, strict=True):
                spec = requests[index][0]
                if tail:
                    drafts[index] = [*forced, *tail][:requests[index][2]]
                    spec.source, spec.n_forced = "draft-simple", len(forced)
        for index, (spec, _pending, _n_max) in enumerate(requests):
            spec.n_draft += len(drafts[index])
        return drafts

    def record(self, n_draft: int, n_accepted: int) -> None:
        with self._lock:
            t = self.totals
            t.n_draft += n_draft
            t.n_accepted += n_accepted
            t.n_steps += 1
            for i in range(min(n_accepted, len(t.accepted_per_pos))):
                t.accepted_per_pos[i] += 1


class SequenceSpeculation:
    """One generation's drafting state: the history its KV cache holds, its grammar, its counters."""

    def __init__(self, speculator: Speculator, seq: int, history: TokenHistory, grammar: GrammarDraft | None):
        self.speculator = speculator
        self.seq = seq
        self.history = history
        self.grammar = grammar
        self.source: str | None = None   # which source made the last draft (upstream's impl_last)
        self.n_forced = 0                # how many of its tokens the grammar forced
        self.n_draft = 0
        self.n_accepted = 0

    def begin(self) -> None:
        """The prompt is evaluated: the sources learn it (``common_speculative_begin``)."""
        s = self.speculator
        for maps in s._maps.values():
            maps[self.seq].begin(self.history)
        if s._mod is not None:
            s._mod.begin(self.seq, self.history)

    def propose(self, pending: int, n_max: int) -> tuple[list[int], DraftJob | None]:
        """The draft from every source but the draft model, and the draft model's job when it is to
        draft (alone, or after grammar-forced tokens)."""
        s, history, seq = self.speculator, self.history, self.seq
        self.source, self.n_forced = None, 0
        if n_max <= 0:
            return [], None
        forced = self.grammar.draft(min(n_max, s.params.grammar_n_max)) if self.grammar is not None else []
        if forced:
            self.source, self.n_forced = "grammar", len(forced)
            room = n_max - len(forced)
            if room <= 0:
                return forced[:n_max], None
            if s.draft_model is not None and not s._simple and s._mod is None:
                return forced, DraftJob(seq, history.extended([pending, *forced[:-1]]), forced[-1], room)
            # the tail continues from the forced text: lent to the history for the lookup
            n = len(history)
            history.append(pending)
            history.extend(forced[:-1])
            tail: list[int] = []
            source = None
            try:
                if s._simple:
                    tail = ngram_simple_draft(history, forced[-1], s.params.ngram_simple_size_n,
                                              s.params.ngram_simple_size_m)
                    source = "ngram-simple"
                elif s._mod is not None:
                    tail = s._mod.peek(seq, history, forced[-1])
                    source = "ngram-mod"
            finally:
                history.truncate(n)
            if tail:
                self.source = source
            return [*forced, *tail][:n_max], None
        if s._simple:
            draft = ngram_simple_draft(history, pending, s.params.ngram_simple_size_n, s.params.ngram_simple_size_m)
            if draft:
                self.source = "ngram-simple"
                return draft[:n_max], None
        for name, maps in s._maps.items():
            draft = maps[seq].draft(history, pending)
            if draft:
                self.source = name
                return draft[:n_max], None
        if s._mod is not None:
            draft = s._mod.draft(seq, history, pending)
            if draft:
                self.source = "ngram-mod"
                return draft[:n_max], None
        if s.draft_model is not None:
            return [], DraftJob(seq, history, pending, n_max)
        return [], None

    def verified(self, pending: int, draft: Sequence[int], chosen: Sequence[int]) -> None:
        """The target decoded ``pending`` + ``draft`` and chose ``chosen`` (all but the last equal the
        draft): the history, the grammar, the sources' acceptance and the counters move on."""
        n_accepted = accepted_count(draft, chosen)
        self.history.append(pending)
        self.history.extend(chosen[:-1])
        if self.grammar is not None:
            self.grammar.feed(chosen)
        self.n_accepted += n_accepted
        s = self.speculator
        source, forced = self.source, self.n_forced
        own = n_accepted - forced   # accepted tokens of the source that continued a forced draft
        if source is not None and source != "grammar" and own >= 0:
            if source in s._maps:
                s._maps[source][self.seq].accept(own)
            elif source == "ngram-mod" and s._mod is not None:
                s._mod.accept(self.seq, own)
        s.record(len(draft), n_accepted)

    def stepped(self, decoded: Sequence[int], sampled: int) -> None:
        """A plain step decoded ``decoded`` (the previous pending token; none after the prompt) and
        sampled ``sampled``."""
        if decoded:
            self.history.extend(decoded)
        if self.grammar is not None:
            self.grammar.feed((sampled,))

    def n_max(self, n_ctx: int, max_tokens: int, n_generated: int) -> int:
        """The longest draft that fits (llama-server's ``get_n_draft_max``): two positions short of the
        context, one short of ``max_tokens``."""
        n = n_ctx - len(self.history) - 2
        remaining = max_tokens - n_generated if max_tokens >= 0 else -1
        if remaining > 0:
            n = min(n, remaining - 1)
        return min(n, self.speculator.n_max)

    def stats(self) -> dict[str, Any]:
        return {"draft_n": self.n_draft, "draft_n_accepted": self.n_accepted}
