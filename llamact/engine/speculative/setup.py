"""An engine's ``Speculator`` from its ``ModelParams`` (``LlamaEngine.load`` calls ``make_speculator``).

Raised: ``LlamaUnsupportedException`` for a model whose memory cannot drop the last positions of a
sequence (recurrent or hybrid: llama-server checkpoints their state instead, which llamact does not);
``LlamaModelException`` when the draft model cannot be loaded or does not share the vocabulary.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ...errors import LlamaUnsupportedException
from ...native.context import Context
from ...native.model import Model
from .draft_model import DraftModel
from .speculator import Speculator

if TYPE_CHECKING:
    from ..params import ModelParams

__all__ = ["make_speculator"]


def make_speculator(params: ModelParams, model: Model, context: Context) -> Speculator:
    spec = params.speculative
    assert spec is not None
    if model.keeps_recurrent_state:
        raise LlamaUnsupportedException(
            f"speculative decoding needs a model whose memory can drop its last positions; {model.path.name} is "
            "recurrent or hybrid (llama-server checkpoints such state, llamact does not): leave speculative off",
            {"model": str(model.path)})
    draft = None
    if spec.draft_model is not None:
        threads = spec.draft_n_threads or params.n_threads or 0
        draft = DraftModel(
            os.fspath(spec.draft_model), model, n_ctx=spec.draft_n_ctx or context.n_ctx, n_seq=params.n_seq_max,
            n_batch=context.n_batch, n_ubatch=params.n_ubatch, n_threads=threads,
            n_threads_batch=spec.draft_n_threads_batch or threads, n_gpu_layers=spec.draft_n_gpu_layers,
            n_max=spec.draft_n_max, n_min=spec.draft_n_min, p_min=spec.draft_p_min,
            adaptive_threads=params.adaptive_threads)
    try:
        return Speculator(spec, model, params.n_seq_max, draft)
    except BaseException:
        if draft is not None:
            draft.close()
        raise
