"""Prototypes of libllamact-shim (src/shim): exception-safe wrappers over throwing llama.h calls.

Each takes a trailing ``(char *err, size_t err_size)`` and reports a C++ exception there instead
of letting it terminate the process. :class:`ErrorBuffer` is the reusable buffer to pass.
"""

from __future__ import annotations

import ctypes

from . import llama_h

_ERR = [ctypes.c_char_p, ctypes.c_size_t]

SHIM_FUNCTIONS: dict[str, tuple[list[type], type | None]] = {
    "llamact_sampler_sample": (
        [llama_h.llama_sampler_p, llama_h.llama_context_p, ctypes.c_int32, *_ERR], llama_h.llama_token,
    ),
    "llamact_sampler_accept": ([llama_h.llama_sampler_p, llama_h.llama_token, *_ERR], ctypes.c_int32),
    "llamact_sampler_init_grammar": (
        [llama_h.llama_vocab_p, ctypes.c_char_p, ctypes.c_char_p, *_ERR], llama_h.llama_sampler_p,
    ),
    "llamact_sampler_init_grammar_lazy_patterns": (
        [
            llama_h.llama_vocab_p, ctypes.c_char_p, ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t,
            ctypes.POINTER(llama_h.llama_token), ctypes.c_size_t,
            *_ERR,
        ],
        llama_h.llama_sampler_p,
    ),
    "llamact_gguf_tensor_problem": ([ctypes.c_char_p, *_ERR], ctypes.c_int32),
    "llamact_decode": ([llama_h.llama_context_p, llama_h.llama_batch, ctypes.c_void_p, *_ERR], ctypes.c_int32),
    "llamact_abort_init": ([ctypes.c_void_p], None),
    "llamact_abort_request": ([ctypes.c_void_p], None),
    "llamact_abort_clear": ([ctypes.c_void_p], ctypes.c_int32),
    "llamact_abort_flag": ([ctypes.c_void_p], ctypes.c_bool),
    "llamact_step": (
        [
            llama_h.llama_context_p, llama_h.llama_sampler_p, llama_h.llama_vocab_p, ctypes.c_void_p,
            llama_h.llama_token,
            ctypes.c_int32, ctypes.c_int32, ctypes.c_char_p, ctypes.c_int32,
            ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int32),
            *_ERR,
        ],
        llama_h.llama_token,
    ),
    # reasoning budget (src/shim/reasoning_budget.cpp)
    "llamact_reasoning_budget_init": (
        [
            llama_h.llama_vocab_p,
            ctypes.POINTER(llama_h.llama_token), ctypes.POINTER(ctypes.c_int32), ctypes.c_int32,
            ctypes.POINTER(llama_h.llama_token), ctypes.POINTER(ctypes.c_int32), ctypes.c_int32,
            ctypes.POINTER(llama_h.llama_token), ctypes.c_int32,
            ctypes.c_int32, ctypes.c_int32, *_ERR,
        ],
        llama_h.llama_sampler_p,
    ),
    "llamact_reasoning_budget_state": ([llama_h.llama_sampler_p], ctypes.c_int32),
    "llamact_reasoning_budget_end_match": (
        [llama_h.llama_sampler_p, ctypes.POINTER(llama_h.llama_token), ctypes.c_int32], ctypes.c_int32,
    ),
    "llamact_reasoning_budget_force": ([llama_h.llama_sampler_p], ctypes.c_int32),
    # guided sampling (src/shim/guided_sampling.cpp)
    "llamact_guide_init": (
        [
            llama_h.llama_sampler_p, llama_h.llama_sampler_p, ctypes.c_int32, llama_h.llama_sampler_p,
            ctypes.POINTER(llama_h.llama_token), ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32,
            *_ERR,
        ],
        ctypes.c_void_p,
    ),
    "llamact_guide_free": ([ctypes.c_void_p], None),
    "llamact_guide_prefill": (
        [ctypes.c_void_p, ctypes.POINTER(llama_h.llama_token), ctypes.c_int32, ctypes.c_int32, *_ERR], ctypes.c_int32,
    ),
    "llamact_guide_sample": ([ctypes.c_void_p, llama_h.llama_context_p, ctypes.c_int32, *_ERR], llama_h.llama_token),
    "llamact_guide_accept": ([ctypes.c_void_p, llama_h.llama_token, *_ERR], ctypes.c_int32),
    "llamact_guide_budget_state": ([ctypes.c_void_p], ctypes.c_int32),
    "llamact_guide_force_budget": ([ctypes.c_void_p], ctypes.c_int32),
    "llamact_guide_preserved": ([ctypes.c_void_p, llama_h.llama_token], ctypes.c_int32),
    "llamact_guide_stats": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)], None),
    "llamact_guided_step": (
        [
            llama_h.llama_context_p, ctypes.c_void_p, llama_h.llama_vocab_p, ctypes.c_void_p, llama_h.llama_token,
            ctypes.c_int32, ctypes.c_char_p, ctypes.c_int32,
            ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int32),
            *_ERR,
        ],
        llama_h.llama_token,
    ),
    # speculative decoding (src/shim/speculative.cpp, guided_sampling.cpp)
    "llamact_guide_sample_run": (
        [
            ctypes.c_void_p, llama_h.llama_context_p, llama_h.llama_vocab_p, ctypes.c_int32,
            ctypes.POINTER(llama_h.llama_token), ctypes.c_int32, ctypes.POINTER(llama_h.llama_token), *_ERR,
        ],
        ctypes.c_int32,
    ),
    "llamact_chain_sample_run": (
        [
            llama_h.llama_sampler_p, ctypes.c_int32, llama_h.llama_context_p, llama_h.llama_vocab_p, ctypes.c_int32,
            ctypes.POINTER(llama_h.llama_token), ctypes.c_int32, ctypes.POINTER(llama_h.llama_token), *_ERR,
        ],
        ctypes.c_int32,
    ),
    "llamact_spec_verify": (
        [
            llama_h.llama_context_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32, llama_h.llama_vocab_p,
            ctypes.c_void_p, ctypes.c_int32, ctypes.POINTER(llama_h.llama_token), ctypes.c_int32,
            ctypes.POINTER(llama_h.llama_token), ctypes.POINTER(ctypes.c_int32), *_ERR,
        ],
        ctypes.c_int32,
    ),
    "llamact_vocab_text_mismatch": ([llama_h.llama_vocab_p, llama_h.llama_vocab_p, ctypes.c_int32], ctypes.c_int32),
    "llamact_draft_pick": (
        [llama_h.llama_context_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_float),
         *_ERR],
        llama_h.llama_token,
    ),
}

DECODE_EXCEPTION = -(2**31)  # llamact_decode's "an exception was caught" code


class ErrorBuffer:
    """A reusable error buffer: ``args`` to append to a shim call, ``message`` after a failure."""

    __slots__ = ("_buf", "args")

    def __init__(self, size: int = 1024) -> None:
        self._buf = ctypes.create_string_buffer(size)
        self.args = (ctypes.cast(self._buf, ctypes.c_char_p), size)

    def clear(self) -> None:
        self._buf[0] = b"\0"

    @property
    def message(self) -> str:
        return self._buf.value.decode("utf-8", errors="replace")
