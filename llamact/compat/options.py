"""llama-cpp-python's ``Llama(...)`` and sampling arguments as llamact's ``ModelParams`` and
``GenerationParams``, and the options llamact refuses, each with its reason.

A drop-in must not take an option and silently do something else: an option llamact cannot honour
raises ``LlamaUnsupportedException`` naming it, unless it is given at llama-cpp-python's default (a
call that spells every default out still works).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from ..engine import GenerationParams, ModelParams, SpeculativeParams
from ..errors import LlamaUnsupportedException

# llama.h's LLAMA_DEFAULT_SEED: "pick one at random"
DEFAULT_SEED = 0xFFFFFFFF
SPLIT_MODES = {0: "none", 1: "layer", 2: "row"}
# ggml_type values llama-cpp-python passes for type_k / type_v (LLAMA's GGML_TYPE_*), by llamact's names
KV_TYPES = {0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 20: "iq4_nl", 30: "bf16"}
POOLING_NAMES = {-1: None, 0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank"}

# Llama(...) options llamact does not have, with llama-cpp-python's default (accepted) and why not
_REFUSED_LOAD_OPTIONS: dict[str, tuple[Any, str]] = {
    "vocab_only": (False, "llamact always loads the weights; a tokenizer alone is LlamaEngine.load(...).tokenize"),
    "use_mlock": (False, "llamact does not lock model memory (use_mmap is supported)"),
    "kv_overrides": (None, "GGUF metadata overrides are not supported; edit the file with the gguf package"),
    "rope_scaling_type": (-1, "RoPE scaling options are read from the GGUF only"),
    "rope_freq_base": (0.0, "RoPE scaling options are read from the GGUF only"),
    "rope_freq_scale": (0.0, "RoPE scaling options are read from the GGUF only"),
    "yarn_ext_factor": (-1.0, "YaRN options are read from the GGUF only"),
    "yarn_attn_factor": (1.0, "YaRN options are read from the GGUF only"),
    "yarn_beta_fast": (32.0, "YaRN options are read from the GGUF only"),
    "yarn_beta_slow": (1.0, "YaRN options are read from the GGUF only"),
    "yarn_orig_ctx": (0, "YaRN options are read from the GGUF only"),
    "attention_type": (-1, "the attention type is the model's"),
    "offload_kqv": (True, "the KV cache follows the layers (n_gpu_layers)"),
    "op_offload": (None, "operation offload is llama.cpp's default"),
    "swa_full": (None, "the sliding-window cache is llama.cpp's default"),
    "lora_base": (None, "a LoRA base model is not supported (lora_path alone is)"),
    "numa": (False, "NUMA placement is not exposed"),
    "tokenizer": (None, "llamact tokenizes with the model's own vocabulary"),
    "spm_infill": (False, "infill is the server's /infill route (llamact serve)"),
    "chat_handler": (None, "llama-cpp-python's chat handlers (Llava, functionary, ...) are its own code; llamact "
                           "uses the model's chat template and parses tool calls itself (leave it None); for "
                           "images and audio pass the model's projector as mmproj='mmproj.gguf' and send "
                           "image_url / input_audio parts"),
}
MODEL_PARAMS_FIELDS = frozenset(f.name for f in dataclasses.fields(ModelParams))


def refuse_unless_default(where: str, options: Mapping[str, Any], table: Mapping[str, tuple[Any, str]]) -> None:
    for name, value in options.items():
        if name in table and value != table[name][0]:
            raise LlamaUnsupportedException(f"{where}: {name}={value!r} is not supported: {table[name][1]}",
                                            {"option": name})


def model_params(*, n_gpu_layers: int, split_mode: int, main_gpu: int, tensor_split: Any, use_mmap: bool,
                 n_ctx: int, n_batch: int, n_ubatch: int, n_threads: int | None, n_threads_batch: int | None,
                 flash_attn: bool, type_k: int | None, type_v: int | None, lora_path: str | None, lora_scale: float,
                 extra: Mapping[str, Any]) -> ModelParams:
    """``ModelParams`` for llama-cpp-python's load options; ``extra`` are the ``**kwargs``: the
    refused options (at their default: accepted) and ``ModelParams`` fields by llamact's names."""
    extra = dict(extra)
    speculative = draft_speculation(extra.pop("draft_model", None))
    if speculative is not None:
        extra.setdefault("speculative", speculative)
    refuse_unless_default("Llama()", extra, _REFUSED_LOAD_OPTIONS)
    unknown = [k for k in extra if k not in _REFUSED_LOAD_OPTIONS and k not in MODEL_PARAMS_FIELDS]
    if unknown:
        raise LlamaUnsupportedException(
            f"Llama(): unknown option {unknown[0]!r} (llama-cpp-python's options, or a ModelParams field)",
            {"option": unknown[0]})
    if split_mode not in SPLIT_MODES:
        raise LlamaUnsupportedException(f"Llama(): split_mode={split_mode!r} (0 none, 1 layer, 2 row)",
                                        {"option": "split_mode"})
    own = {k: v for k, v in extra.items() if k in MODEL_PARAMS_FIELDS}
    return ModelParams(**{
        "n_ctx": n_ctx, "n_batch": n_batch, "n_ubatch": min(n_ubatch, n_batch), "n_threads": n_threads,
        "n_threads_batch": n_threads_batch, "n_gpu_layers": n_gpu_layers, "main_gpu": main_gpu,
        "split_mode": SPLIT_MODES[split_mode], "tensor_split": tensor_split, "use_mmap": use_mmap,
        "flash_attn": flash_attn, "type_k": _kv_type("type_k", type_k), "type_v": _kv_type("type_v", type_v),
        "loras": ((lora_path, lora_scale),) if lora_path else (),
        **own,
    })


def draft_speculation(draft_model: Any) -> SpeculativeParams | None:
    """llama-cpp-python's ``draft_model``: its ``LlamaPromptLookupDecoding(max_ngram_size, num_pred_tokens)``
    becomes llama.cpp's ngram-simple with those sizes (prompt lookup: drafts from the text so far), a
    GGUF path a draft model; its other ``LlamaDraftModel`` subclasses are Python code llamact does not run."""
    if draft_model is None:
        return None
    if isinstance(draft_model, (str, os.PathLike)):
        return SpeculativeParams(draft_model=draft_model)
    size_n, size_m = getattr(draft_model, "max_ngram_size", None), getattr(draft_model, "num_pred_tokens", None)
    if isinstance(size_n, int) and isinstance(size_m, int):
        return SpeculativeParams(types=("ngram-simple",), ngram_simple_size_n=size_n, ngram_simple_size_m=size_m)
    raise LlamaUnsupportedException(
        f"Llama(): draft_model={type(draft_model).__name__} is not supported: llamact runs llama-cpp-python's "
        "LlamaPromptLookupDecoding (as llama.cpp's ngram-simple) or a draft GGUF's path, not other Python draft "
        "models (see ModelParams.speculative)", {"option": "draft_model"})


def _kv_type(name: str, value: int | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value not in KV_TYPES:
        raise LlamaUnsupportedException(f"Llama(): {name}={value!r} is not a KV cache type llamact knows "
                                        f"(ggml types {sorted(KV_TYPES)})", {"option": name})
    return KV_TYPES[value]


def pooling_name(pooling_type: int) -> str | None:
    if pooling_type not in POOLING_NAMES:
        raise LlamaUnsupportedException(f"Llama(): pooling_type={pooling_type!r} (-1 the model's, 0 none, 1 mean, "
                                        "2 cls, 3 last, 4 rank)", {"option": "pooling_type"})
    return POOLING_NAMES[pooling_type]


def sampling(*, temperature: float, top_p: float, top_k: int, min_p: float, typical_p: float,
             repeat_penalty: float, presence_penalty: float, frequency_penalty: float, mirostat_mode: int,
             mirostat_tau: float, mirostat_eta: float, tfs_z: float, seed: int | None, max_tokens: int | None,
             stop: Any, logit_bias: Mapping[Any, float] | None, repeat_last_n: int,
             logits_processors: tuple[Any, ...] = ()) -> GenerationParams:
    """``GenerationParams`` for llama-cpp-python's sampling arguments: temperature 0 is greedy,
    ``max_tokens`` None or <= 0 runs to the end of the context, logit_bias keys may be strings."""
    if tfs_z != 1.0:
        raise LlamaUnsupportedException(f"tfs_z={tfs_z!r}: tail-free sampling is gone from llama.cpp "
                                        "(llama-cpp-python ignores it); leave it at 1.0", {"option": "tfs_z"})
    return GenerationParams(
        max_tokens=-1 if max_tokens is None or max_tokens <= 0 else max_tokens,
        temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p, typical_p=typical_p,
        repeat_penalty=repeat_penalty, presence_penalty=presence_penalty, frequency_penalty=frequency_penalty,
        repeat_last_n=repeat_last_n, mirostat=mirostat_mode, mirostat_tau=mirostat_tau, mirostat_eta=mirostat_eta,
        seed=seed, stop=() if stop is None else stop,
        logit_bias={int(k): float(v) for k, v in (logit_bias or {}).items()},
        logits_processors=logits_processors,
    )
