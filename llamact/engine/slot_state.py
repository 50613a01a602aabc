"""llama-server's slot files: a sequence state file (``llama_state_seq_save_file``) whose token
list is ``server_tokens::serialize``'s packing, so that a slot saved by llama-server restores here
and one saved here restores there.

    words = pack_tokens(tokens)           # [LLAMA_TOKEN_NULL, version 1, n, *tokens, 0 media chunks]
    tokens = unpack_tokens(words)         # also a plain token list (older llama-server files)

What is refused (ValueError, llama-server's reasons): another version, media chunks (no mmproj
here), trailing words, a count that does not fit.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import LlamaStateException, LlamaUnsupportedException

__all__ = ["checked_slot_tokens", "pack_tokens", "refuse_media", "unpack_tokens"]

TOKEN_NULL = -1
VERSION = 1


def pack_tokens(tokens: Sequence[int]) -> list[int]:
    refuse_media(tokens)
    return [TOKEN_NULL, VERSION, len(tokens), *tokens, 0]


def refuse_media(tokens: Sequence[int]) -> None:
    """A cache holding images or audio (their keys are negative: ``engine.media``) is not written to a
    file: llama-server packs each medium's chunk there, which llamact does not (yet)."""
    if any(t < 0 for t in tokens):
        raise LlamaUnsupportedException(
            "the KV cache holds images or audio, which llamact cannot save to a file yet; clear it first "
            "(or save before a request with media)")


def unpack_tokens(words: Sequence[int]) -> list[int]:
    if not words or words[0] != TOKEN_NULL:
        return list(words)   # a plain token list, as older versions wrote
    if len(words) < 3 or words[1] != VERSION:
        raise ValueError("Unsupported server tokens state version")
    n = words[2]
    if n < 0 or len(words) < 3 + n + 1:
        raise ValueError("the server tokens state is truncated")
    if words[3 + n] != 0:
        raise ValueError("Cannot restore media tokens without an mmproj")
    if len(words) > 3 + n + 1:
        raise ValueError("Trailing data in server tokens state")
    return list(words[3:3 + n])


def checked_slot_tokens(words: Sequence[int], n_vocab: int, n_ctx: int) -> list[int]:
    """The tokens of a loaded slot file's word list; LlamaStateException for what llama-server
    refuses (a bad packing, more tokens than the slot holds, ids outside the vocabulary)."""
    try:
        tokens = unpack_tokens(words)
    except ValueError as exc:
        raise LlamaStateException(str(exc)) from None
    if len(tokens) > n_ctx:
        raise LlamaStateException("Restored prompt does not fit in the slot context")
    if any(not 0 <= t < n_vocab for t in tokens):
        raise LlamaStateException("Invalid tokens in slot save file")
    return tokens
