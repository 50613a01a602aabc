"""Prototypes of libmtmd (upstream's tools/mtmd: multimodal projectors) and of the shim's wrappers
over it (src/shim/media.cpp). Declarations only; ``native.mtmd`` holds the owning wrappers."""

from __future__ import annotations

import ctypes

from . import llama_h

_p = ctypes.c_void_p
_ERR = [ctypes.c_char_p, ctypes.c_size_t]

# libmtmd's plain C getters and destructors (nothing here throws): bound on libmtmd itself.
MTMD_FUNCTIONS: dict[str, tuple[list[type], type | None]] = {
    "mtmd_free": ([_p], None),
    "mtmd_support_vision": ([_p], ctypes.c_bool),
    "mtmd_support_audio": ([_p], ctypes.c_bool),
    "mtmd_decode_use_mrope": ([_p], ctypes.c_bool),
    "mtmd_get_audio_sample_rate": ([_p], ctypes.c_int),
    "mtmd_get_marker": ([_p], ctypes.c_char_p),
    "mtmd_default_marker": ([], ctypes.c_char_p),
    "mtmd_bitmap_free": ([_p], None),
    "mtmd_bitmap_get_nx": ([_p], ctypes.c_uint32),
    "mtmd_bitmap_get_ny": ([_p], ctypes.c_uint32),
    "mtmd_bitmap_get_n_bytes": ([_p], ctypes.c_size_t),
    "mtmd_bitmap_is_audio": ([_p], ctypes.c_bool),
    "mtmd_bitmap_get_id": ([_p], ctypes.c_char_p),
    "mtmd_input_chunks_init": ([], _p),
    "mtmd_input_chunks_size": ([_p], ctypes.c_size_t),
    "mtmd_input_chunks_get": ([_p, ctypes.c_size_t], _p),
    "mtmd_input_chunks_free": ([_p], None),
    "mtmd_input_chunk_get_type": ([_p], ctypes.c_int),
    "mtmd_input_chunk_get_tokens_text": ([_p, ctypes.POINTER(ctypes.c_size_t)], ctypes.POINTER(llama_h.llama_token)),
    "mtmd_input_chunk_get_n_tokens": ([_p], ctypes.c_size_t),
    "mtmd_input_chunk_get_id": ([_p], ctypes.c_char_p),
    "mtmd_input_chunk_get_n_pos": ([_p], ctypes.c_int32),
    "mtmd_batch_init": ([_p], _p),
    "mtmd_batch_free": ([_p], None),
    "mtmd_helper_log_set": ([llama_h.ggml_log_callback, _p], None),
}

# The shim's mtmd wrappers (src/shim/media.cpp), bound with the rest of the shim.
MEDIA_SHIM_FUNCTIONS: dict[str, tuple[list[type], type | None]] = {
    "llamact_media_probe": (
        [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int32, ctypes.POINTER(ctypes.c_int32),
         ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_uint64), *_ERR],
        ctypes.c_int32,
    ),
    "llamact_mtmd_init": (
        [ctypes.c_char_p, llama_h.llama_model_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32,
         ctypes.c_int32, ctypes.c_int32, ctypes.c_char_p, *_ERR],
        _p,
    ),
    "llamact_mtmd_bitmap_from_buf": ([_p, ctypes.c_char_p, ctypes.c_size_t, *_ERR], _p),
    "llamact_mtmd_tokenize": (
        [_p, _p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(_p),
         ctypes.c_size_t, *_ERR],
        ctypes.c_int32,
    ),
    "llamact_mtmd_batch_encode": (
        [_p, ctypes.POINTER(_p), ctypes.c_size_t, ctypes.POINTER(ctypes.c_int32), *_ERR], ctypes.c_int32,
    ),
    "llamact_mtmd_decode_chunk": (
        [_p, llama_h.llama_context_p, _p, _p, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, _p,
         ctypes.POINTER(ctypes.c_int32), *_ERR],
        ctypes.c_int32,
    ),
}
