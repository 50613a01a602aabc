"""The llguidance engine: GBNF -> Lark -> an llguidance matcher over the model's own vocabulary.

    tokenizer = LlguidanceTokenizer(TokenVocabulary(pieces, eog, tokenize))   once per model (~1 s)
    grammar = tokenizer.compile(gbnf, root="root")     cached by text (bounded); raises for an unfit grammar
    matcher = grammar.matcher()                        one per generation: a TokenMatcher

Why these choices (each keeps llguidance's verdicts equal to llama.cpp's grammar, which the
differential test in tests/engine/test_grammar_engines_equality.py and scripts/grammar_engine_equality.py
measures):

* The vocabulary is llama.cpp's: each token's piece with special tokens as their text (what
  llama.cpp's grammar matches against, ``token_to_piece(special=True)``). End-of-generation tokens,
  and tokens llama.cpp's grammar never allows (an empty piece, or one starting with NUL), are marked
  special (a leading 0xFF byte, llguidance's convention), so that no text matches them; the
  end-of-generation tokens are llguidance's end tokens, allowed exactly when the grammar may end.
* The grammar is llamact's GBNF, parsed and checked by llamact's front end (syntax, size and nesting;
  the alternatives and elements limits guard llama.cpp's engine only: llguidance's own
  ``LLParserLimits`` bound its work), converted to Lark with whole lexemes only where llguidance's
  greedy lexer cannot cut the text otherwise than llama.cpp reads it (``to_lark`` / ``lexeme_plan``;
  one code point per lexeme elsewhere, and for a grammar over the planner's work bounds).
* ``no_forcing``: by default llguidance admits only the canonical tokenization of text the grammar
  forces; llama.cpp admits every token that spells a prefix of it. Off, the two agree.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ErrorKind, LlamaInferenceException, LlamaRequestException
from ..gbnf import GbnfError
from ..limits import GrammarLimits, check_grammar_limits, default_limits
from .lazy import LazyMatcher, compile_trigger_patterns
from .lexeme_plan import nesting_depth
from .to_lark import CharLarkError, LarkConversion, gbnf_to_lark

__all__ = ["CompiledGrammar", "GbnfError", "GrammarUnfitError", "LlguidanceMatcher", "LlguidanceTokenizer",
           "TokenVocabulary", "engine_limits", "llguidance_unavailable", "parser_limits"]

_llg: Any = None
_UNAVAILABLE: str | None = None
_LOAD_LOCK = threading.Lock()
_loaded = False


def _load() -> None:
    """Import llguidance on first use (~0.2 s; most processes never need it). A declared dependency;
    a machine where its wheel cannot load keeps llama.cpp's engine."""
    global _llg, _UNAVAILABLE, _loaded
    with _LOAD_LOCK:
        if _loaded:
            return
        try:
            import llguidance
        except Exception as exc:  # noqa: BLE001 - any failure to load the wheel means the same: not here
            _UNAVAILABLE = f"{type(exc).__name__}: {exc}"
        else:
            _llg = llguidance
        _loaded = True

GRAMMAR_OPTIONS = '{"no_forcing": true}'
SPECIAL = b"\xff"    # llguidance's mark of a special token: no text matches it
CACHE_SIZE = 32      # compiled grammars kept per tokenizer (a server's tool sets, schemas)


def llguidance_unavailable() -> str | None:
    """Why llguidance cannot run here (None: it can)."""
    _load()
    return _UNAVAILABLE


class GrammarUnfitError(LlamaInferenceException, LlamaRequestException):
    """A grammar this engine cannot run as llama.cpp would (its converter or compiler refuses it):
    the request's grammar, so a server answers 400 (under ``auto`` the grammar goes to llama.cpp's
    engine instead)."""

    kind = ErrorKind.REQUEST


MAX_NESTING = 1500          # rules and groups nested along any path (lexeme_plan.nesting_depth): llguidance's
                            # grammar compiler recurses that deep and overflows its stack (the process
                            # dies) from ~2,000-3,000 (measured: a chain of 2,000 rules compiles, 3,000 do
                            # not; a ~100 KB schema of 350 optional objects nests 1,079)
MAX_ITEMS_IN_ROW = 10_000    # Earley items at one position: an enum split to characters opens one per value
                             # (llguidance's default 2,000)
INITIAL_LEXER_FUEL = 50_000_000   # building a grammar's lexemes (~50k/ms: <= ~1 s): a 1 MB enum is one lexeme
                                  # of 100,000 values (llguidance's default, 1M, refuses it)
STEP_MAX_ITEMS = 1_000_000   # Earley items for one token's mask (~20k/ms): one code point per lexeme needs more
                             # than llguidance's 50k default on free-text rules (a template's "until" rules)


def parser_limits() -> Any:
    """llguidance's bounds on one grammar: its defaults (200k lexer fuel a token, 500k grammar symbols,
    250k lexer states) but ``MAX_ITEMS_IN_ROW`` and ``STEP_MAX_ITEMS`` (the parts kept one code point
    per lexeme -- free text, split lexemes -- make more Earley items) and ``INITIAL_LEXER_FUEL``;
    short errors."""
    assert _llg is not None
    return _llg.LLParserLimits(max_items_in_row=MAX_ITEMS_IN_ROW, step_max_items=STEP_MAX_ITEMS,
                               initial_lexer_fuel=INITIAL_LEXER_FUEL, verbose_errors=False)


def engine_limits(limits: GrammarLimits) -> GrammarLimits:
    """The front end's limits that still apply under llguidance: the text's size and its nesting of
    parentheses (our parser recurses per group); alternatives, elements and chains of rules are
    llama.cpp's costs (the converter walks rules iteratively; ``MAX_NESTING`` bounds llguidance's
    own recursion, checked when the grammar is compiled)."""
    return GrammarLimits(max_bytes=limits.max_bytes, max_depth=limits.max_depth, max_alternatives=None,
                         max_elements=None, max_rule_chain=None)


@dataclass(frozen=True)
class TokenVocabulary:
    """A model's vocabulary as the engine needs it: ``pieces[i]`` token i's text as llama.cpp's grammar
    reads it (special tokens as text), the end-of-generation tokens, and the model's tokenizer
    (bytes -> token ids, no special tokens added or parsed)."""

    pieces: Sequence[bytes]
    eog: Sequence[int]
    tokenize: Callable[[bytes], list[int]]
    bos: int | None = None


class _Wrapper:
    """What ``llguidance.TokenizerWrapper`` reads from a tokenizer."""

    def __init__(self, vocabulary: TokenVocabulary, tokens: list[bytes]) -> None:
        self.eos_token_id = vocabulary.eog[0]
        self.bos_token_id = vocabulary.bos
        self.tokens = tokens
        self.special_token_ids = list(vocabulary.eog)
        self._tokenize = vocabulary.tokenize

    def __call__(self, data: bytes) -> list[int]:
        return self._tokenize(data)


class LlguidanceTokenizer:
    """llguidance's tokenizer for one model, with its compiled grammars cached by text."""

    def __init__(self, vocabulary: TokenVocabulary) -> None:
        _load()
        if _llg is None:
            raise LlamaInferenceException(f"llguidance cannot be loaded here ({_UNAVAILABLE})")
        if not vocabulary.eog:
            raise GrammarUnfitError("the model has no end-of-generation token: llguidance needs one")
        eog = set(vocabulary.eog)
        tokens = []
        for token, piece in enumerate(vocabulary.pieces):
            if token in eog:
                piece = SPECIAL + (piece or b"<eog>")
            elif not piece or piece[0] == 0 or piece[0] == SPECIAL[0]:
                # llama.cpp's grammar refuses an empty piece or one starting with NUL; a piece that
                # starts with 0xFF would read as special here: numbered special names keep all three
                # out of any text (the 0xFF byte token is invalid UTF-8, which no GBNF text produces)
                piece = SPECIAL + b"<[llamact:%d]>" % token
            tokens.append(piece)
        self.pieces = vocabulary.pieces
        self.n_vocab = len(tokens)
        self.eog = frozenset(eog)
        wrapper = _llg.TokenizerWrapper(_Wrapper(vocabulary, tokens))
        self.native = _llg.LLTokenizer(wrapper, eos_token=list(vocabulary.eog))
        self._cache: collections.OrderedDict[tuple[str, str], CompiledGrammar] = collections.OrderedDict()
        self._lock = threading.Lock()

    def piece(self, token: int) -> bytes:
        return self.pieces[token]

    def compile(self, text: str, root: str = "root", limits: GrammarLimits | None = None) -> CompiledGrammar:
        """``text`` (GBNF) compiled for this vocabulary; the same text again is a cache hit. Raises
        GbnfError (bad syntax, over a front-end limit) or GrammarUnfitError (the converter or
        llguidance refuses it)."""
        key = (text, root)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        compiled = self._compile(text, root, limits or default_limits())
        with self._lock:
            self._cache[key] = compiled
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return compiled

    def _compile(self, text: str, root: str, limits: GrammarLimits) -> CompiledGrammar:
        assert _llg is not None
        parsed = check_grammar_limits(text, engine_limits(limits), root=root)   # GbnfError: the caller's 400
        depth = nesting_depth(parsed)
        if depth > MAX_NESTING:
            raise GrammarUnfitError(f"the grammar nests rules {depth} deep, above the {MAX_NESTING} llguidance's "
                                    "compiler can recurse through", {"nesting": depth, "maximum": MAX_NESTING})
        try:
            conversion = gbnf_to_lark(parsed, root, GRAMMAR_OPTIONS)
        except CharLarkError as exc:
            raise GrammarUnfitError(exc.message) from None
        matcher = _llg.LLMatcher(self.native, conversion.text, log_level=0, limits=parser_limits())
        if matcher.is_error():
            raise GrammarUnfitError(f"llguidance refuses the grammar: {matcher.get_error()}",
                                    {"native_error": matcher.get_error()})
        return CompiledGrammar(self, conversion, matcher)


class CompiledGrammar:
    """One grammar compiled for one vocabulary; ``matcher()`` starts a generation on it."""

    def __init__(self, tokenizer: LlguidanceTokenizer, conversion: LarkConversion, pristine: Any) -> None:
        self.tokenizer = tokenizer
        self.conversion = conversion
        self.lark = conversion.text
        self._pristine = pristine

    def matcher(self, trigger_patterns: Sequence[str] = (), trigger_tokens: Sequence[int] = ()) -> Any:
        """A matcher at the grammar's start; with triggers, behind a ``LazyMatcher``."""
        inner = LlguidanceMatcher(self._pristine.deep_copy(), self.tokenizer)
        if not trigger_patterns and not trigger_tokens:
            return inner
        return LazyMatcher(inner, self.tokenizer.n_vocab, self.tokenizer.piece,
                           compile_trigger_patterns(trigger_patterns), frozenset(trigger_tokens))


class LlguidanceMatcher:
    """A TokenMatcher over one llguidance matcher (see ``native.matcher_grammar``)."""

    def __init__(self, matcher: Any, tokenizer: LlguidanceTokenizer) -> None:
        self._m = matcher
        self._tokenizer = tokenizer
        self._n = tokenizer.n_vocab
        self._eog = tokenizer.eog
        self._asked = (-1, False)   # the last token asked about and the answer: the guide asks twice

    def _check(self) -> None:
        if self._m.is_error():
            raise LlamaInferenceException(f"llguidance: {self._m.get_error()}")

    def allows(self, token: int) -> bool:
        # an end token: whether the grammar may end. Not validate_tokens: once the grammar has matched
        # all it can (llguidance "stops" itself), validate_tokens refuses every token, the end tokens
        # included, while the mask allows exactly those -- the mismatch that ended a 2,000-value enum
        # with "the sampled token is not admitted by the grammar"
        if token == self._asked[0]:
            return self._asked[1]
        if token in self._eog:
            self._check()   # a matcher in error may say "accepting": never end an output on that
            answer = bool(self._m.is_accepting())
        else:
            answer = self._m.validate_tokens([token]) == 1
            if not answer:
                self._check()   # over a bound, not a refusal: an error, never a silently other token
        self._asked = (token, answer)
        return answer

    def allowed(self) -> np.ndarray:
        self._check()
        bits = np.frombuffer(self._m.compute_bitmask(), dtype=np.uint8)
        # a mask over a limit (llguidance's Earley items a step) comes back as "only the end" with the
        # matcher in error: an error here, never a silently shorter output
        self._check()
        return np.unpackbits(bits, bitorder="little")[: self._n].view(bool)

    def accept(self, token: int) -> None:
        self._asked = (-1, False)
        if not self._m.consume_token(token):
            raise LlamaInferenceException(f"llguidance refused token {token}: {self._m.get_error()}")

    def accept_bytes(self, data: bytes) -> None:
        """Read ``data`` (a lazy grammar's trigger text) as whatever tokens spell it."""
        self._asked = (-1, False)
        tokens = self._tokenizer.native.tokenize_bytes(data)
        if not self._m.consume_tokens(tokens):
            raise LlamaInferenceException(f"llguidance refused the trigger text {data[:80]!r}: {self._m.get_error()}")

    def reset(self) -> None:
        self._asked = (-1, False)
        self._m.reset()

    def copy(self) -> LlguidanceMatcher:
        return LlguidanceMatcher(self._m.deep_copy(), self._tokenizer)

