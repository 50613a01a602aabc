"""Model: a loaded GGUF file (weights + vocabulary + metadata), and Vocab, its tokenizer view."""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import LlamaException, LlamaInferenceException, LlamaModelException
from . import llama_h, log
from ._handle import NativeHandle
from ._library import native

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


def _read_c_string(call: Callable[[ctypes.Array[ctypes.c_char], int], int], size: int = 256) -> str | None:
    """Call a ``(buf, buf_size) -> needed length`` style function, growing the buffer if needed."""
    buf = ctypes.create_string_buffer(size)
    n = call(buf, size)
    if n < 0:
        return None
    if n >= size:
        buf = ctypes.create_string_buffer(n + 1)
        n = call(buf, n + 1)
    return buf.raw[:n].decode("utf-8", errors="replace")


def _load_failure_reason(reasons: list[str]) -> str:
    """The informative lines of a failed load. llama.cpp ends every failure with generic lines
    ("failed to load model"); the specific cause (bad version, tensor out of bounds, ...) precedes them."""
    specific = [line.strip() for line in reasons if "failed to load model" not in line]
    if specific:
        return "; ".join(specific)
    return reasons[-1].strip() if reasons else "llama.cpp gave no reason"


class Model(NativeHandle):
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
        params.n_gpu_layers = options.n_gpu_layers
        params.main_gpu = options.main_gpu
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
        self.vocab = Vocab(self)

    # -- facts about the model ------------------------------------------------------------

    @property
    def description(self) -> str:
        ptr = self.ptr
        return _read_c_string(lambda b, n: self._lib.llama_model_desc(ptr, b, n)) or ""

    @property
    def size_bytes(self) -> int:
        return int(self._lib.llama_model_size(self.ptr))

    @property
    def n_params(self) -> int:
        return int(self._lib.llama_model_n_params(self.ptr))

    @property
    def n_ctx_train(self) -> int:
        return int(self._lib.llama_model_n_ctx_train(self.ptr))

    @property
    def n_embd(self) -> int:
        return int(self._lib.llama_model_n_embd(self.ptr))

    @property
    def n_layer(self) -> int:
        return int(self._lib.llama_model_n_layer(self.ptr))

    @property
    def has_encoder(self) -> bool:
        return bool(self._lib.llama_model_has_encoder(self.ptr))

    @property
    def has_decoder(self) -> bool:
        return bool(self._lib.llama_model_has_decoder(self.ptr))

    def metadata(self) -> dict[str, str]:
        """Every GGUF key/value as llama.cpp renders it (scalars as text, arrays abbreviated)."""
        ptr = self.ptr
        out: dict[str, str] = {}
        lib = self._lib
        for i in range(int(lib.llama_model_meta_count(ptr))):
            key = _read_c_string(functools.partial(lib.llama_model_meta_key_by_index, ptr, i))
            value = _read_c_string(functools.partial(lib.llama_model_meta_val_str_by_index, ptr, i), 4096)
            if key is not None and value is not None:
                out[key] = value
        return out

    def metadata_value(self, key: str) -> str | None:
        ptr = self.ptr
        raw_key = key.encode()
        return _read_c_string(lambda b, n: self._lib.llama_model_meta_val_str(ptr, raw_key, b, n), 4096)

    def chat_template(self, name: str | None = None) -> str | None:
        """The embedded chat template (``tokenizer.chat_template``) or a named variant (``tool_use``)."""
        raw = self._lib.llama_model_chat_template(self.ptr, name.encode() if name else None)
        return raw.decode("utf-8", errors="replace") if raw is not None else None


class Vocab:
    """The model's tokenizer. Lives as long as its model; refuses use after the model closes."""

    def __init__(self, model: Model) -> None:
        self._model = model
        self._lib = model._lib
        self._ptr_cache = model._lib.llama_model_get_vocab(model.ptr)

    @property
    def ptr(self) -> int:
        self._model.check_open()
        return int(self._ptr_cache)

    @property
    def n_tokens(self) -> int:
        return int(self._lib.llama_vocab_n_tokens(self.ptr))

    @property
    def type(self) -> int:
        return int(self._lib.llama_vocab_type(self.ptr))

    def _special(self, fn: str) -> int | None:
        tok = int(getattr(self._lib, fn)(self.ptr))
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

    @property
    def add_bos(self) -> bool:
        return bool(self._lib.llama_vocab_get_add_bos(self.ptr))

    @property
    def add_eos(self) -> bool:
        return bool(self._lib.llama_vocab_get_add_eos(self.ptr))

    def _check_token(self, token: int) -> None:
        if not 0 <= token < self.n_tokens:
            raise LlamaInferenceException(
                f"token id {token} is outside this vocabulary (0..{self.n_tokens - 1})",
                {"token": token, "n_tokens": self.n_tokens},
            )

    def is_eog(self, token: int) -> bool:
        self._check_token(token)
        return bool(self._lib.llama_vocab_is_eog(self.ptr, token))

    def is_control(self, token: int) -> bool:
        self._check_token(token)
        return bool(self._lib.llama_vocab_is_control(self.ptr, token))

    def text(self, token: int) -> str:
        """The token's text as stored in the vocabulary (e.g. with SentencePiece's ▁)."""
        self._check_token(token)
        raw = self._lib.llama_vocab_get_text(self.ptr, token)
        return raw.decode("utf-8", errors="replace") if raw else ""

    def attributes(self, token: int) -> llama_h.LlamaTokenAttr:
        self._check_token(token)
        return llama_h.LlamaTokenAttr(int(self._lib.llama_vocab_get_attr(self.ptr, token)))

    def tokenize(self, text: str | bytes, add_special: bool = True, parse_special: bool = False) -> list[int]:
        """Text -> token ids. ``add_special`` adds BOS/EOS as the model asks; ``parse_special``
        turns special-token text such as ``<|im_start|>`` into its token."""
        try:
            raw = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        except UnicodeEncodeError as exc:
            raise LlamaInferenceException(
                f"the text cannot be tokenized: it holds {text[exc.start:exc.end]!r} at position {exc.start}, "
                "a lone surrogate that is not Unicode text (decode input bytes with errors='replace')",
                {"position": exc.start},
            ) from exc
        if len(raw) > 2**31 - 16:
            raise LlamaInferenceException("text is too long to tokenize (over 2 GiB)", {"bytes": len(raw)})
        capacity = len(raw) + 8
        buf = (llama_h.llama_token * capacity)()
        n = self._lib.llama_tokenize(self.ptr, raw, len(raw), buf, capacity, add_special, parse_special)
        if n < 0:
            capacity = -n
            buf = (llama_h.llama_token * capacity)()
            n = self._lib.llama_tokenize(self.ptr, raw, len(raw), buf, capacity, add_special, parse_special)
        if n < 0:
            raise LlamaInferenceException("tokenization failed", {"bytes": len(raw)})
        return list(buf[:n])

    def token_to_piece(self, token: int, special: bool = False, lstrip: int = 0) -> bytes:
        """One token's bytes. A piece may be part of a UTF-8 sequence; join before decoding."""
        self._check_token(token)
        buf = ctypes.create_string_buffer(64)
        n = self._lib.llama_token_to_piece(self.ptr, token, buf, 64, lstrip, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self._lib.llama_token_to_piece(self.ptr, token, buf, -n, lstrip, special)
        return buf.raw[:n]

    def detokenize(self, tokens: Iterable[int], remove_special: bool = False, unparse_special: bool = False) -> str:
        ids = list(tokens)
        for tok in ids:
            self._check_token(tok)
        arr = (llama_h.llama_token * len(ids))(*ids)
        capacity = max(16, len(ids) * 8)
        buf = ctypes.create_string_buffer(capacity)
        n = self._lib.llama_detokenize(self.ptr, arr, len(ids), buf, capacity, remove_special, unparse_special)
        if n < 0:
            capacity = -n
            buf = ctypes.create_string_buffer(capacity)
            n = self._lib.llama_detokenize(self.ptr, arr, len(ids), buf, capacity, remove_special, unparse_special)
        if n < 0:
            raise LlamaException("detokenization failed")
        return buf.raw[:n].decode("utf-8", errors="replace")
