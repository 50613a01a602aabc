"""Model: a loaded GGUF file (weights + vocabulary + metadata), and Vocab, its tokenizer view."""

from __future__ import annotations

import ctypes
import functools
import operator
import os
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, SupportsIndex

from ..errors import LlamaArgumentException, LlamaInferenceException, LlamaModelException
from . import llama_h, log, rpc
from ._handle import SharedHandle
from ._library import native
from .devices import DeviceList, devices_named, local_default_devices
from .shim import ErrorBuffer
from .text import c_string, utf8
from .token_limit import tokenize_within

GGUF_MAGIC = b"GGUF"

ProgressCallback = Callable[[float], "bool | None"]


@dataclass(frozen=True)
class ModelLoadOptions:
    """The subset of ``llama_model_params`` llamact exposes.

    ``n_gpu_layers``: -1 offloads every layer when a GPU backend is compiled in (upstream default);
    ``vocab_only`` loads the tokenizer and metadata without weights.
    """

    n_gpu_layers: int = -1
    main_gpu: int = 0
    vocab_only: bool = False
    use_mmap: bool = True
    check_tensors: bool = False
    split_mode: str = "layer"                   # "none" (main_gpu only), "layer", "row", "tensor"
    tensor_split: tuple[float, ...] | None = None  # share of the model per device, in device order
    devices: tuple[str, ...] | None = None      # names from devices.list_devices(); None = llama.cpp's pick
    rpc_servers: tuple[str, ...] = ()           # "host:port" of ggml-rpc-servers to offload to


def _check_gguf_file(path: Path) -> None:
    """Fail early, with a precise message, on files llama.cpp would reject with a vague one."""
    if not path.exists():
        raise LlamaModelException(f"model file not found: {path}", {"path": str(path)})
    if not path.is_file():
        raise LlamaModelException(f"model path is not a file: {path}", {"path": str(path)})
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise LlamaModelException(f"cannot read model file {path}: {exc.strerror}", {"path": str(path)}) from exc
    if magic != GGUF_MAGIC:
        raise LlamaModelException(
            f"{path} is not a GGUF model file (it starts with {magic!r}, not b'GGUF'). "
            "llamact loads GGUF files; convert other formats with llama.cpp's convert_hf_to_gguf.py.",
            {"path": str(path), "magic": magic.hex()},
        )


def _read_c_string(call: Callable[[ctypes.Array[ctypes.c_char], int], int], what: str, size: int = 256) -> str | None:
    """Call a ``(buf, buf_size) -> needed length`` (snprintf-style, -1 = absent) function, growing
    the buffer once if needed. ``what`` names the value in the error a misbehaving call raises."""
    buf = ctypes.create_string_buffer(size)
    n = call(buf, size)
    if n < 0:
        return None
    if n >= size:
        size = n + 1
        buf = ctypes.create_string_buffer(size)
        n = call(buf, size)
    if not 0 <= n < size:
        raise LlamaModelException(
            f"llama.cpp reported inconsistent lengths reading {what} ({n} for a buffer of {size} bytes)",
            {"what": what, "length": n, "buffer": size},
        )
    return buf.raw[:n].decode("utf-8", errors="replace")


def _load_failure_reason(reasons: list[str]) -> str:
    """The informative lines of a failed load. llama.cpp ends every failure with generic lines
    ("failed to load model"); the specific cause (bad version, tensor out of bounds, ...) precedes them."""
    specific = [line.strip() for line in reasons if "failed to load model" not in line]
    if specific:
        return "; ".join(specific)
    return reasons[-1].strip() if reasons else "llama.cpp gave no reason"


_SPLIT_MODES = {
    "none": llama_h.LlamaSplitMode.NONE,
    "layer": llama_h.LlamaSplitMode.LAYER,
    "row": llama_h.LlamaSplitMode.ROW,
    "tensor": llama_h.LlamaSplitMode.TENSOR,
}


@dataclass
class _Placement:
    """The device fields of llama_model_params, with the C arrays they point into kept alive."""

    split_mode: int
    devices: DeviceList | None
    tensor_split: ctypes.Array[ctypes.c_float] | None


def _placement(options: ModelLoadOptions, max_devices: int) -> _Placement:
    """Check the device options and build what llama.cpp takes; llama.cpp asserts (aborts) on
    some of these, and silently reads past a short tensor_split array."""
    for name in ("n_gpu_layers", "main_gpu"):
        value = getattr(options, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < (-1 if name == "n_gpu_layers" else 0):
            low = "-1 (all layers)" if name == "n_gpu_layers" else "0"
            raise LlamaModelException(f"{name} must be an integer >= {low}, got {value!r}", {name: repr(value)})
    split_mode = _SPLIT_MODES.get(options.split_mode) if isinstance(options.split_mode, str) else None
    if split_mode is None:
        raise LlamaModelException(
            f"split_mode must be one of {', '.join(_SPLIT_MODES)}, got {options.split_mode!r}",
            {"split_mode": repr(options.split_mode)},
        )
    devices: DeviceList | None = None
    if options.devices is not None or options.rpc_servers:
        remote = rpc.rpc_devices(list(options.rpc_servers)) if options.rpc_servers else []
        local = devices_named(list(options.devices)) if options.devices is not None else local_default_devices()
        # RPC servers first, as llama.cpp's own default selection orders them.
        devices = DeviceList([*remote, *[d for d in local.array[: len(local)] if d]])
    elif rpc.any_registered():
        devices = local_default_devices()
    n_devices = len(devices if devices is not None else local_default_devices())
    if split_mode == llama_h.LlamaSplitMode.NONE and 0 < n_devices <= options.main_gpu:
        raise LlamaModelException(
            f"main_gpu {options.main_gpu} is out of range: the model uses {n_devices} device(s)",
            {"main_gpu": options.main_gpu, "devices": n_devices},
        )
    tensor_split = None
    if options.tensor_split is not None:
        shares = list(options.tensor_split)
        limit = min(max_devices, max(n_devices, 1))  # one share is harmless on a CPU-only build
        if not shares or len(shares) > limit or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x < float("inf") for x in shares
        ) or not sum(shares) > 0:
            raise LlamaModelException(
                f"tensor_split must hold 1..{limit} non-negative shares (one per device, not all zero), "
                f"got {options.tensor_split!r}",
                {"tensor_split": repr(options.tensor_split), "max": limit},
            )
        tensor_split = (ctypes.c_float * max_devices)(*shares)
    return _Placement(int(split_mode), devices, tensor_split)


class Model(SharedHandle):
    """A loaded model. Free with ``close()`` or a ``with`` block; closing also closes its contexts."""

    _kind = "model"

    def __init__(
        self,
        path: str | os.PathLike[str],
        options: ModelLoadOptions | None = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        self.path = Path(path)
        _check_gguf_file(self.path)
        options = options or ModelLoadOptions()
        lib = native()
        params = lib.llama.llama_model_default_params()
        placement = _placement(options, int(lib.llama.llama_max_devices()))
        params.n_gpu_layers = options.n_gpu_layers
        params.main_gpu = options.main_gpu
        params.split_mode = placement.split_mode
        if placement.devices is not None:
            params.devices = placement.devices.pointer
        if placement.tensor_split is not None:
            params.tensor_split = placement.tensor_split
        params.vocab_only = options.vocab_only
        params.check_tensors = options.check_tensors
        if not options.use_mmap:
            params.load_mode = llama_h.LlamaLoadMode.NONE

        callback_error: list[BaseException] = []
        cancelled = [False]

        def on_progress(fraction: float, _user: object) -> bool:
            if progress is None:
                return True
            try:
                keep_going = progress(float(fraction)) is not False
            except BaseException as exc:  # noqa: BLE001 - must not unwind through C
                callback_error.append(exc)
                return False
            if not keep_going:
                cancelled[0] = True
            return keep_going

        c_callback = llama_h.llama_progress_callback(on_progress)
        params.progress_callback = c_callback
        params.progress_callback_user_data = None

        err = ErrorBuffer()
        if lib.shim.llamact_gguf_tensor_problem(os.fsencode(self.path), *err.args):
            raise LlamaModelException(
                f"{self.path} is damaged: {err.message}. Compare its size and checksum with the source.",
                {"path": str(self.path)},
            )
        position = log.mark()
        ptr = lib.llama.llama_model_load_from_file(os.fsencode(self.path), params)
        if callback_error:
            if ptr:
                lib.llama.llama_model_free(ptr)
            raise callback_error[0]
        if not ptr:
            if cancelled[0]:
                raise LlamaModelException(
                    f"loading {self.path} was cancelled by the progress callback", {"path": str(self.path)}
                )
            reasons = log.problems_since(position)
            reason = _load_failure_reason(reasons)
            raise LlamaModelException(
                f"llama.cpp could not load {self.path}: {reason}. The file may be truncated or "
                "corrupt (compare its size and checksum with the source), or use an architecture "
                "the pinned llama.cpp (v0.5.0) does not support.",
                {"path": str(self.path), "native_log": reasons},
            )
        super().__init__(ptr, lib.llama.llama_model_free)
        self._lib = lib.llama
        self.options = options
        self._vocab_ptr = int(lib.llama.llama_model_get_vocab(ptr))
        self._n_vocab = int(lib.llama.llama_vocab_n_tokens(self._vocab_ptr))
        # The model's Vocab holds the model; the model only remembers it weakly. A strong reference
        # both ways would be a cycle, leaving the weights to the cyclic collector instead of
        # freeing them when the last reference goes.
        self._vocab_ref: Callable[[], Vocab | None] = _no_vocab

    @property
    def vocab(self) -> Vocab:
        """The model's tokenizer (the same object while anyone holds it)."""
        vocab = self._vocab_ref()
        if vocab is None:
            vocab = Vocab(self)
            self._vocab_ref = weakref.ref(vocab)
        return vocab

    # -- facts about the model ------------------------------------------------------------

    def _int(self, fn: str) -> int:
        with self.pinned() as ptr:
            return int(getattr(self._lib, fn)(ptr))

    @property
    def description(self) -> str:
        with self.pinned() as ptr:
            return _read_c_string(lambda b, n: self._lib.llama_model_desc(ptr, b, n), "the model description") or ""

    @property
    def ftype_name(self) -> str:
        """The weights' type as llama.cpp names it (e.g. "Q4_1"; llama-server's ``model_ftype``)."""
        name = self._lib.llama_ftype_name(self._int("llama_model_ftype"))
        return name.decode("utf-8", errors="replace") if name else ""

    @property
    def size_bytes(self) -> int:
        return self._int("llama_model_size")

    @property
    def n_params(self) -> int:
        return self._int("llama_model_n_params")

    @property
    def n_ctx_train(self) -> int:
        return self._int("llama_model_n_ctx_train")

    @property
    def n_embd(self) -> int:
        return self._int("llama_model_n_embd")

    @property
    def n_layer(self) -> int:
        return self._int("llama_model_n_layer")

    @property
    def has_encoder(self) -> bool:
        return bool(self._int("llama_model_has_encoder"))

    @property
    def keeps_recurrent_state(self) -> bool:
        """Recurrent or hybrid (llama_model_is_recurrent / _is_hybrid): its memory cannot drop the
        last positions of a sequence, only the whole sequence."""
        with self.pinned() as ptr:
            return bool(self._lib.llama_model_is_recurrent(ptr) or self._lib.llama_model_is_hybrid(ptr))

    @property
    def has_decoder(self) -> bool:
        return bool(self._int("llama_model_has_decoder"))

    def metadata(self) -> dict[str, str]:
        """Every GGUF key/value as llama.cpp renders it (scalars as text, arrays abbreviated)."""
        out: dict[str, str] = {}
        lib = self._lib
        with self.pinned() as ptr:
            for i in range(int(lib.llama_model_meta_count(ptr))):
                key = _read_c_string(functools.partial(lib.llama_model_meta_key_by_index, ptr, i), f"metadata key {i}")
                value = _read_c_string(
                    functools.partial(lib.llama_model_meta_val_str_by_index, ptr, i), f"metadata value {i}", 4096
                )
                if key is not None and value is not None:
                    out[key] = value
        return out

    def metadata_value(self, key: str) -> str | None:
        raw_key = c_string(key, "the metadata key", LlamaModelException)
        with self.pinned() as ptr:
            return _read_c_string(
                lambda b, n: self._lib.llama_model_meta_val_str(ptr, raw_key, b, n), f"metadata {key!r}", 4096
            )

    def template_source(self, name: str | None = None) -> str | None:
        """The embedded chat template's Jinja source (``tokenizer.chat_template``) or a named variant's
        (``tool_use``); None when the file has none."""
        raw_name = c_string(name, "the chat template name", LlamaModelException) if name else None
        with self.pinned() as ptr:
            raw = self._lib.llama_model_chat_template(ptr, raw_name)
            return raw.decode("utf-8", errors="replace") if raw is not None else None

    def apply_builtin_chat_template(
        self, template: str, messages: Sequence[tuple[str, str]], add_generation_prompt: bool = True
    ) -> str | None:
        """``(role, content)`` messages formatted by llama.cpp's built-in (non-Jinja) formatter,
        which recognises well-known templates by their text; None when it does not recognise this
        one. Text holding a NUL or a lone surrogate raises LlamaArgumentException (a request error)."""
        template_raw = c_string(template, "the chat template")
        encoded = [
            (c_string(role, f"the role of message {i}"), c_string(content, f"the content of message {i}"))
            for i, (role, content) in enumerate(messages)
        ]
        chat = (llama_h.llama_chat_message * len(encoded))()
        for i, (role, content) in enumerate(encoded):
            chat[i].role = role
            chat[i].content = content
        size = 2 * sum(len(r) + len(c) for r, c in encoded) + len(template_raw) + 256
        buf = ctypes.create_string_buffer(size)
        with self.pinned():  # the formatter does not use the model; open-ness is the contract
            apply = self._lib.llama_chat_apply_template
            n = apply(template_raw, chat, len(encoded), add_generation_prompt, buf, size)
            if n > size:
                size = n
                buf = ctypes.create_string_buffer(size)
                n = apply(template_raw, chat, len(encoded), add_generation_prompt, buf, size)
        if n < 0:
            return None
        if n > size:
            raise LlamaInferenceException(
                f"llama.cpp reported inconsistent lengths formatting the chat ({n} for {size} bytes)", {"length": n}
            )
        return buf.raw[:n].decode("utf-8", errors="replace")


def _no_vocab() -> Vocab | None:
    return None


def _bad_token(value: object, n_tokens: int) -> LlamaArgumentException:
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        return LlamaArgumentException(
            f"token ids are integers; got {value!r} ({type(value).__name__})",
            {"token": repr(value), "n_tokens": n_tokens},
        )
    token = operator.index(value)
    return LlamaArgumentException(
        f"token id {token} is outside this vocabulary (0..{n_tokens - 1})", {"token": token, "n_tokens": n_tokens}
    )


def _token_id(value: object, n_tokens: int) -> int:
    """``value`` as a token id of a vocabulary of ``n_tokens``: an int (or anything with
    ``__index__``, e.g. a numpy integer; not a bool) in range, else LlamaArgumentException."""
    if type(value) is int and 0 <= value < n_tokens:   # the per-token case: isinstance on a Protocol costs ~5 µs
        return value
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        raise _bad_token(value, n_tokens)
    token = operator.index(value)
    if not 0 <= token < n_tokens:
        raise _bad_token(token, n_tokens)
    return token


class Vocab:
    """The model's tokenizer. Keeps its model alive, and refuses use after the model closes."""

    def __init__(self, model: Model) -> None:
        self._model = model
        self._lib = model._lib
        self._vocab = model._vocab_ptr
        self._n_tokens = model._n_vocab

    @property
    def model(self) -> Model:
        """The model this vocabulary belongs to."""
        return self._model

    @property
    def ptr(self) -> int:
        """The native vocabulary; only safe to pass to C inside ``with vocab.pinned():``."""
        self._model.check_open()
        return self._vocab

    def pinned(self) -> Any:
        """``with vocab.pinned():`` the vocabulary (its model's memory) is not freed in the block."""
        return self._model.pinned()

    @property
    def n_tokens(self) -> int:
        self._model.check_open()
        return self._n_tokens

    def _call(self, fn: str, *args: Any) -> Any:
        with self._model.pinned():
            return getattr(self._lib, fn)(self._vocab, *args)

    @property
    def type(self) -> int:
        return int(self._call("llama_vocab_type"))

    def _special(self, fn: str) -> int | None:
        tok = int(self._call(fn))
        return None if tok == llama_h.LLAMA_TOKEN_NULL else tok

    @property
    def bos(self) -> int | None:
        return self._special("llama_vocab_bos")

    @property
    def eos(self) -> int | None:
        return self._special("llama_vocab_eos")

    @property
    def eot(self) -> int | None:
        return self._special("llama_vocab_eot")

    def fim(self, kind: str) -> int | None:
        """A fill-in-the-middle token: ``kind`` one of pre, suf, mid, pad, rep, sep (None: the model has none)."""
        if kind not in ("pre", "suf", "mid", "pad", "rep", "sep"):
            raise ValueError(f"no FIM token kind {kind!r}")
        return self._special(f"llama_vocab_fim_{kind}")

    @property
    def add_bos(self) -> bool:
        return bool(self._call("llama_vocab_get_add_bos"))

    @property
    def add_eos(self) -> bool:
        return bool(self._call("llama_vocab_get_add_eos"))

    @property
    def sep(self) -> int | None:
        return self._special("llama_vocab_sep")

    @property
    def add_sep(self) -> bool:
        return bool(self._call("llama_vocab_get_add_sep"))

    def suppress_tokens(self) -> tuple[int, ...]:
        """Tokens the model says never to generate (GGUF ``tokenizer.ggml.suppress_tokens``); upstream's
        sampler bans them with a -inf logit bias."""
        count = ctypes.c_int32(0)
        with self._model.pinned():
            ptr = self._lib.llama_vocab_get_suppress_tokens(self._vocab, ctypes.byref(count))
            return tuple(ptr[i] for i in range(count.value)) if ptr and count.value > 0 else ()

    def token_ids(self, tokens: Iterable[object]) -> list[int]:
        """``tokens`` as a list of token ids of this vocabulary; raises LlamaArgumentException
        naming the first one that is not an integer in range."""
        self._model.check_open()
        ids = list(tokens)
        n = self._n_tokens
        if all(type(t) is int for t in ids) and (not ids or (min(ids) >= 0 and max(ids) < n)):  # type: ignore[type-var, operator]
            return ids  # type: ignore[return-value]
        return [_token_id(t, n) for t in ids]

    def _check_token(self, token: object) -> int:
        self._model.check_open()
        return _token_id(token, self._n_tokens)

    def is_eog(self, token: int) -> bool:
        return bool(self._call("llama_vocab_is_eog", self._check_token(token)))

    def is_control(self, token: int) -> bool:
        return bool(self._call("llama_vocab_is_control", self._check_token(token)))

    def text(self, token: int) -> str:
        """The token's text as stored in the vocabulary (e.g. with SentencePiece's ▁)."""
        raw = self._call("llama_vocab_get_text", self._check_token(token))
        return raw.decode("utf-8", errors="replace") if raw else ""

    def attributes(self, token: int) -> llama_h.LlamaTokenAttr:
        return llama_h.LlamaTokenAttr(int(self._call("llama_vocab_get_attr", self._check_token(token))))

    def tokenize(self, text: str | bytes, add_special: bool = True, parse_special: bool = False,
                 limit: int | None = None) -> list[int]:
        """Text -> token ids. ``add_special`` adds BOS/EOS as the model asks; ``parse_special``
        turns special-token text such as ``<|im_start|>`` into its token. With ``limit``, a text of
        more tokens raises :class:`~llamact.errors.LlamaTokenLimitException`, counted without
        tokenizing all of a huge text (see that module)."""
        raw = utf8(text, "the text to tokenize") if isinstance(text, str) else bytes(text)
        if limit is not None:
            return tokenize_within(lambda part: self._tokenize(part, add_special, parse_special), raw, limit)
        return self._tokenize(raw, add_special, parse_special)

    def _tokenize(self, raw: bytes, add_special: bool, parse_special: bool) -> list[int]:
        if len(raw) > 2**31 - 16:
            raise LlamaArgumentException("text is too long to tokenize (over 2 GiB)", {"bytes": len(raw)})
        capacity = len(raw) + 8
        buf = (llama_h.llama_token * capacity)()
        with self._model.pinned():
            tokenize = self._lib.llama_tokenize
            n = tokenize(self._vocab, raw, len(raw), buf, capacity, add_special, parse_special)
            if n < 0:
                capacity = -n
                buf = (llama_h.llama_token * capacity)()
                n = tokenize(self._vocab, raw, len(raw), buf, capacity, add_special, parse_special)
        if not 0 <= n <= capacity:
            raise LlamaInferenceException(
                f"tokenization failed (llama.cpp returned {n} for room for {capacity} tokens)", {"bytes": len(raw)}
            )
        return buf[:n]   # a ctypes slice is already a list

    def token_to_piece(self, token: int, special: bool = False, lstrip: int = 0) -> bytes:
        """One token's bytes. A piece may be part of a UTF-8 sequence; join before decoding."""
        token = self._check_token(token)
        size = 64
        buf = ctypes.create_string_buffer(size)
        with self._model.pinned():
            to_piece = self._lib.llama_token_to_piece
            n = to_piece(self._vocab, token, buf, size, lstrip, special)
            if n < 0:
                size = -n
                buf = ctypes.create_string_buffer(size)
                n = to_piece(self._vocab, token, buf, size, lstrip, special)
        if not 0 <= n <= size:
            raise LlamaInferenceException(
                f"llama.cpp could not render token {token} (it returned {n} for a {size}-byte buffer)",
                {"token": token, "length": n},
            )
        return buf.raw[:n]

    def detokenize(self, tokens: Iterable[int], remove_special: bool = False, unparse_special: bool = False) -> str:
        ids = self.token_ids(tokens)
        arr = (llama_h.llama_token * len(ids))(*ids)
        capacity = max(16, len(ids) * 8)
        buf = ctypes.create_string_buffer(capacity)
        with self._model.pinned():
            detokenize = self._lib.llama_detokenize
            n = detokenize(self._vocab, arr, len(ids), buf, capacity, remove_special, unparse_special)
            if n < 0:
                capacity = -n
                buf = ctypes.create_string_buffer(capacity)
                n = detokenize(self._vocab, arr, len(ids), buf, capacity, remove_special, unparse_special)
        if not 0 <= n <= capacity:
            raise LlamaInferenceException(
                f"detokenization failed (llama.cpp returned {n} for a {capacity}-byte buffer)",
                {"n_tokens": len(ids), "length": n},
            )
        return buf.raw[:n].decode("utf-8", errors="replace")
