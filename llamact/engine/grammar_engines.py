"""A grammar's native sampler, built on the engine ``GenerationParams.grammar_engine`` picks.

    grammar_sampler_spec(model, text, engine="auto", kind="user", trigger_patterns=(), trigger_tokens=())
        -> sampler.Grammar (llama.cpp's engine) or matcher_grammar.MatcherGrammar (llguidance's)

Every path that hands a grammar to native code comes through here: a chat request's template or
user grammar (``chat_sampling``), ``GenerationParams.grammar`` on a raw prompt (``sampling``), the
batched slots, the compat layer. The choice and its reason are logged once per grammar
(``grammar.engines.choice``); llguidance's tokenizer is built once per model, from the model's own
vocabulary (``token_to_piece`` with special tokens as text, the end-of-generation tokens,
``tokenize``), and its compiled grammars are cached by text.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

from ..errors import LlamaInferenceException
from ..grammar.engines import (
    PROVEN_CLASSES,
    EngineChoice,
    GrammarUnfitError,
    LlguidanceTokenizer,
    TokenVocabulary,
    check_engine_name,
    engine_limits,
    grammar_class,
    llguidance_unavailable,
    log_choice,
)
from ..grammar.engines.lazy import TriggerPatternError, compile_trigger_patterns
from ..grammar.limits import GrammarLimits, default_limits
from ..native import sampler as s
from ..native.matcher_grammar import GrammarProbe, MatcherGrammar
from ..native.model import Model

__all__ = ["choose_grammar_engine", "grammar_limits_for", "grammar_sampler_spec", "llguidance_tokenizer"]

log = logging.getLogger("llamact.grammar")

_TOKENIZERS: weakref.WeakKeyDictionary[Model, LlguidanceTokenizer] = weakref.WeakKeyDictionary()
_TOKENIZER_LOCK = threading.Lock()
_WARNED = threading.Event()


def _vocabulary(model: Model) -> TokenVocabulary:
    vocab = model.vocab
    n = vocab.n_tokens
    pieces = [vocab.token_to_piece(token, special=True) for token in range(n)]
    eog = [token for token in range(n) if vocab.is_eog(token)]
    owner = weakref.ref(model)   # the tokenizer is kept with the model: no strong reference back

    def tokenize(data: bytes) -> list[int]:
        alive = owner()
        return alive.vocab.tokenize(data, add_special=False, parse_special=False) if alive is not None else []

    return TokenVocabulary(pieces, eog, tokenize, vocab.bos)


def llguidance_tokenizer(model: Model) -> LlguidanceTokenizer:
    """The model's llguidance tokenizer (built on first use, ~1 s for a 50k vocabulary; then kept
    with the model)."""
    with _TOKENIZER_LOCK:
        tokenizer = _TOKENIZERS.get(model)
        if tokenizer is None:
            tokenizer = LlguidanceTokenizer(_vocabulary(model))
            _TOKENIZERS[model] = tokenizer
        return tokenizer


def choose_grammar_engine(requested: str, cls: str) -> EngineChoice:
    """The engine for a grammar of class ``cls`` before it is compiled (llguidance may still turn it
    down, see ``grammar_sampler_spec``)."""
    requested = check_engine_name(requested)
    if requested == "llama":
        return EngineChoice("llama", "grammar_engine='llama' asked for it")
    if requested == "auto" and cls not in PROVEN_CLASSES:
        return EngineChoice("llama", f"auto: the {cls!r} class is not proven equal to llama.cpp's engine")
    unavailable = llguidance_unavailable()
    if unavailable is not None:
        if not _WARNED.is_set():
            _WARNED.set()
            log.warning("llguidance cannot be loaded (%s): grammars run on llama.cpp's engine", unavailable)
        return EngineChoice("llama", f"llguidance cannot be loaded ({unavailable})")
    if requested == "llguidance":
        return EngineChoice("llguidance", "grammar_engine='llguidance' asked for it")
    return EngineChoice("llguidance", f"auto: the {cls!r} class is proven equal to llama.cpp's engine")


class _OverBoundsFallback:
    """``auto``'s safety net: llguidance's matcher until one of its per-step bounds binds (a mask or a
    token's parse over its Earley item limits: a grammar whose ambiguity llama.cpp's engine follows
    more slowly but without bound), then llama.cpp's own grammar, the tokens read so far replayed
    into it -- the same verdicts up to there (the proof), llama.cpp's from there on."""

    def __init__(self, inner: Any, model: Model, text: str, llama_spec: Callable[[], s.Grammar]) -> None:
        self._inner = inner
        self._model = model
        self._text = text
        self._llama_spec = llama_spec
        self._tokens: list[int] = []
        self._llama: GrammarProbe | None = None

    def _switch(self, why: str) -> GrammarProbe:
        if self._llama is None:
            log_choice(self._text, EngineChoice("llama", f"auto: llguidance's bounds bind at a token ({why}): the "
                                                         "generation goes on on llama.cpp's engine"))
            probe = GrammarProbe(self._model, self._llama_spec())
            for token in self._tokens:
                probe.accept(token)
            self._llama = probe
        return self._llama

    def allows(self, token: int) -> bool:
        if self._llama is None:
            try:
                return bool(self._inner.allows(token))
            except LlamaInferenceException as exc:
                return self._switch(exc.message).allows(token)
        return self._llama.allows(token)

    def allowed(self) -> Any:
        if self._llama is None:
            try:
                return self._inner.allowed()
            except LlamaInferenceException as exc:
                return self._switch(exc.message).allowed()
        return self._llama.allowed()

    def accept(self, token: int) -> None:
        if self._llama is None:
            try:
                self._inner.accept(token)
            except LlamaInferenceException as exc:
                self._switch(exc.message).accept(token)
        else:
            self._llama.accept(token)
        self._tokens.append(token)

    def reset(self) -> None:
        self._inner.reset()
        self._tokens.clear()
        if self._llama is not None:
            self._llama.close()
            self._llama = None

    def copy(self) -> _OverBoundsFallback:
        twin = _OverBoundsFallback(self._inner.copy(), self._model, self._text, self._llama_spec)
        twin._tokens = list(self._tokens)
        if self._llama is not None:
            twin._switch("copied")
        return twin


def grammar_limits_for(requested: str, cls: str = "user") -> GrammarLimits | None:
    """The front end's limits for a grammar of class ``cls`` on the engine ``requested`` picks for it:
    all of them on llama.cpp's engine (None: the process default), only size and nesting on
    llguidance's (its own parser limits bound the rest). A grammar ``auto`` sends to llguidance that
    llguidance then cannot convert goes to llama.cpp's engine, whose build checks all the limits."""
    if choose_grammar_engine(requested, cls).engine == "llama":
        return None
    return engine_limits(default_limits())


def grammar_sampler_spec(model: Model, text: str, *, engine: str = "auto", kind: str = "user", root: str = "root",
                         trigger_patterns: tuple[str, ...] = (), trigger_tokens: tuple[int, ...] = ()
                         ) -> s.Grammar | MatcherGrammar:
    """The sampler spec of ``text`` (GBNF) on the engine ``engine`` picks (see the module docstring).
    A grammar llguidance cannot run raises under ``engine="llguidance"`` and goes to llama.cpp's
    engine under ``auto``."""
    lazy = bool(trigger_patterns or trigger_tokens)
    choice = choose_grammar_engine(engine, grammar_class(kind, lazy))
    if choice.engine == "llguidance":
        try:
            compiled = llguidance_tokenizer(model).compile(text, root)
            patterns = compile_trigger_patterns(trigger_patterns)
        except (GrammarUnfitError, TriggerPatternError) as exc:
            if engine == "llguidance":
                raise
            choice = EngineChoice("llama", f"auto: llguidance cannot run this grammar ({exc.message})")
        else:
            log_choice(text, choice)
            del patterns   # checked above; the matcher compiles its own copy

            def llama_spec() -> s.Grammar:
                return s.Grammar(text, root, trigger_patterns=trigger_patterns, trigger_tokens=trigger_tokens)

            def make() -> Any:
                matcher = compiled.matcher(trigger_patterns, trigger_tokens)
                return matcher if engine == "llguidance" else _OverBoundsFallback(matcher, model, text, llama_spec)

            return MatcherGrammar(make, lazy=lazy, label="llguidance", grammar=text, root=root)
    log_choice(text, choice)
    return s.Grammar(text, root, trigger_patterns=trigger_patterns, trigger_tokens=trigger_tokens)
