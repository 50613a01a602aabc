"""Tokenizing under a token limit without tokenizing all of a huge text first.

llama.cpp's tokenizer holds about 55 bytes of working memory per byte of a text of short words
(measured: 1.1 GiB for 20 MB of ``"a "``), so a request that only has to be refused for holding too
many tokens must not pay that. Each token covers at least one byte of the text (the added BOS / EOS
and SentencePiece's leading space cover none: ``_UNCOVERED`` of them at most), so a text of up to
``limit - _UNCOVERED`` bytes is tokenized whole as before. A longer one is counted on prefixes of
growing length first (each cut at a character boundary, before a space where there is one, so that
the prefix ends where a word ends): a prefix whose count passes the limit by more than ``MARGIN`` --
room for its last words splitting otherwise than in the whole text -- refuses the text, at a memory
cost bounded by the limit's worth of text rather than the text's. A text that no prefix refuses is
tokenized whole, so an answer is always the whole text's exact tokens.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import LlamaTokenLimitException

__all__ = ["MARGIN", "tokenize_within"]

MARGIN = 1024      # tokens a prefix may count beyond the whole text's (its cut-off last words)
_UNCOVERED = 4     # tokens that cover no byte: BOS, EOS, a SentencePiece leading space, one spare


def _refusal(at_least: int, limit: int, counted_bytes: int, exact: bool) -> LlamaTokenLimitException:
    counted = (f"{at_least} tokens" if exact
               else f"at least {at_least} tokens (counted on its first {counted_bytes} bytes)")
    return LlamaTokenLimitException(f"the text holds {counted}, more than the limit of {limit}",
                                    {"at_least": at_least, "limit": limit, "exact": exact})


def _cut(raw: bytes, at: int) -> int:
    """A cut at or before ``at``: on a UTF-8 character boundary, before a space where one is near."""
    at = min(at, len(raw))
    while 0 < at < len(raw) and (raw[at] & 0xC0) == 0x80:   # a continuation byte starts no character
        at -= 1
    space = raw.rfind(b" ", max(0, at - 256), at)
    return space if space > 0 else at


def tokenize_within(tokenize: Callable[[bytes], list[int]], raw: bytes, limit: int) -> list[int]:
    """``tokenize(raw)``, or :class:`~llamact.errors.LlamaTokenLimitException` when it would hold more
    than ``limit`` tokens."""
    if len(raw) + _UNCOVERED > limit:
        size = 4 * (limit + MARGIN)
        while size < len(raw) // 2:   # past half the text a prefix saves too little: count the whole
            cut = _cut(raw, size)
            counted = len(tokenize(raw[:cut]))
            if counted - MARGIN > limit:
                raise _refusal(counted - MARGIN, limit, cut, exact=False)
            size *= 2
    tokens = tokenize(raw)
    if len(tokens) > limit:
        raise _refusal(len(tokens), limit, len(raw), exact=True)
    return tokens
