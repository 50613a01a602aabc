"""The grammar seam: one grammar, two engines that run it.

* ``llama``: llama.cpp's own grammar sampler (the GBNF text is handed to llama.cpp; llamact's
  limits in ``grammar.limits`` guard its cost).
* ``llguidance``: the same GBNF converted to Lark and run by llguidance's token masks
  (``llguidance_engine``), lazy grammars through ``lazy.LazyMatcher``; its own parser limits apply.

``choice`` decides between them (``auto``: llguidance only for classes proven equal). The engine
layer (``llamact.engine.grammar_engines``) builds the native sampler for the choice: llama.cpp's
grammar, or a sampler that asks the llguidance matcher (``native.matcher_grammar``).
"""

from __future__ import annotations

from .choice import (
    ENGINE_NAMES,
    GRAMMAR_CLASSES,
    PROVEN_CLASSES,
    EngineChoice,
    check_engine_name,
    grammar_class,
    log_choice,
)
from .lazy import LazyMatcher, TriggerPatternError, compile_trigger_patterns
from .llguidance_engine import (
    CompiledGrammar,
    GrammarUnfitError,
    LlguidanceMatcher,
    LlguidanceTokenizer,
    TokenVocabulary,
    engine_limits,
    llguidance_unavailable,
)

__all__ = [
    "ENGINE_NAMES",
    "GRAMMAR_CLASSES",
    "PROVEN_CLASSES",
    "CompiledGrammar",
    "EngineChoice",
    "GrammarUnfitError",
    "LazyMatcher",
    "LlguidanceMatcher",
    "LlguidanceTokenizer",
    "TokenVocabulary",
    "TriggerPatternError",
    "check_engine_name",
    "compile_trigger_patterns",
    "engine_limits",
    "grammar_class",
    "llguidance_unavailable",
    "log_choice",
]
