"""Speculative decoding: draft sources and the verification of their drafts by the target model.

What enters: ``SpeculativeParams`` (``ModelParams.speculative``: llama-server's ``--spec-*``
options), the engine's model (and a draft model), and per generation the tokens its KV cache holds
and its sampler. What leaves: drafts, which the token loops (``loop.speculative_steps`` for one
sequence, ``slots`` for the batch scheduler) decode with the pending token in one batch; the target
samples every position itself and keeps a drafted token only while it equals its own choice
(``native.speculative``), so the output is what the target alone samples. Counters per generation
(``Timings.n_draft`` / ``n_draft_accepted``) and per engine (``Speculator.totals``).

The sources, each a port of upstream's algorithm (common/speculative.cpp, common/ngram-*.cpp) or
llamact's own: ``ngram_simple``, ``ngram_map`` (k and k4v), ``ngram_mod``, ``draft_model``
(draft-simple) and ``grammar_draft`` (the text the request's grammar forces next).

Raised: ``LlamaModelException`` for bad settings or a draft model whose vocabulary is not the
target's (at load); nothing while drafting (a draft that fails is no draft).
"""

from __future__ import annotations

from .params import SPEC_TYPES, SpeculativeParams
from .speculator import SequenceSpeculation, SpecTotals, Speculator

__all__ = ["SPEC_TYPES", "SequenceSpeculation", "SpecTotals", "SpeculativeParams", "Speculator"]
