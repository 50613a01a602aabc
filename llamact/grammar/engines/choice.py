"""Which engine runs a grammar: ``"llama"`` (llama.cpp's), ``"llguidance"``, or ``"auto"``.

``auto`` takes llguidance only for a grammar class whose masks were proven equal to llama.cpp's
over the corpus (``PROVEN_CLASSES``; the proof is scripts/grammar_engine_equality.py, its numbers in
docs/design.md), and only when the grammar converts; llama.cpp's engine otherwise. The reason is
logged once per grammar (logger ``llamact.grammar``).

Classes, by where a grammar comes from and how it starts (what the corpus enumerates):

* ``template-lazy``: a chat template's grammar that waits for a trigger (tools, ``tool_choice`` auto);
* ``template``: a chat template's grammar from the first token (``tool_choice`` required or named,
  ``response_format``), fed the generation prompt first;
* ``user``: a grammar the caller wrote or had converted (``GenerationParams.grammar``, the server's
  ``grammar`` / ``json_schema`` fields, compat ``LlamaGrammar``).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass

from ...errors import LlamaArgumentException

__all__ = ["ENGINE_NAMES", "GRAMMAR_CLASSES", "PROVEN_CLASSES", "EngineChoice", "check_engine_name",
           "grammar_class", "log_choice"]

ENGINE_NAMES = ("auto", "llguidance", "llama")
GRAMMAR_CLASSES = ("template-lazy", "template", "user")

# Classes whose allowed-token sets were equal to llama.cpp's at every step of the differential
# proof (scripts/grammar_engine_equality.py; issue 42's closing note). A class is added here only
# from that script's numbers and once the suites that run it under auto passed on llguidance. SmolLM2,
# 24 steps a walk, with the whole-lexeme converter: template-lazy 60 grammars, 2,498 steps, 122.8M
# tokens compared, all equal; "template" (required / named calls; response_format, whose grammar is
# the schema converter's, equal over the schema corpus but deviation 20) 126 grammars, 5,364 steps,
# 263.7M tokens, all equal; server_e2e, wire parity and speculative parity passed with every class
# on llguidance (LLAMACT_TEST_GRAMMAR_ENGINE=llguidance). "user" (a caller's GBNF or schema) stays on
# llama.cpp's engine under auto: it is equal but deviation 20 where it was run, and a caller who wrote
# a grammar for llama.cpp's limits keeps them; grammar_engine="llguidance" takes it.
PROVEN_CLASSES: frozenset[str] = frozenset({"template-lazy", "template"})

log = logging.getLogger("llamact.grammar")


def check_engine_name(name: object) -> str:
    if name not in ENGINE_NAMES:
        raise LlamaArgumentException(f"grammar_engine must be one of {', '.join(ENGINE_NAMES)}, got {name!r}",
                                      {"grammar_engine": repr(name)})
    return str(name)


def grammar_class(kind: str, lazy: bool) -> str:
    """The class of a grammar from a template (``kind`` "template") or a caller ("user")."""
    if kind == "template":
        return "template-lazy" if lazy else "template"
    return "user"


@dataclass(frozen=True)
class EngineChoice:
    engine: str    # "llguidance" or "llama"
    reason: str


_SEEN: dict[str, None] = {}
_SEEN_MAX = 1024
_SEEN_LOCK = threading.Lock()


def log_choice(text: str, choice: EngineChoice) -> None:
    """Log the engine and its reason the first time a grammar (by its text) is seen (bounded memory)."""
    key = hashlib.blake2b(f"{choice.engine}\0{text}".encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    with _SEEN_LOCK:
        if key in _SEEN:
            return
        _SEEN[key] = None
        if len(_SEEN) > _SEEN_MAX:
            del _SEEN[next(iter(_SEEN))]
    log.info("grammar engine %s (%d bytes of GBNF): %s", choice.engine, len(text), choice.reason)
