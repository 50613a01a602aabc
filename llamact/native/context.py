"""Context: one inference state (KV cache, logits) over a model, and Batch, its input buffer."""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import LlamaContextException, LlamaInferenceException, LlamaStateException
from . import llama_h, log
from ._handle import NativeHandle
from ._library import native
from .model import Model
from .shim import DECODE_EXCEPTION, ErrorBuffer


@dataclass(frozen=True)
class ContextOptions:
    """The subset of ``llama_context_params`` llamact exposes. 0 means "upstream's default"."""

    n_ctx: int = 0            # 0 = the model's training context
    n_batch: int = 0          # logical batch; 0 = upstream default (2048)
    n_ubatch: int = 0         # physical batch; 0 = upstream default (512)
    n_seq_max: int = 1
    n_threads: int = 0        # 0 = upstream default (cores, capped at 4... see llama.h)
    n_threads_batch: int = 0
    flash_attn: bool | None = None   # None = auto
    embeddings: bool = False
    offload_kqv: bool = True
    no_perf: bool = False


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
    n_layer = int(lib.llama_model_n_layer(model.ptr))
    n_head = max(1, int(lib.llama_model_n_head(model.ptr)))
    n_head_kv = int(lib.llama_model_n_head_kv(model.ptr))
    n_embd = int(lib.llama_model_n_embd(model.ptr))
    head_dim = n_embd // n_head
    return n_ctx * n_layer * 2 * n_head_kv * head_dim * 2


_SESSION_MAGIC = 0x6767736E  # 'ggsn'
_SESSION_VERSION = 10
_MAX_ARCH_NAME = 256


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


def _state_file_problem(path: str | os.PathLike[str], capacity: int) -> str | None:
    """Check a session file's state prefix (see above) where llama.cpp would read it."""
    try:
        with open(path, "rb") as fh:
            header = fh.read(12)
            if len(header) < 12:
                return None
            magic, version, n_tokens = (int.from_bytes(header[i : i + 4], "little") for i in (0, 4, 8))
            if magic != _SESSION_MAGIC or version != _SESSION_VERSION or n_tokens > capacity:
                return None  # llama.cpp rejects these with a clear message
            offset = 12 + 4 * n_tokens
            fh.seek(offset)
            head = fh.read(4)
            size = os.fstat(fh.fileno()).st_size
    except OSError:
        return None  # llama.cpp reports why it cannot open the file
    return _state_prefix_problem(head, size - offset)


class Context(NativeHandle):
    """An inference context. Closing the model closes it first."""

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
        if options.n_ctx:
            params.n_ctx = options.n_ctx
        if options.n_batch:
            params.n_batch = options.n_batch
        if options.n_ubatch:
            params.n_ubatch = options.n_ubatch
        params.n_seq_max = options.n_seq_max
        threads = options.n_threads or max(1, min(os.cpu_count() or 1, 4))
        params.n_threads = threads
        params.n_threads_batch = options.n_threads_batch or threads
        if options.flash_attn is not None:
            params.flash_attn_type = (
                llama_h.LlamaFlashAttnType.ENABLED
                if options.flash_attn
                else llama_h.LlamaFlashAttnType.DISABLED
            )
        params.embeddings = options.embeddings
        params.offload_kqv = options.offload_kqv
        params.no_perf = options.no_perf

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

        # The abort flag lives in memory C reads directly (see llamact_abort_flag in src/shim):
        # ggml polls it after every graph node, far too often for a Python callback.
        self._abort_flag = ctypes.c_int32(0)
        abort_fn = ctypes.cast(native().shim.llamact_abort_flag, ctypes.c_void_p).value or 0
        params.abort_callback = llama_h.ggml_abort_callback(abort_fn)
        params.abort_callback_data = ctypes.cast(ctypes.pointer(self._abort_flag), ctypes.c_void_p)

        position = log.mark()
        ptr = lib.llama_init_from_model(model.ptr, params)
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
        model._adopt(self)
        self.options = options

    # -- sizes -----------------------------------------------------------------------------

    @property
    def n_ctx(self) -> int:
        return int(self._lib.llama_n_ctx(self.ptr))

    @property
    def n_batch(self) -> int:
        return int(self._lib.llama_n_batch(self.ptr))

    @property
    def n_ubatch(self) -> int:
        return int(self._lib.llama_n_ubatch(self.ptr))

    def set_threads(self, n_threads: int, n_threads_batch: int | None = None) -> None:
        if n_threads < 1:
            raise LlamaContextException("n_threads must be at least 1", {"n_threads": n_threads})
        self._lib.llama_set_n_threads(self.ptr, n_threads, n_threads_batch or n_threads)

    # -- decoding --------------------------------------------------------------------------

    def request_abort(self) -> None:
        """Make the decode in progress (possibly on another thread) return early."""
        self._abort_flag.value = 1

    def decode(self, batch: Batch) -> None:
        """Run the model on ``batch``. Raises LlamaContextException when the context is full."""
        if batch.n_tokens == 0:
            raise LlamaInferenceException("cannot decode an empty batch")
        self._abort_flag.value = 0
        err = ErrorBuffer()
        rc = native().shim.llamact_decode(self.ptr, batch.struct, *err.args)
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

    def logits(self, index: int = -1) -> ctypes.Array[ctypes.c_float]:
        """The logits row of output ``index`` (-1 = last), as a ctypes view over native memory."""
        ptr = self._lib.llama_get_logits_ith(self.ptr, index)
        if not ptr:
            raise LlamaInferenceException(f"no logits for output {index}", {"index": index})
        n_vocab = self.model.vocab.n_tokens
        return ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float * n_vocab)).contents

    # -- memory (KV cache) -------------------------------------------------------------------

    @property
    def _memory(self) -> int:
        return self._lib.llama_get_memory(self.ptr)

    def memory_clear(self, data: bool = True) -> None:
        self._lib.llama_memory_clear(self._memory, data)

    def memory_seq_rm(self, seq_id: int, p0: int = -1, p1: int = -1) -> bool:
        return bool(self._lib.llama_memory_seq_rm(self._memory, seq_id, p0, p1))

    def memory_seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        self._lib.llama_memory_seq_cp(self._memory, src, dst, p0, p1)

    def memory_seq_keep(self, seq_id: int) -> None:
        self._lib.llama_memory_seq_keep(self._memory, seq_id)

    def memory_seq_add(self, seq_id: int, p0: int, p1: int, delta: int) -> None:
        self._lib.llama_memory_seq_add(self._memory, seq_id, p0, p1, delta)

    def memory_seq_pos_min(self, seq_id: int = 0) -> int:
        return int(self._lib.llama_memory_seq_pos_min(self._memory, seq_id))

    def memory_seq_pos_max(self, seq_id: int = 0) -> int:
        return int(self._lib.llama_memory_seq_pos_max(self._memory, seq_id))

    # -- state -----------------------------------------------------------------------------

    def state_bytes(self) -> bytes:
        size = int(self._lib.llama_state_get_size(self.ptr))
        buf = (ctypes.c_uint8 * size)()
        written = int(self._lib.llama_state_get_data(self.ptr, buf, size))
        return bytes(buf[:written])

    def load_state_bytes(self, data: bytes) -> None:
        self.check_open()
        bad = _state_prefix_problem(bytes(data[:4]), len(data))
        if bad:
            raise LlamaStateException(f"these bytes are not a saved llama.cpp state: {bad}", {"size": len(data)})
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        position = log.mark()
        read = int(self._lib.llama_state_set_data(self.ptr, buf, len(data)))
        if read == 0 or read != len(data):
            reasons = log.problems_since(position)
            raise LlamaStateException(
                "the saved state does not fit this context (different model or context size?)"
                + (f": {'; '.join(reasons)}" if reasons else ""),
                {"native_log": reasons},
            )

    def save_state(self, path: str | os.PathLike[str], tokens: Sequence[int]) -> None:
        arr = (llama_h.llama_token * len(tokens))(*tokens)
        if not self._lib.llama_state_save_file(self.ptr, os.fsencode(path), arr, len(tokens)):
            raise LlamaStateException(f"could not save the state to {path}", {"path": str(path)})

    def load_state(self, path: str | os.PathLike[str], capacity: int | None = None) -> list[int]:
        """Restore a state saved with :meth:`save_state`; returns the tokens saved with it."""
        capacity = capacity or self.n_ctx
        bad = _state_file_problem(path, capacity)
        if bad:
            raise LlamaStateException(f"could not load a state from {path}: {bad}", {"path": str(path)})
        arr = (llama_h.llama_token * capacity)()
        count = ctypes.c_size_t(0)
        position = log.mark()
        if not self._lib.llama_state_load_file(self.ptr, os.fsencode(path), arr, capacity, ctypes.byref(count)):
            raise LlamaStateException(
                f"could not load a state from {path}: "
                + "; ".join(log.problems_since(position) or ["not a state file for this model/context"]),
                {"path": str(path)},
            )
        return list(arr[: count.value])

    # -- performance -------------------------------------------------------------------------

    def perf(self) -> dict[str, float]:
        data = self._lib.llama_perf_context(self.ptr)
        return {name: float(getattr(data, name)) for name, _ in data._fields_}

    def perf_reset(self) -> None:
        self._lib.llama_perf_context_reset(self.ptr)


class Batch(NativeHandle):
    """A reusable ``llama_batch`` of up to ``capacity`` tokens for one sequence or several."""

    _kind = "batch"

    def __init__(self, context: Context, capacity: int, n_seq_max: int = 1) -> None:
        if capacity < 1:
            raise LlamaInferenceException("batch capacity must be at least 1", {"capacity": capacity})
        lib = context._lib
        self.struct = lib.llama_batch_init(capacity, 0, n_seq_max)
        if not self.struct.token:
            raise LlamaInferenceException("could not allocate a batch", {"capacity": capacity})
        # llama_batch_free takes the struct by value; keep it and free from it.
        super().__init__(1, lambda _p: lib.llama_batch_free(self.struct))
        self.capacity = capacity
        self.n_seq_max = n_seq_max

    @property
    def n_tokens(self) -> int:
        self.check_open()
        return int(self.struct.n_tokens)

    def clear(self) -> None:
        self.check_open()
        self.struct.n_tokens = 0

    def add(self, token: int, pos: int, seq_ids: Sequence[int] = (0,), logits: bool = False) -> None:
        self.check_open()
        i = self.struct.n_tokens
        if i >= self.capacity:
            raise LlamaInferenceException(f"batch is full ({self.capacity} tokens)", {"capacity": self.capacity})
        if not 1 <= len(seq_ids) <= self.n_seq_max:
            raise LlamaInferenceException(f"a token belongs to 1..{self.n_seq_max} sequences")
        s = self.struct
        s.token[i] = token
        s.pos[i] = pos
        s.n_seq_id[i] = len(seq_ids)
        for j, seq in enumerate(seq_ids):
            s.seq_id[i][j] = seq
        s.logits[i] = logits
        s.n_tokens = i + 1

    def set_sequence(self, tokens: Sequence[int], start_pos: int, seq_id: int = 0, logits_last: bool = True) -> None:
        """Fill with consecutive tokens of one sequence; only the last one outputs logits by default."""
        self.check_open()
        n = len(tokens)
        if n > self.capacity:
            raise LlamaInferenceException(f"{n} tokens exceed the batch capacity {self.capacity}")
        s = self.struct
        for i, tok in enumerate(tokens):
            s.token[i] = tok
            s.pos[i] = start_pos + i
            s.n_seq_id[i] = 1
            s.seq_id[i][0] = seq_id
            s.logits[i] = 0
        if n and logits_last:
            s.logits[n - 1] = 1
        s.n_tokens = n

