"""The differential test of the two grammar engines: at every step of a walk, the set of tokens
llguidance allows equals the set llama.cpp's grammar allows, over the whole vocabulary.

    result = compare_grammar(model, GrammarCase(...), steps=32, seed=0)
    result.steps, result.tokens_compared, result.equal_steps, result.differences

Both engines are asked through the same native sampler interface the generation uses
(``native.matcher_grammar.GrammarProbe``: ``llama_sampler_apply`` on every token id), so the proof
covers the callback path, the vocabulary mapping, lazy triggers and end-of-generation tokens as a
generation meets them. A walk is a sequence of tokens both engines allow: first each ``drive``
(a real model output, or a rendered tool call that fires a lazy grammar's trigger) as far as both
allow it -- ending there when the grammar may end -- then a seeded random walk through the tokens
both allow. A walk ends at an end-of-generation token (its step compared: "end of generation
included"), or after ``steps``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import LlamaException, LlamaInferenceException
from ..native import sampler as s
from ..native.matcher_grammar import GrammarProbe
from ..native.model import Model
from .grammar_engines import grammar_sampler_spec, llguidance_tokenizer

__all__ = ["INVALID_UTF8", "CaseResult", "GrammarCase", "StepDifference", "compare_grammar"]


@dataclass(frozen=True)
class GrammarCase:
    name: str
    cls: str                                    # the grammar class (grammar.engines.choice)
    grammar: str
    trigger_patterns: tuple[str, ...] = ()
    trigger_tokens: tuple[int, ...] = ()
    prefill: tuple[int, ...] = ()               # read by the grammar first (a template grammar's prompt)
    drives: tuple[tuple[int, ...], ...] = ()    # token sequences to follow while both engines allow them


SLOW_STEP_S = 10.0   # a step of llama.cpp's grammar slower than this ends the case (a fuzzer's grammar that
                     # makes its parse stacks explode: the next step could take hours)
INVALID_UTF8 = "invalid-utf8"   # deviation 20: llama.cpp admits a continuation byte that makes invalid UTF-8


class _TooSlow(LlamaInferenceException):
    """A walk step on llama.cpp's grammar ran past SLOW_STEP_S: the walk ends (an inference-kind
    failure of the engine under comparison, caught with the others below)."""


@dataclass(frozen=True)
class StepDifference:
    walk: str
    step: int
    only_llama: tuple[int, ...]        # up to 8 token ids llama.cpp allows and llguidance does not
    only_llguidance: tuple[int, ...]
    n_only_llama: int
    n_only_llguidance: int
    kind: str = "other"                # INVALID_UTF8: only that (deviation 20); "other": a real difference


def _open_sequence(text: bytes) -> bool:
    """Whether ``text`` ends inside a UTF-8 sequence (a lead byte and fewer continuation bytes than
    it announces)."""
    for back in range(1, min(4, len(text)) + 1):
        byte = text[-back]
        if byte & 0xC0 == 0x80:
            continue
        need = 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4 if byte >> 3 == 0b11110 else 1
        return need > back
    return False


def _kind(text: bytes, only_llama: np.ndarray, only_llguidance: np.ndarray, pieces: Any) -> str:
    """INVALID_UTF8 when the output so far ends inside a UTF-8 sequence and every token only llama.cpp
    allows goes on with a continuation byte: llama.cpp's grammar decodes bytes without checking
    (a surrogate, an overlong form, a value past U+10FFFF matches a class by its value); llguidance
    admits valid UTF-8 only."""
    if len(only_llguidance) or not _open_sequence(text):
        return "other"
    return INVALID_UTF8 if all(pieces(int(t))[:1] and pieces(int(t))[0] & 0xC0 == 0x80 for t in only_llama) \
        else "other"


@dataclass
class CaseResult:
    name: str
    cls: str
    steps: int = 0
    tokens_compared: int = 0
    equal_steps: int = 0
    utf8_steps: int = 0                 # steps that differ only by INVALID_UTF8 (deviation 20)
    ended: int = 0                      # walks that reached an end-of-generation token
    differences: list[StepDifference] = field(default_factory=list)
    skipped: str | None = None          # why the case was not compared (an engine refuses the grammar)
    seconds: float = 0.0
    lexemes: int = 0                    # llguidance lexemes of the conversion (0: one code point per lexeme)
    fallback: str | None = None         # why the conversion went one code point per lexeme

    @property
    def equal(self) -> bool:
        """Equal at every step but where deviation 20 applies."""
        return self.skipped is None and self.equal_steps + self.utf8_steps == self.steps


def _probes(model: Model, case: GrammarCase) -> tuple[GrammarProbe, GrammarProbe]:
    llama = GrammarProbe(model, s.Grammar(case.grammar, trigger_patterns=case.trigger_patterns,
                                          trigger_tokens=case.trigger_tokens))
    try:
        guidance = GrammarProbe(model, grammar_sampler_spec(
            model, case.grammar, engine="llguidance", kind="user",
            trigger_patterns=case.trigger_patterns, trigger_tokens=case.trigger_tokens))
    except BaseException:
        llama.close()
        raise
    for token in case.prefill:
        if not (llama.allows(token) and guidance.allows(token)):
            llama.close()
            guidance.close()
            raise LlamaException(f"the grammar does not admit its prefill token {token}")
        llama.accept(token)
        guidance.accept(token)
    return llama, guidance


def _walk(model: Model, case: GrammarCase, result: CaseResult, label: str, drive: Sequence[int],
          steps: int, rng: random.Random) -> None:
    llama, guidance = _probes(model, case)
    vocab = model.vocab

    def piece(token: int) -> bytes:
        return bytes(vocab.token_to_piece(token, special=True))

    eog = [t for t in range(vocab.n_tokens) if vocab.is_eog(t)]
    text = b"".join(piece(t) for t in case.prefill)
    try:
        position = 0
        for step in range(steps):
            started = time.perf_counter()
            a = llama.allowed()
            slow = time.perf_counter() - started
            if slow > SLOW_STEP_S:   # llama.cpp's parse stacks grow exponentially on some grammars
                raise _TooSlow(f"llama.cpp's grammar took {slow:.0f} s for one step (its parse stacks explode on "
                               "this grammar): the walk stops here")
            b = guidance.allowed()
            result.steps += 1
            result.tokens_compared += len(a)
            if np.array_equal(a, b):
                result.equal_steps += 1
            else:
                only_a = np.nonzero(a & ~b)[0]
                only_b = np.nonzero(b & ~a)[0]
                kind = _kind(text, only_a, only_b, piece)
                if kind == INVALID_UTF8:
                    result.utf8_steps += 1
                result.differences.append(StepDifference(label, step, tuple(int(t) for t in only_a[:8]),
                                                         tuple(int(t) for t in only_b[:8]), len(only_a), len(only_b),
                                                         kind))
            both = a & b
            if position < len(drive) and both[drive[position]]:
                token = int(drive[position])
                position += 1
            else:
                ends = [t for t in eog if both[t]]
                if drive and position == len(drive) and ends:
                    token = ends[0]   # the whole drive was read and the output may end: end it
                else:
                    position = len(drive)   # left the drive: a random walk from here
                    choices = np.nonzero(both)[0]
                    if len(choices) == 0:
                        return
                    token = int(choices[rng.randrange(len(choices))])
            if vocab.is_eog(token):
                result.ended += 1
                return
            llama.accept(token)
            guidance.accept(token)
            text += piece(token)
    finally:
        llama.close()
        guidance.close()


def compare_grammar(source: Any, case: GrammarCase, *, steps: int = 32, random_walks: int = 1,
                    seed: int = 0) -> CaseResult:
    """Walk ``case`` on both engines (its drives, then ``random_walks`` seeded random walks) and count.
    ``source``: a LlamaEngine or a Model."""
    model = source if isinstance(source, Model) else source.model
    result = CaseResult(case.name, case.cls)
    start = time.perf_counter()
    rng = random.Random(f"{seed}:{case.name}")
    walks: list[tuple[str, Sequence[int]]] = [(f"drive{i}", d) for i, d in enumerate(case.drives)]
    walks += [(f"random{i}", ()) for i in range(random_walks)]
    try:
        for label, drive in walks:
            _walk(model, case, result, label, drive, steps, rng)
        conversion = llguidance_tokenizer(model).compile(case.grammar).conversion   # a cache hit
        result.lexemes, result.fallback = conversion.lexemes, conversion.fallback
    except LlamaException as exc:
        if result.steps == 0:
            result.skipped = exc.message
        else:
            result.skipped = f"after {result.steps} steps: {exc.message}"
    result.seconds = time.perf_counter() - start
    return result
