"""Embeddings: texts in, one float32 vector per text (or one per token) out.

An ``Embedder`` owns a context of its own created with embeddings on, beside the engine's
generation context, so a generation engine embeds without reloading its model. Several texts go
through one ``llama_decode``, each as its own sequence id; the context's pooling (the model's, or
an override) reduces each sequence to a vector, which is L2-normalized as llama-server's
``/v1/embeddings`` does (``common_embd_normalize`` with norm 2), or left as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import LlamaArgumentException, LlamaContextException
from ..native import llama_h
from ..native.batch import Batch
from ..native.context import Context, ContextOptions
from ..native.model import Model

POOLING = {
    "none": llama_h.LlamaPoolingType.NONE,
    "mean": llama_h.LlamaPoolingType.MEAN,
    "cls": llama_h.LlamaPoolingType.CLS,
    "last": llama_h.LlamaPoolingType.LAST,
    "rank": llama_h.LlamaPoolingType.RANK,
}
MAX_SEQUENCES = 64  # texts per decode; more mostly grows the batch's bookkeeping, not the speed


def pooling_type(name: str | None) -> int:
    """The llama.h pooling for ``name`` (None: the model's own)."""
    if name is None:
        return int(llama_h.LlamaPoolingType.UNSPECIFIED)
    try:
        return int(POOLING[name])
    except (KeyError, TypeError):
        raise LlamaArgumentException(
            f"pooling must be one of {sorted(POOLING)} or None (the model's own), got {name!r}",
            {"pooling": repr(name)},
        ) from None


def model_pooling(model: Model) -> str:
    """The model's own pooling name: its GGUF's ``<arch>.pooling_type``, none when absent (llama.cpp
    resolves an unspecified pooling to none)."""
    arch = model.metadata_value("general.architecture")
    raw = model.metadata_value(f"{arch}.pooling_type") if arch else None
    try:
        value = int(raw) if raw is not None else -1
    except ValueError:
        value = -1
    names = {int(kind): name for name, kind in POOLING.items()}
    return names.get(value, "none")


def rerank_tokens(model: Model, query: str, document: str) -> list[int]:
    """llama-server's ``format_prompt_rerank``: the ``rerank`` chat template with ``{query}`` and
    ``{document}`` replaced (tokenized with special tokens parsed, none added), else BOS (if the
    vocabulary adds it), the query, EOS (if added; SEP when there is no EOS), SEP (if added), the
    document, EOS (if added)."""
    vocab = model.vocab
    template = model.template_source("rerank")
    if template is not None:
        prompt = template.replace("{query}", query).replace("{document}", document)
        return vocab.tokenize(prompt, add_special=False, parse_special=True)
    query_tokens = vocab.tokenize(query, add_special=False, parse_special=False)
    doc_tokens = vocab.tokenize(document, add_special=False, parse_special=False)
    eos = vocab.eos if vocab.eos is not None else vocab.sep
    out: list[int] = []
    if vocab.add_bos and vocab.bos is not None:
        out.append(vocab.bos)
    out += query_tokens
    if vocab.add_eos and eos is not None:
        out.append(eos)
    if vocab.add_sep and vocab.sep is not None:
        out.append(vocab.sep)
    out += doc_tokens
    if vocab.add_eos and eos is not None:
        out.append(eos)
    return out


def l2_normalize(rows: np.ndarray) -> np.ndarray:
    """Each row divided by its Euclidean norm (summed in float64 as upstream does); zero rows stay zero."""
    norms = np.sqrt(np.square(rows, dtype=np.float64).sum(axis=-1, keepdims=True))
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return (rows * scale).astype(np.float32)


class Embedder:
    """Embeds token lists with a context of ``n_ctx`` tokens (the longest text that fits)."""

    def __init__(self, model: Model, n_ctx: int, pooling: str | None, n_threads: int = 0,
                 gpu_offload: bool = False) -> None:
        self.pooling = pooling
        self._context = Context(
            model,
            ContextOptions(n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx, n_seq_max=MAX_SEQUENCES,
                           n_threads=n_threads, embeddings=True, kv_unified=True, pooling_type=pooling_type(pooling)),
            gpu_offload=gpu_offload,
        )
        self._n_ctx = self._context.n_ctx
        self._batch = Batch(self._context, self._n_ctx, 1)

    def close(self) -> None:
        self._batch.close()
        self._context.close()

    @property
    def per_token(self) -> bool:
        return self._context.pooling_type == llama_h.LlamaPoolingType.NONE

    def embed(self, texts: Sequence[list[int]], normalize: bool) -> np.ndarray | list[np.ndarray]:
        """One row per text (pooled), or one (n_tokens, n_embd) array per text (pooling none)."""
        for i, tokens in enumerate(texts):
            if not tokens:
                raise LlamaArgumentException(f"text {i} has no tokens to embed", {"index": i})
            if len(tokens) > self._n_ctx:
                raise LlamaContextException(
                    f"text {i} has {len(tokens)} tokens, more than the embedding context's {self._n_ctx}; "
                    "use a larger n_ctx or a shorter text", {"index": i, "n_tokens": len(tokens), "n_ctx": self._n_ctx},
                )
        out: list[np.ndarray] = []
        start = 0
        while start < len(texts):
            # as many texts as fit one batch (and the context's sequences), each its own sequence
            end, used = start, 0
            while end < len(texts) and end - start < MAX_SEQUENCES and used + len(texts[end]) <= self._n_ctx:
                used += len(texts[end])
                end += 1
            out.extend(self._decode(texts[start:end]))
            start = end
        if self.per_token:
            return [l2_normalize(rows) if normalize else rows for rows in out]
        rows = np.stack(out) if out else np.zeros((0, 0), dtype=np.float32)
        return l2_normalize(rows) if normalize else rows

    def _decode(self, group: Sequence[list[int]]) -> list[np.ndarray]:
        context, batch = self._context, self._batch
        context.memory_clear()
        batch.clear()
        for seq, tokens in enumerate(group):
            for pos, token in enumerate(tokens):
                batch.add(token, pos, (seq,), logits=True)
        context.decode(batch)
        if not self.per_token:
            return [context.embedding(seq_id=seq) for seq in range(len(group))]
        rows, index = [], 0
        for tokens in group:
            rows.append(np.stack([context.embedding(index=index + i) for i in range(len(tokens))]))
            index += len(tokens)
        return rows


__all__ = ["POOLING", "Embedder", "l2_normalize", "model_pooling", "pooling_type", "rerank_tokens"]
