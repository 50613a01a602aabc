"""Context: one inference state (KV cache, logits) over a model (its input, ``Batch``, is in ``batch``)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import LlamaContextException, LlamaInferenceException, LlamaStateException
from . import forks, llama_h, log
from ._handle import NativeHandle
from ._library import native
from .batch import Batch  # re-exported: a batch is made for a context
from .model import Model
from .shim import DECODE_EXCEPTION, ErrorBuffer
from .state_files import read_state_file, refuse_special_target, seal
from .thread_governor import ThreadGovernor


@dataclass(frozen=True)
class ContextOptions:
    """The subset of ``llama_context_params`` llamact exposes. 0 means "upstream's default"."""

    n_ctx: int = 0            # 0 = the model's training context
    n_batch: int = 0          # logical batch; 0 = upstream default (2048)
    n_ubatch: int = 0         # physical batch; 0 = upstream default (512)
    n_seq_max: int = 1
    n_threads: int = 0        # 0 = upstream default (cores, capped at 4... see llama.h)
    n_threads_batch: int = 0
    adaptive_threads: bool = True  # fewer decode threads while the machine is busy (thread_governor.py)
    flash_attn: bool | None = None   # None = auto
    embeddings: bool = False
    offload_kqv: bool = True
    no_perf: bool = False
    swa_full: bool = True     # sliding-window layers keep every position (False: only the window)
    type_k: str | None = None  # KV cache element types (KV_CACHE_TYPES); None = upstream's f16
    type_v: str | None = None  # a quantized V cache needs flash attention
    pooling_type: int = -1    # llama_h.LlamaPoolingType; -1 (UNSPECIFIED) = the model's own
    kv_unified: bool = False  # one KV buffer shared by all sequences (else n_ctx split between them)

    def __post_init__(self) -> None:
        # Checked on construction, so a caller can refuse bad options before loading a model.
        for name in ("type_k", "type_v"):
            value = getattr(self, name)
            if value is not None:
                _kv_type(name, value)
        if self.type_v in _QUANTIZED_KV and self.flash_attn is False:
            raise LlamaContextException(
                f"a quantized V cache (type_v={self.type_v!r}) needs flash attention: "
                "set flash_attn=True or None, or use type_v='f16'",
                {"type_v": self.type_v, "flash_attn": False},
            )


def _thread_setter(context: weakref.ref[Context], n_threads_batch: int) -> Callable[[int], None]:
    """The governor's hand on its context, weak: a context dropped without close() is still freed
    when its last reference goes, not at the next garbage collection."""
    def set_threads(n: int) -> None:
        live = context()
        if live is not None:
            live.set_threads(n, n_threads_batch)
    return set_threads


#: the KV cache types llama.cpp's own tools accept (common/arg.cpp's kv_cache_types)
KV_CACHE_TYPES = {
    "f32": llama_h.GgmlType.F32,
    "f16": llama_h.GgmlType.F16,
    "bf16": llama_h.GgmlType.BF16,
    "q8_0": llama_h.GgmlType.Q8_0,
    "q4_0": llama_h.GgmlType.Q4_0,
    "q4_1": llama_h.GgmlType.Q4_1,
    "iq4_nl": llama_h.GgmlType.IQ4_NL,
    "q5_0": llama_h.GgmlType.Q5_0,
    "q5_1": llama_h.GgmlType.Q5_1,
}

_QUANTIZED_KV = {"q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"}


def _kv_type(name: str, value: object) -> int:
    kind = KV_CACHE_TYPES.get(value) if isinstance(value, str) else None
    if kind is None:
        raise LlamaContextException(
            f"{name} must be one of {', '.join(KV_CACHE_TYPES)}, got {value!r}", {name: repr(value)}
        )
    return int(kind)


def _available_memory() -> int | None:
    """MemAvailable from /proc/meminfo on Linux; None where unknown."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _kv_cache_estimate(model: Model, n_ctx: int) -> int:
    """Bytes of an f16 K+V cache for ``n_ctx`` cells: an upper bound for plain attention models."""
    lib = model._lib
    with model.pinned() as ptr:
        n_layer = int(lib.llama_model_n_layer(ptr))
        n_head = max(1, int(lib.llama_model_n_head(ptr)))
        n_head_kv = int(lib.llama_model_n_head_kv(ptr))
        n_embd = int(lib.llama_model_n_embd(ptr))
    head_dim = n_embd // n_head
    return n_ctx * n_layer * 2 * n_head_kv * head_dim * 2


_SESSION_MAGIC = 0x6767736E  # 'ggsn'
_SESSION_VERSION = 10
_MAX_ARCH_NAME = 256


def _c_path(path: str | os.PathLike[str]) -> bytes:
    """A file path as the C string llama.cpp opens (a NUL would silently shorten it)."""
    raw = os.fsencode(path)
    if b"\0" in raw:
        raise LlamaStateException(f"the path {path!r} holds a NUL character", {"path": repr(path)})
    return raw


def _state_prefix_problem(head: bytes, available: int) -> str | None:
    """A saved state starts with the architecture name: a u32 length, then its bytes. llama.cpp
    allocates (and clears) that length before checking it against the data, so garbage can make
    it take 4 GiB; refuse such a prefix here. None when the prefix is plausible (or too short for
    llama.cpp to get that far: it reports that itself)."""
    if len(head) < 4:
        return None
    n = int.from_bytes(head[:4], "little")
    if n > _MAX_ARCH_NAME or n > available - 4:
        return f"it does not start with a model architecture name (length field {n}); was it saved by llamact?"
    return None


def _session_file_parts(data: memoryview, capacity: int) -> tuple[str | None, list[int], int]:
    """A session file's (problem or None, tokens, offset of the state bytes), checked as
    ``llama_state_load_file`` checks it."""
    if len(data) < 12:
        return "the file is too short to be a state file", [], 0
    magic, version, n_tokens = (int.from_bytes(data[i : i + 4], "little") for i in (0, 4, 8))
    if magic != _SESSION_MAGIC or version != _SESSION_VERSION:
        return f"unknown (magic, version) for session file: {magic:08x}, {version:08x}", [], 0
    if n_tokens > capacity:
        return f"token count in session file exceeded capacity! {n_tokens} > {capacity}", [], 0
    offset = 12 + 4 * n_tokens
    if offset > len(data):
        return "the file is truncated (its token list is cut)", [], 0
    tokens = list(data[12:offset].cast("i")) if n_tokens else []
    return None, tokens, offset


_SEQ_MAGIC = 0x67677371  # 'ggsq': llama_state_seq_save_file's files
_SEQ_VERSION = 3
_SEQ_STREAM_MAGIC = 0xAF143CD8  # io_magic in llama-context.cpp: heads llama_state_seq_get_data's bytes


def _seq_file_parts(data: bytes | memoryview, capacity: int) -> tuple[str | None, list[int], int]:
    """A sequence state file's (problem or None, tokens, offset of the state bytes)."""
    if len(data) < 12:
        return "the file is too short to be a sequence state", [], 0
    magic, version, n_tokens = (int.from_bytes(data[i : i + 4], "little") for i in (0, 4, 8))
    if magic != _SEQ_MAGIC or version != _SEQ_VERSION:
        return f"not a llama.cpp sequence state file (magic {magic:08x}, version {version})", [], 0
    if n_tokens > capacity:
        return f"it holds {n_tokens} tokens, more than this context's {capacity}", [], 0
    offset = 12 + 4 * n_tokens
    if offset > len(data):
        return "the file is truncated (its token list is cut)", [], 0
    tokens = list(memoryview(data)[12:offset].cast("i")) if n_tokens else []
    return None, tokens, offset


class Context(NativeHandle):
    """An inference context. Closing the model closes it first.

    Safe to close from any thread at any time: ``close()`` aborts a decode in progress, waits for
    the native call to return, then frees. Other calls from several threads take turns.
    """

    _kind = "context"

    def __init__(self, model: Model, options: ContextOptions | None = None, *, gpu_offload: bool = False) -> None:
        options = options or ContextOptions()
        for name in ("n_ctx", "n_batch", "n_ubatch", "n_threads", "n_threads_batch"):
            value = getattr(options, name)
            if not isinstance(value, int) or value < 0 or value > 2**31 - 1:
                raise LlamaContextException(
                    f"{name} must be a non-negative integer (0 = default), got {value!r}", {name: value}
                )
        if options.n_seq_max < 1:
            raise LlamaContextException("n_seq_max must be at least 1", {"n_seq_max": options.n_seq_max})
        lib = model._lib
        params = lib.llama_context_default_params()
        # 0 is llama.cpp's "the model's training context"; llama_context_default_params says 512
        params.n_ctx = options.n_ctx
        if options.n_batch:
            params.n_batch = options.n_batch
        if options.n_ubatch:
            params.n_ubatch = options.n_ubatch
        params.n_seq_max = options.n_seq_max
        threads = options.n_threads or max(1, min(os.cpu_count() or 1, 4))
        params.n_threads = threads
        params.n_threads_batch = options.n_threads_batch or threads
        threads_max = max(threads, int(params.n_threads_batch))
        forks.refuse(threads_max, "a context on several threads")
        if options.flash_attn is not None:
            params.flash_attn_type = (
                llama_h.LlamaFlashAttnType.ENABLED
                if options.flash_attn
                else llama_h.LlamaFlashAttnType.DISABLED
            )
        params.embeddings = options.embeddings
        params.pooling_type = options.pooling_type
        params.kv_unified = options.kv_unified
        params.offload_kqv = options.offload_kqv
        params.no_perf = options.no_perf
        params.swa_full = options.swa_full
        if options.type_k is not None:
            params.type_k = _kv_type("type_k", options.type_k)
        if options.type_v is not None:
            params.type_v = _kv_type("type_v", options.type_v)

        n_ctx = int(params.n_ctx) or model.n_ctx_train
        if not gpu_offload:
            # A CPU KV cache is allocated and cleared up front: past available RAM that is an
            # OOM kill, not an error. Refuse before asking.
            need = _kv_cache_estimate(model, n_ctx)
            avail = _available_memory()
            if avail is not None and need > avail:
                raise LlamaContextException(
                    f"a context of {n_ctx} tokens needs about {need / 2**30:.1f} GiB for its KV cache, "
                    f"more than the {avail / 2**30:.1f} GiB of memory available; use a smaller n_ctx",
                    {"n_ctx": n_ctx, "estimated_bytes": need, "available_bytes": avail},
                )

        # The abort flag: an atomic in memory this object owns (so a cancel racing a close never
        # writes to freed memory), read by C directly (llamact_abort_flag in src/shim): ggml polls
        # it after every graph node, far too often for a Python callback.
        shim_lib = native().shim
        self._abort_flag = ctypes.c_int32(0)
        self._abort_ptr = ctypes.addressof(self._abort_flag)
        shim_lib.llamact_abort_init(self._abort_ptr)
        self._shim = shim_lib
        abort_fn = ctypes.cast(shim_lib.llamact_abort_flag, ctypes.c_void_p).value or 0
        params.abort_callback = llama_h.ggml_abort_callback(abort_fn)
        params.abort_callback_data = self._abort_ptr

        position = log.mark()
        with model.pinned() as model_ptr:  # a concurrent model.close() sees this context as a dependent
            ptr = lib.llama_init_from_model(model_ptr, params)
            if not ptr:
                reasons = log.problems_since(position)
                raise LlamaContextException(
                    f"llama.cpp could not create a context (n_ctx={n_ctx}): "
                    f"{reasons[-1] if reasons else 'no reason given'}; try a smaller n_ctx or n_batch",
                    {"n_ctx": n_ctx, "native_log": reasons},
                )
            super().__init__(ptr, lib.llama_free)
            self._lib = lib
            self.model = model
            self.options = options
            self._n_ctx = int(lib.llama_n_ctx(ptr))  # fixed for the context's life
            self._n_batch = int(lib.llama_n_batch(ptr))
            self.n_threads_batch = int(params.n_threads_batch)   # as configured (the governor moves n_threads)
            self._threads_max = threads_max   # the most threads a decode of it takes (forks.mark)
            forks.watch(self, threads_max)
            # A sliding-window cache that is not full-size forgets positions older than the window
            # (keep_prefix must know); llama.cpp's default is full-size, then nothing is forgotten.
            self._swa_forgets = 0 if params.swa_full else int(lib.llama_model_n_swa(model_ptr))
            model._adopt(self)
        # one-token decodes on the CPU with several threads: their count follows what the cores allow
        self.governor: ThreadGovernor | None = None
        if options.adaptive_threads and threads > 1 and not gpu_offload and not options.no_perf:
            self.governor = ThreadGovernor(threads, _thread_setter(weakref.ref(self), int(params.n_threads_batch)))

    def close(self) -> None:
        """Abort a decode in progress in another thread, wait for it to return, then free."""
        self.request_abort()
        super().close()

    # -- sizes -----------------------------------------------------------------------------

    @property
    def n_ctx(self) -> int:
        self.check_open()
        return self._n_ctx

    @property
    def n_batch(self) -> int:
        self.check_open()
        return self._n_batch

    @property
    def n_ctx_seq(self) -> int:
        """The positions one sequence may use: ``n_ctx`` split between the ``n_seq_max`` sequences."""
        with self.pinned() as ptr:
            return int(self._lib.llama_n_ctx_seq(ptr))

    @property
    def n_ubatch(self) -> int:
        with self.pinned() as ptr:
            return int(self._lib.llama_n_ubatch(ptr))

    @property
    def n_threads(self) -> int:
        """The threads a one-token decode uses now (the thread governor may have moved it)."""
        with self.pinned() as ptr:
            return int(self._lib.llama_n_threads(ptr))

    def set_threads(self, n_threads: int, n_threads_batch: int | None = None) -> None:
        if n_threads < 1:
            raise LlamaContextException("n_threads must be at least 1", {"n_threads": n_threads})
        with self.pinned() as ptr:
            self._lib.llama_set_n_threads(ptr, n_threads, n_threads_batch or n_threads)

    # -- decoding --------------------------------------------------------------------------

    def request_abort(self) -> None:
        """Abort the decode in progress (possibly on another thread), or the next one to start: a
        request is consumed by the decode it aborts. Safe from any thread, also after close."""
        self._shim.llamact_abort_request(self._abort_ptr)

    def clear_abort(self) -> bool:
        """Forget a pending abort request (a new piece of work starts); True if there was one."""
        return bool(self._shim.llamact_abort_clear(self._abort_ptr))

    def decode(self, batch: Batch) -> None:
        """Run the model on ``batch``. Raises LlamaContextException when the context is full, and
        LlamaInferenceException when it was aborted (``request_abort``)."""
        err = ErrorBuffer()
        forks.mark(self._threads_max)
        with self.pinned() as ptr, batch.pinned():
            if batch.struct.n_tokens == 0:
                raise LlamaInferenceException("cannot decode an empty batch")
            rc = self._shim.llamact_decode(ptr, batch.struct, self._abort_ptr, *err.args)
        if rc != 0:
            self._raise_decode_error(rc, err.message)

    def _raise_decode_error(self, rc: int, native_error: str = "") -> None:
        """The exception for a non-zero llamact_decode code (``native_error``: a caught C++ exception)."""
        if rc == DECODE_EXCEPTION:
            raise LlamaInferenceException(f"llama_decode failed inside llama.cpp: {native_error}", {"code": rc})
        if rc == 1:
            raise LlamaContextException(
                f"the context is full ({self.n_ctx} tokens); use a larger n_ctx or shorten the input",
                {"n_ctx": self.n_ctx, "code": rc},
            )
        if rc == 2:
            raise LlamaInferenceException("decoding was aborted", {"code": rc})
        raise LlamaInferenceException(
            f"llama_decode failed (code {rc}): the batch holds invalid tokens or positions", {"code": rc}
        )

    def logits(self, index: int = -1) -> np.ndarray:
        """The logits row of output ``index`` (-1 = last) as a float32 numpy array that owns its
        memory: a copy, because the native row is overwritten by the next decode and freed with
        the context."""
        with self.borrow_logits(index) as row:
            return row.copy()

    @contextmanager
    def borrow_logits(self, index: int = -1) -> Iterator[np.ndarray]:
        """``with context.borrow_logits() as row:`` the native logits row of output ``index`` as a
        writable numpy view, valid only inside the block (the context is pinned meanwhile, so a
        close from another thread waits). Writing to it changes what the sampler sees next."""
        n_vocab = self.model._n_vocab
        with self.pinned() as ctx:
            ptr = self._lib.llama_get_logits_ith(ctx, index)
            if not ptr:
                raise LlamaInferenceException(f"no logits for output {index}", {"index": index})
            yield np.ctypeslib.as_array(ptr, shape=(n_vocab,))

    # -- adapters ----------------------------------------------------------------------------

    def set_loras(self, adapters: Sequence[tuple[Any, float]]) -> None:
        """Apply exactly these ``(LoraAdapter, scale)`` pairs from the next decode on (none: the
        base model). The adapters must stay open while they are set."""
        n = len(adapters)
        ptrs = (llama_h.llama_adapter_lora_p * max(n, 1))()
        scales = (ctypes.c_float * max(n, 1))()
        with contextlib.ExitStack() as pins, self.pinned() as ptr:
            for i, (adapter, scale) in enumerate(adapters):
                ptrs[i] = pins.enter_context(adapter.pinned())
                scales[i] = float(scale)
            rc = int(self._lib.llama_set_adapters_lora(ptr, ptrs, n, scales))
        if rc != 0:
            raise LlamaContextException(f"llama.cpp could not set the LoRA adapters (code {rc})", {"code": rc})

    # -- embeddings (a context created with ContextOptions.embeddings) -------------------------

    @property
    def pooling_type(self) -> int:
        """The pooling this context applies (a llama_h.LlamaPoolingType value)."""
        with self.pinned() as ptr:
            return int(self._lib.llama_pooling_type(ptr))

    def embedding(self, *, seq_id: int | None = None, index: int | None = None) -> np.ndarray:
        """A float32 copy of the pooled embedding of sequence ``seq_id``, or of output ``index``'s
        own embedding (pooling none), from the last decode. With rank pooling a sequence's vector
        is the classifier's ``n_cls_out`` scores, not ``n_embd`` values (reading more would overrun it)."""
        with self.pinned() as ctx:
            model = self._lib.llama_get_model(ctx)
            n = int(self._lib.llama_model_n_embd_out(model))
            if seq_id is not None and int(self._lib.llama_pooling_type(ctx)) == llama_h.LlamaPoolingType.RANK:
                n = int(self._lib.llama_model_n_cls_out(model))
            if seq_id is not None:
                ptr = self._lib.llama_get_embeddings_seq(ctx, seq_id)
            else:
                ptr = self._lib.llama_get_embeddings_ith(ctx, -1 if index is None else index)
            if not ptr:
                raise LlamaInferenceException(
                    "no embedding for that sequence or output: was the context created with embeddings on?",
                    {"seq_id": seq_id, "index": index},
                )
            return np.ctypeslib.as_array(ptr, shape=(n,)).copy()

    # -- memory (KV cache) -------------------------------------------------------------------

    def _memory_call(self, fn: str, *args: int) -> Any:
        with self.pinned() as ptr:
            return getattr(self._lib, fn)(self._lib.llama_get_memory(ptr), *args)

    def memory_clear(self, data: bool = True) -> None:
        self._memory_call("llama_memory_clear", data)

    def memory_seq_rm(self, seq_id: int, p0: int = -1, p1: int = -1) -> bool:
        return bool(self._memory_call("llama_memory_seq_rm", seq_id, p0, p1))

    def memory_seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        self._memory_call("llama_memory_seq_cp", src, dst, p0, p1)

    def memory_seq_keep(self, seq_id: int) -> None:
        self._memory_call("llama_memory_seq_keep", seq_id)

    def memory_seq_add(self, seq_id: int, p0: int, p1: int, delta: int) -> None:
        self._memory_call("llama_memory_seq_add", seq_id, p0, p1, delta)

    def memory_seq_pos_min(self, seq_id: int = 0) -> int:
        return int(self._memory_call("llama_memory_seq_pos_min", seq_id))

    def memory_seq_pos_max(self, seq_id: int = 0) -> int:
        return int(self._memory_call("llama_memory_seq_pos_max", seq_id))

    def keep_prefix(self, n_keep: int) -> bool:
        """Keep positions ``0 .. n_keep-1`` of sequence 0 in the memory and drop the rest, so that
        decoding goes on at position ``n_keep``. True when the memory now holds exactly that prefix
        and can attend from it; otherwise the memory is cleared and the result is False: recurrent
        and hybrid states cannot be cut back (llama_memory_seq_rm refuses), a sliding-window cache
        smaller than the context may have forgotten positions the next tokens attend to, and a
        memory changed behind the caller's back holds fewer positions than ``n_keep``."""
        if n_keep <= 0:
            self.memory_clear()
            return n_keep == 0
        with self.pinned() as ptr:
            lib = self._lib
            memory = lib.llama_get_memory(ptr)
            kept = bool(lib.llama_memory_seq_rm(memory, 0, n_keep, -1))
            pos_min = int(lib.llama_memory_seq_pos_min(memory, 0))
            pos_max = int(lib.llama_memory_seq_pos_max(memory, 0))
            # llama-server's test (server-context.cpp, "forcing full prompt re-processing"): the
            # oldest position held must lie before the window of the next position.
            usable = kept and pos_max == n_keep - 1 and 0 <= pos_min < max(1, n_keep - self._swa_forgets)
            if not usable:
                lib.llama_memory_clear(memory, True)
        return usable

    # -- state -----------------------------------------------------------------------------

    def state_bytes(self) -> bytes:
        with self.pinned() as ptr:
            size = int(self._lib.llama_state_get_size(ptr))
            buf = (ctypes.c_uint8 * size)()
            written = int(self._lib.llama_state_get_data(ptr, buf, size))
        return ctypes.string_at(buf, written)   # one copy (slicing a ctypes array builds a list of ints)

    def load_state_bytes(self, data: bytes | bytearray | memoryview) -> None:
        """Restore a state from :meth:`state_bytes`. On failure the memory is cleared (nothing
        half-loaded stays) and LlamaStateException raised."""
        self.check_open()
        bad = _state_prefix_problem(bytes(data[:4]), len(data))
        if bad:
            raise LlamaStateException(f"these bytes are not a saved llama.cpp state: {bad}", {"size": len(data)})
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        position = log.mark()
        with self.pinned() as ptr:
            read = int(self._lib.llama_state_set_data(ptr, buf, len(data)))
        if read == 0 or read != len(data):
            self._forget(-1)
            reasons = log.problems_since(position)
            raise LlamaStateException(
                "the saved state does not fit this context (different model or context size?)"
                + (f": {'; '.join(reasons)}" if reasons else ""),
                {"native_log": reasons},
            )

    def seq_state_bytes(self, seq_id: int) -> bytearray:
        """One sequence's KV cache as bytes (for ``load_seq_state_bytes``, into any sequence): a
        bytearray llama.cpp writes into, never copied (a server saves a slot's cache on the way to a
        request's first token: a few MB per save)."""
        with self.pinned() as ptr:
            size = int(self._lib.llama_state_seq_get_size(ptr, seq_id))
            data = bytearray(size)
            view = (ctypes.c_uint8 * size).from_buffer(data)
            written = int(self._lib.llama_state_seq_get_data(ptr, view, size, seq_id))
            del view   # (the bytearray may change size only once no view holds it)
        if written < size:
            del data[written:]
        return data

    def load_seq_state_bytes(self, data: bytes | bytearray, seq_id: int) -> None:
        """Replace sequence ``seq_id``'s KV cache with ``seq_state_bytes``' output. On failure the
        sequence is cleared and LlamaStateException raised."""
        # llama.cpp only reads it: a bytearray is lent as it is, bytes are copied (they are read-only)
        array = ctypes.c_uint8 * len(data)
        buf = array.from_buffer(data) if isinstance(data, bytearray) else array.from_buffer_copy(data)
        with self.pinned() as ptr:
            read = int(self._lib.llama_state_seq_set_data(ptr, buf, len(data), seq_id))
        del buf
        if read == 0:
            self.memory_seq_rm(seq_id, -1, -1)
            raise LlamaStateException("the saved sequence does not fit this context (no room, or another model)",
                                      {"seq_id": seq_id, "size": len(data)})

    def save_state(self, path: str | os.PathLike[str], tokens: Sequence[int], *, checksum: bool = True) -> None:
        """Write the whole context state (every sequence's KV cache, the last logits) to ``path``,
        with ``tokens`` (what the cache holds) for :meth:`load_state` to give back; ``checksum``
        seals the file (``state_files``: a damaged file is refused when loaded)."""
        ids = self.model.vocab.token_ids(tokens)
        arr = (llama_h.llama_token * len(ids))(*ids)
        raw_path = _c_path(path)
        refuse_special_target(path)
        with self.pinned() as ptr:
            saved = self._lib.llama_state_save_file(ptr, raw_path, arr, len(ids))
        if not saved:
            raise LlamaStateException(f"could not save the state to {path}", {"path": str(path)})
        if checksum:
            seal(path)

    def load_state(self, path: str | os.PathLike[str], capacity: int | None = None) -> list[int]:
        """Restore a state saved with :meth:`save_state`; returns the tokens saved with it. A file
        of another model, a truncated or damaged one (its seal), one holding more than this context
        fits, or something that is not a regular file raises LlamaStateException, with the memory
        cleared (nothing half-loaded stays). The file is read here and its state handed to
        ``llama_state_set_data`` (a sealed file is llama.cpp's plus a trailer its reader refuses)."""
        capacity = capacity or self.n_ctx
        _c_path(path)
        try:
            data = read_state_file(path)
            problem, tokens, offset = _session_file_parts(data, capacity)
            if problem:
                raise LlamaStateException(problem)
            self.load_state_bytes(data[offset:])
        except LlamaStateException as exc:
            self._forget(-1)
            message = str(exc)
            raise LlamaStateException(message if str(path) in message else f"could not load a state from {path}: "
                                      f"{message}", {"path": str(path)}) from None
        return tokens

    def save_seq_state(self, path: str | os.PathLike[str], seq_id: int, tokens: Sequence[int], *,
                       raw: bool = False, checksum: bool = True) -> None:
        """Write sequence ``seq_id``'s KV cache (``llama_state_seq_save_file``) with ``tokens``
        (``raw``: any int32 words, not checked as token ids -- llama-server stores its packed
        ``server_tokens`` there); ``checksum`` seals the file (not for llama-server's slot files)."""
        ids = [int(t) for t in tokens] if raw else self.model.vocab.token_ids(tokens)
        arr = (llama_h.llama_token * len(ids))(*ids)
        raw_path = _c_path(path)
        refuse_special_target(path)
        with self.pinned() as ptr:
            written = int(self._lib.llama_state_seq_save_file(ptr, raw_path, seq_id, arr, len(ids)))
        if written == 0:
            raise LlamaStateException(f"could not save sequence {seq_id} to {path}", {"path": str(path)})
        if checksum:
            seal(path)

    def load_seq_state(self, path: str | os.PathLike[str], seq_id: int, capacity: int | None = None) -> list[int]:
        """Restore a file of :meth:`save_seq_state` (llama.cpp's sequence state file) into sequence
        ``seq_id``, replacing its cells; returns the tokens saved with it. On failure the sequence is
        emptied and LlamaStateException raised.

        The file is read here and its state handed to ``llama_state_seq_set_data``, not to
        ``llama_state_seq_load_file``: on a truncated file the latter reads past the end and then
        aborts the process (GGML_ASSERT(nread <= state_size), llama-context.cpp), while the
        in-memory reader raises, which llama.cpp turns into a failed load."""
        capacity = capacity or self.n_ctx
        try:
            data = read_state_file(path)
        except LlamaStateException:
            self.memory_seq_rm(seq_id)
            raise
        problem, tokens, offset = _seq_file_parts(data, capacity)
        if problem:
            self.memory_seq_rm(seq_id)
            raise LlamaStateException(f"could not load a sequence state from {path}: {problem}", {"path": str(path)})
        # llama_state_seq_set_data's layout: its stream magic and a sequence id, then the cells
        body = _SEQ_STREAM_MAGIC.to_bytes(4, "little") + seq_id.to_bytes(4, "little", signed=True) + data[offset:]
        buf = (ctypes.c_uint8 * len(body)).from_buffer_copy(body)
        del body
        position = log.mark()
        with self.pinned() as ptr:
            self._lib.llama_memory_seq_rm(self._lib.llama_get_memory(ptr), seq_id, -1, -1)
            read = int(self._lib.llama_state_seq_set_data(ptr, buf, len(buf), seq_id))
        if read != len(buf):
            self._forget(seq_id)
            raise LlamaStateException(
                f"could not load a sequence state from {path}: "
                + "; ".join(log.problems_since(position) or ["it does not fit this model and context"]),
                {"path": str(path), "seq_id": seq_id},
            )
        return tokens

    def _forget(self, seq_id: int) -> None:
        """After a failed load: drop whatever it left (-1: the whole memory)."""
        if seq_id < 0:
            self.memory_clear()
        else:
            self.memory_seq_rm(seq_id)

    # -- performance -------------------------------------------------------------------------

    def perf(self) -> dict[str, float]:
        with self.pinned() as ptr:
            data = self._lib.llama_perf_context(ptr)
        return {name: float(getattr(data, name)) for name, _ in data._fields_}

    def observe_decode(self) -> None:
        """After a decode (and the read of its logits): tell the thread governor, if any."""
        governor = self.governor
        if governor is not None:
            with self.pinned() as ptr:
                data = self._lib.llama_perf_context(ptr)
            governor.after_decode(data.n_eval, data.t_eval_ms)

    def perf_reset(self) -> None:
        with self.pinned() as ptr:
            self._lib.llama_perf_context_reset(ptr)
