"""Replies given word for word: what llamact does with an output a tiny model does not write (a
malformed tool call, a parse failure), through the real engine and server.

The prompt is the real one (rendered, tokenized and evaluated by nobody: only sampling is
replaced); a request whose last user message starts with ``SCRIPT`` gets the rest of that message
as the model's output -- its tokens in the model's own vocabulary, one piece per token -- then the
end-of-generation token. Every other request runs the model.

    with scripted():                                   # in this process: LlamaEngine.create() obeys scripts
        engine.complete_chat([{"role": "user", "content": SCRIPT + "```json\\n{...}\\n```"}], tools=...)
    python tests/scripted_serve.py serve ARGS          # `llamact serve` that obeys scripts (server_live)
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from llamact.engine import LlamaEngine
from llamact.engine.decode import GenerationChunk, StopReason, Timings

SCRIPT = "[scripted reply]\n"


class ScriptedGeneration:
    """A generation of ``text``: what ``LlamaEngine.generate`` returns, without a model call."""

    def __init__(self, engine: LlamaEngine, text: str, n_prompt: int, sampling: Any) -> None:
        self._tokens = engine.tokenize(text, add_special=False, parse_special=False)
        self._pieces = [engine.token_piece(t) for t in self._tokens]
        self._n_prompt = n_prompt
        self._sampling = sampling
        self.n_cached = 0

    def __iter__(self) -> Iterator[GenerationChunk]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        for token, piece in zip(self._tokens, self._pieces, strict=True):
            yield GenerationChunk(decoder.decode(piece), token)
        timings = Timings(n_prompt=self._n_prompt, n_generated=len(self._tokens), prompt_ms=1.0, decode_ms=1.0)
        yield GenerationChunk(decoder.decode(b"", final=True), None, StopReason.EOG, timings)
        self.close()

    def close(self) -> None:
        if self._sampling is not None:
            self._sampling.close()
            self._sampling = None


def _script_of(request: Any) -> str | None:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.content[len(SCRIPT):] if message.content.startswith(SCRIPT) else None
    return None


def install() -> Any:
    """Make every ``LlamaEngine`` obey scripts; returns what undoes it."""
    prepare, generate = LlamaEngine.prepare_chat, LlamaEngine.generate

    def prepare_chat(self: LlamaEngine, request: Any, params: Any = None) -> Any:
        self._llamact_test_script = _script_of(request)   # type: ignore[attr-defined]
        return prepare(self, request, params)

    def scripted_generate(self: LlamaEngine, prompt: Any, params: Any = None, *, sampling: Any = None,
                          media: Any = None) -> Any:
        script = getattr(self, "_llamact_test_script", None)
        self._llamact_test_script = None   # type: ignore[attr-defined]
        if script is None:
            return generate(self, prompt, params, sampling=sampling, media=media)
        if media is not None:
            media.close()
        return ScriptedGeneration(self, script, len(prompt), sampling)

    LlamaEngine.prepare_chat = prepare_chat   # type: ignore[method-assign]
    LlamaEngine.generate = scripted_generate  # type: ignore[method-assign]

    def undo() -> None:
        LlamaEngine.prepare_chat = prepare    # type: ignore[method-assign]
        LlamaEngine.generate = generate       # type: ignore[method-assign]

    return undo


@contextmanager
def scripted() -> Iterator[None]:
    undo = install()
    try:
        yield
    finally:
        undo()
