"""LoraAdapter: a LoRA adapter GGUF loaded for one model (``llama_adapter_lora_*``).

An adapter belongs to its model: the model closes it before freeing itself (llama.cpp would free
it with the model anyway; closing it first keeps the pointer from dangling here). Which adapters a
context applies, and at what scale, is ``Context.set_loras``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import LlamaModelException
from . import log
from ._handle import NativeHandle
from .model import GGUF_MAGIC, Model


class LoraAdapter(NativeHandle):
    """A LoRA adapter of ``model`` read from ``path``; a mismatched or damaged file raises
    LlamaModelException with llama.cpp's reason."""

    _kind = "LoRA adapter"

    def __init__(self, model: Model, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:
            with self.path.open("rb") as fh:
                magic = fh.read(4)
        except OSError as exc:
            raise LlamaModelException(f"cannot read LoRA adapter {self.path}: {exc.strerror}",
                                      {"path": str(self.path)}) from exc
        if magic != GGUF_MAGIC:
            raise LlamaModelException(f"{self.path} is not a GGUF file (it starts with {magic!r})",
                                      {"path": str(self.path)})
        lib = model._lib
        position = log.mark()
        with model.exclusive() as model_ptr:   # it registers itself in the model: no reader meanwhile
            ptr = lib.llama_adapter_lora_init(model_ptr, os.fsencode(self.path))
            if not ptr:
                reasons = log.problems_since(position)
                raise LlamaModelException(
                    f"llama.cpp could not load the LoRA adapter {self.path} for {model.path.name}: "
                    + ("; ".join(reasons) if reasons else "no reason given")
                    + " (an adapter must be made for this base model)",
                    {"path": str(self.path), "native_log": reasons},
                )
            super().__init__(ptr, lib.llama_adapter_lora_free)
            self.model = model
            model._adopt(self)


__all__ = ["LoraAdapter"]
