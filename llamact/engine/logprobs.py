"""Per-token log-probabilities (OpenAI's ``logprobs`` / ``top_logprobs``), as llama-server gives them.

llama-server (``n_probs`` without ``post_sampling_probs``, which is what its OpenAI endpoints use)
takes the softmax of the model's raw logits over the whole vocabulary: the distribution *before*
the sampler chain (no temperature, top-k, penalties or grammar), see ``get_token_probabilities``
in tools/server/server-common.cpp. The sampled token's logprob is its log-probability in that
distribution; the alternatives are the ``n`` most likely tokens, most likely first.

The computation is numpy over the logits row (one exp and one running sum over the vocabulary, and
an ``argpartition`` for the top ``n``), never a Python loop over the vocabulary. It follows
upstream's arithmetic: float32 ``exp(logit - max)``, summed one after the other in float32 (a
running sum, ``cumsum``, not numpy's more exact pairwise sum), each probability divided in float32,
then its log (a zero probability gives float32's lowest value, as llama-server avoids -inf in
JSON). That float32 sum loses the smallest terms (about 1.5e-4 in log on SmolLM2's 49152 tokens
against an exact float64 sum), and how much depends on the order of the terms, which upstream's
partial_sort permutes: the two normalizers still differ by up to ~5e-5 (SmolLM2) and ~4e-4 (Gemma
3, 262144 tokens), the same offset for every entry of a token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import LlamaArgumentException
from ..native.model import Vocab

MAX_TOP_LOGPROBS = 20  # OpenAI's limit; llama-server's default when top_logprobs is not given


@dataclass(frozen=True)
class TopLogprob:
    """One alternative: the token's id, its text (UTF-8 safe prefix), raw bytes and logprob."""

    id: int
    token: str
    bytes: tuple[int, ...]
    logprob: float

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "token": self.token, "bytes": list(self.bytes), "logprob": self.logprob}


@dataclass(frozen=True)
class TokenLogprob:
    """A generated token with its logprob and the ``top_logprobs`` alternatives."""

    id: int
    token: str
    bytes: tuple[int, ...]
    logprob: float
    top_logprobs: tuple[TopLogprob, ...] = ()

    def to_openai(self) -> dict[str, Any]:
        """One entry of ``choices[0].logprobs.content`` (llama-server adds ``id``)."""
        return {
            "id": self.id, "token": self.token, "bytes": list(self.bytes), "logprob": self.logprob,
            "top_logprobs": [top.to_openai() for top in self.top_logprobs],
        }


def check_top_logprobs(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_TOP_LOGPROBS:
        raise LlamaArgumentException(
            f"top_logprobs must be an integer from 0 to {MAX_TOP_LOGPROBS}, got {n!r}", {"top_logprobs": repr(n)}
        )
    return n


def _utf8_prefix(raw: bytes) -> str:
    """The text of ``raw`` without an incomplete UTF-8 sequence at its end (llama-server's
    ``validate_utf8``: a token may hold the first bytes of a character)."""
    for cut in range(min(4, len(raw)), 0, -1):
        lead = raw[-cut]
        need = 2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else 4 if lead >> 3 == 0b11110 else 0
        if need:
            if need > cut:
                raw = raw[:-cut]
            break
    return raw.decode("utf-8", errors="replace")


class LogprobReader:
    """Computes ``TokenLogprob`` values from logits rows for one vocabulary; token texts are cached."""

    def __init__(self, vocab: Vocab, top_n: int) -> None:
        self._vocab = vocab
        self._top_n = check_top_logprobs(top_n)
        self._pieces: dict[int, bytes] = {}

    def _piece(self, token: int) -> bytes:
        piece = self._pieces.get(token)
        if piece is None:
            piece = self._pieces[token] = self._vocab.token_to_piece(token, special=False)
        return piece

    def read(self, logits: np.ndarray, token: int) -> TokenLogprob:
        """``token``'s entry from ``logits`` (the row it was sampled from, before the sampler chain)."""
        top = self._top_n
        peak = logits.max()
        weights = np.exp(logits - peak)
        total = np.cumsum(weights, dtype=np.float32)[-1]
        ids = np.argpartition(logits, -top)[-top:] if top else np.empty(0, dtype=np.intp)
        # most likely first; equal logits by token id (llama-server's partial_sort leaves ties unordered)
        ids = ids[np.lexsort((ids, -logits[ids]))]
        chosen = np.append(ids, token)
        probs = weights[chosen] / total
        with np.errstate(divide="ignore"):
            logs = np.where(probs > 0, np.log(probs.astype(np.float64)), _LOWEST).tolist()
        alternatives = tuple(
            TopLogprob(i, _utf8_prefix(p := self._piece(i)), tuple(p), v)
            for i, v in zip(ids.tolist(), logs[:-1], strict=True)
        )
        piece = self._piece(token)
        return TokenLogprob(token, _utf8_prefix(piece), tuple(piece), logs[-1], alternatives)


_LOWEST = float(np.finfo(np.float32).min)


__all__ = ["MAX_TOP_LOGPROBS", "LogprobReader", "TokenLogprob", "TopLogprob", "check_top_logprobs"]
