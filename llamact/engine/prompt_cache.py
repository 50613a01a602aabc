"""The prompt cache: which tokens the context's KV cache holds, and how much of a new prompt it saves.

llama-server's ``cache_prompt``. The engine keeps one ``PromptCache`` per context: the tokens at
positions 0, 1, ... of sequence 0, as they were evaluated (prompt, then generated tokens). A new
generation keeps the longest common prefix of that record and its prompt in the KV cache, drops the
rest (``Context.keep_prefix``) and evaluates only the remainder. What enters: the context and each
new prompt; what leaves: how many prompt tokens were reused (``cached_tokens`` / ``cache_n``).

Invariants the tests hold it to:

- the record equals the tokens in the KV cache after every generation, however it ended
  (finished, cancelled, closed early, failed in a decode): the end of each generation truncates
  the record to the positions the memory reports;
- at least one prompt token is always evaluated, so that there are logits to sample from (as in
  llama-server, a fully cached prompt re-evaluates its last token);
- a memory that cannot drop a suffix (recurrent or hybrid models, a sliding window that forgot
  what the next token needs) is cleared and the whole prompt evaluated;
- greedy output is the same with and without the cache.

The record cannot see a memory changed behind the engine's back with the same number of positions
(``engine.context.load_state``...); a change in length (``memory_clear``) is detected and the
cache starts afresh.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ..errors import LlamaStateException
from ..native.context import Context
from .generator import GenerationChunk
from .media import MediaPrompt

__all__ = ["PromptCache", "common_prefix"]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """The length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PromptCache:
    """The tokens in one context's KV cache (sequence 0), and their reuse by the next prompt."""

    def __init__(self, context: Context) -> None:
        self._context = context
        self._tokens: list[int] = []
        # the media of the record (the last prompt's): where they are, and the positions they shift
        self._media: MediaPrompt | None = None

    @property
    def tokens(self) -> tuple[int, ...]:
        """The tokens the KV cache holds, position by position (between generations)."""
        return tuple(self._tokens)

    def reuse(self, prompt: Sequence[int], enabled: bool = True, media: MediaPrompt | None = None) -> int:
        """Prepare the context for ``prompt``: keep the cached prefix, drop the rest. Returns the
        number of prompt tokens already in the KV cache (0 when ``enabled`` is False: the memory
        is cleared, as llama-server does without ``cache_prompt``); at most ``len(prompt) - 1``.
        ``media``: the prompt's media (its keys are ``prompt``): a kept prefix never ends inside a
        medium, and a medium is the same when its bytes are (its key says so)."""
        if not prompt:  # nothing to prepare: the generation refuses an empty prompt
            return 0
        n_keep = common_prefix(self._tokens, prompt) if enabled else 0
        n_keep = min(n_keep, len(prompt) - 1)
        if media is not None:
            n_keep = media.cut(n_keep)
        if not self._context.keep_prefix(media.position(n_keep) if media is not None else n_keep):
            n_keep = 0
        del self._tokens[n_keep:]
        self._media = media
        return n_keep

    def track(self, chunks: Iterator[GenerationChunk], evaluated: Sequence[int]) -> Iterator[GenerationChunk]:
        """Pass ``chunks`` through, recording ``evaluated`` (the uncached prompt suffix) and each
        generated token; at the end, however it comes, keep only what the memory holds."""
        tokens = self._tokens
        tokens.extend(evaluated)
        try:
            for chunk in chunks:
                if chunk.token is not None:
                    tokens.append(chunk.token)
                yield chunk
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:  # a stream closed early closes the token loop too
                close()
            self.sync()

    def sync(self) -> None:
        """Cut the record to the positions the KV cache holds. Generation ends with its last
        sampled token not evaluated, a cancelled or failed decode leaves its batch out: llama.cpp
        removes a failed batch from the memory, so the memory holds a prefix of the record."""
        try:
            n_held = self._context.memory_seq_pos_max(0) + 1
        except LlamaStateException:  # the engine was closed under the generation
            self._tokens.clear()
            return
        if self._media is not None:   # a position; the record counts keys (M-RoPE media differ)
            n_held = self._media.index_of(n_held)
        if n_held > len(self._tokens):  # not ours: start afresh rather than trust it
            self.clear()
        else:
            del self._tokens[n_held:]

    def restore(self, tokens: Sequence[int]) -> None:
        """The KV cache was just loaded from a file holding ``tokens`` at positions 0..: record them
        (cut to what the memory holds, as after a generation)."""
        self._tokens[:] = tokens
        self._media = None
        self.sync()

    def clear(self) -> None:
        """Empty the KV cache and the record."""
        self._tokens.clear()
        self._media = None
        self._context.memory_clear()
