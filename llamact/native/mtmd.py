"""libmtmd: a model's multimodal projector, media bitmaps, prompts tokenized into text and media chunks.

    projector = Projector(model, "mmproj.gguf", ProjectorOptions(n_threads=4))
    projector.supports_vision, projector.supports_audio, projector.uses_mrope
    probe = probe_media(data, projector.audio_sample_rate)     # kind and size from the header alone
    bitmap = projector.bitmap(data)                            # decoded; its id is the SHA-256 of data
    chunks = projector.tokenize(prompt, [bitmap])              # text and media chunks, in order
    encoder = MediaEncoder(projector); encoder.evaluate(context, chunks, index, n_past, seq_id)

What enters: the text model (a ``Model``), an mmproj GGUF, media bytes, a prompt holding one marker
per medium. What leaves: owning handles (``Projector``, ``Bitmap``, ``InputChunks``, ``MediaEncoder``)
and the media's embeddings decoded into a context's sequence at the right positions (M-RoPE
included: mtmd places them). Raised: ``LlamaModelException`` (a projector mtmd refuses, e.g. one made
for another text model), ``LlamaInferenceException`` (media mtmd cannot decode or encode, a failed
decode), ``LlamaStateException`` after close.

Every call that runs mtmd's C++ goes through the shim (src/shim/media.cpp: exceptions stop there);
plain getters are called directly. A projector belongs to its model (closed before it); chunks and
encoders belong to their projector.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import LlamaInferenceException, LlamaModelException
from . import forks, log
from ._handle import NativeHandle
from ._library import native
from .context import Context
from .model import GGUF_MAGIC, Model
from .shim import ErrorBuffer

__all__ = [
    "CHUNK_AUDIO", "CHUNK_IMAGE", "CHUNK_TEXT", "Bitmap", "InputChunks", "MEDIA_AUDIO", "MEDIA_IMAGE", "MediaEncoder",
    "MediaProbe", "Projector", "ProjectorOptions", "probe_media",
]

_p = ctypes.c_void_p

CHUNK_TEXT, CHUNK_IMAGE, CHUNK_AUDIO = 0, 1, 2   # enum mtmd_input_chunk_type
MEDIA_IMAGE, MEDIA_AUDIO = 1, 2                  # llamact_media_probe's kinds (0: neither)


@dataclass(frozen=True)
class MediaProbe:
    """What mtmd would make of some bytes, read from their header: ``kind`` MEDIA_IMAGE (``width`` x
    ``height`` pixels), MEDIA_AUDIO (``frames`` samples at the rate asked for, 0 when not asked) or 0."""

    kind: int
    width: int = 0
    height: int = 0
    frames: int = 0


def probe_media(data: bytes, sample_rate: int = 0) -> MediaProbe:
    """Classify ``data`` and read its size without decoding it (a decompression bomb is refused before
    its pixels or samples are allocated). ``sample_rate`` > 0 also counts an audio stream's frames at
    that rate, as mtmd would resample it."""
    shim = native().shim
    kind, width, height = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int32()
    frames = ctypes.c_uint64()
    err = ErrorBuffer()
    rc = shim.llamact_media_probe(data, len(data), sample_rate, ctypes.byref(kind), ctypes.byref(width),
                                  ctypes.byref(height), ctypes.byref(frames), *err.args)
    if rc != 0:
        raise LlamaInferenceException(f"could not read the media header: {err.message}")
    return MediaProbe(kind.value, width.value, height.value, frames.value)


@dataclass(frozen=True)
class ProjectorOptions:
    """How the projector runs: llama-server's settings for its --mmproj (server-context.cpp)."""

    use_gpu: bool = True            # --no-mmproj-offload turns it off
    n_threads: int = 4
    flash_attn: bool | None = None  # None: llama.cpp decides (auto)
    warmup: bool = True             # one encode at load, so the first image is not slower
    image_min_tokens: int = -1      # -1: from the projector's metadata (dynamic-resolution models)
    image_max_tokens: int = -1
    media_marker: str = ""          # "": mtmd's default, "<__media__>"


class Projector(NativeHandle):
    """A multimodal projector (mmproj GGUF) for ``model``: encodes images and audio into embeddings
    the text model reads. Refused with LlamaModelException when the file is not a projector or was
    made for a text model of another embedding width."""

    _kind = "multimodal projector"

    def __init__(self, model: Model, path: str | os.PathLike[str], options: ProjectorOptions | None = None) -> None:
        options = options or ProjectorOptions()
        self.path = Path(path)
        try:
            with self.path.open("rb") as fh:
                magic = fh.read(4)
        except OSError as exc:
            raise LlamaModelException(f"cannot read the multimodal projector {self.path}: {exc.strerror}",
                                      {"path": str(self.path)}) from exc
        if magic != GGUF_MAGIC:
            raise LlamaModelException(f"{self.path} is not a GGUF file (it starts with {magic!r}): an mmproj is "
                                      "the projector GGUF published beside a vision or audio model",
                                      {"path": str(self.path)})
        lib = native()
        self._mtmd = lib.mtmd
        self._shim = lib.shim
        flash = -1 if options.flash_attn is None else int(bool(options.flash_attn))   # llama_flash_attn_type
        forks.refuse(options.n_threads, "a multimodal projector on several threads")
        if options.warmup:
            forks.mark(options.n_threads)
        err = ErrorBuffer()
        position = log.mark()
        with model.pinned() as model_ptr:
            ptr = self._shim.llamact_mtmd_init(
                os.fsencode(self.path), model_ptr, int(options.use_gpu), options.n_threads, flash,
                int(options.warmup), options.image_min_tokens, options.image_max_tokens,
                options.media_marker.encode() or None, *err.args)
            if not ptr:
                reasons = [err.message] if err.message else log.problems_since(position)
                raise LlamaModelException(
                    f"mtmd could not load the multimodal projector {self.path} for {model.path.name}: "
                    + ("; ".join(reasons) if reasons else "no reason given")
                    + " (an mmproj must be the one made for this model: its projection width is the model's "
                    f"embedding width, {model.n_embd})",
                    {"path": str(self.path), "native_log": reasons},
                )
            super().__init__(ptr, self._mtmd.mtmd_free)
            self.model = model
            self.n_threads = options.n_threads
            forks.watch(self, options.n_threads)
            model._adopt(self)
            self.supports_vision = bool(self._mtmd.mtmd_support_vision(ptr))
            self.supports_audio = bool(self._mtmd.mtmd_support_audio(ptr))
            self.uses_mrope = bool(self._mtmd.mtmd_decode_use_mrope(ptr))
            self.audio_sample_rate = int(self._mtmd.mtmd_get_audio_sample_rate(ptr))
            self.marker = (self._mtmd.mtmd_get_marker(ptr) or b"").decode()

    def bitmap(self, data: bytes) -> Bitmap:
        """``data`` (an image or audio file's bytes) decoded as llama-server decodes it; its id is the
        SHA-256 of ``data``. LlamaInferenceException when mtmd cannot decode it."""
        err = ErrorBuffer()
        position = log.mark()
        with self.pinned() as ptr:
            bitmap = self._shim.llamact_mtmd_bitmap_from_buf(ptr, data, len(data), *err.args)
        if not bitmap:
            reasons = [err.message] if err.message else log.problems_since(position)
            raise LlamaInferenceException(
                "mtmd could not decode the media: " + ("; ".join(reasons) if reasons else "no reason given"),
                {"native_log": reasons})
        return Bitmap(self, bitmap)

    def tokenize(self, text: str, bitmaps: Sequence[Bitmap], add_special: bool = True,
                 parse_special: bool = True) -> InputChunks:
        """``text`` with one marker per bitmap (``marker``), as text and media chunks in order."""
        encoded = text.encode("utf-8")
        array = (_p * max(1, len(bitmaps)))(*[b.ptr for b in bitmaps])
        err = ErrorBuffer()
        position = log.mark()
        chunks = InputChunks(self, self._mtmd.mtmd_input_chunks_init())
        try:
            with self.pinned() as ptr, chunks.pinned() as chunks_ptr:
                rc = self._shim.llamact_mtmd_tokenize(ptr, chunks_ptr, encoded, len(encoded), int(add_special),
                                                      int(parse_special), array, len(bitmaps), *err.args)
            if rc != 0:
                reasons = [err.message] if err.message else log.problems_since(position)
                what = ("the prompt's media markers and the media do not pair up" if rc == 1
                        else "mtmd could not prepare the media")
                raise LlamaInferenceException(f"{what}: " + ("; ".join(reasons) if reasons else f"code {rc}"),
                                              {"code": rc, "native_log": reasons})
        except BaseException:
            chunks.close()
            raise
        return chunks


class Bitmap(NativeHandle):
    """A decoded image (RGB pixels) or audio clip (mono float samples) of a projector."""

    _kind = "media bitmap"

    def __init__(self, projector: Projector, ptr: int) -> None:
        mtmd = projector._mtmd
        super().__init__(ptr, mtmd.mtmd_bitmap_free)
        with projector.pinned():
            projector._adopt(self)
        self.is_audio = bool(mtmd.mtmd_bitmap_is_audio(ptr))
        self.width = int(mtmd.mtmd_bitmap_get_nx(ptr))
        self.height = int(mtmd.mtmd_bitmap_get_ny(ptr))
        self.id = (mtmd.mtmd_bitmap_get_id(ptr) or b"").decode()


@dataclass(frozen=True)
class Chunk:
    """One chunk of a tokenized prompt: text (``tokens``) or a medium (``n_tokens`` embeddings over
    ``n_pos`` positions, ``id`` the SHA-256 of its bytes); ``ptr`` lives as long as its InputChunks."""

    kind: int
    tokens: tuple[int, ...]
    n_tokens: int
    n_pos: int
    id: str
    ptr: int


class InputChunks(NativeHandle):
    """A tokenized prompt (``mtmd_input_chunks``): ``chunks()`` reads them, in order."""

    _kind = "tokenized media prompt"

    def __init__(self, projector: Projector, ptr: int) -> None:
        if not ptr:
            raise MemoryError("mtmd_input_chunks_init failed")
        self._mtmd = projector._mtmd
        super().__init__(ptr, self._mtmd.mtmd_input_chunks_free)
        with projector.pinned():
            projector._adopt(self)

    def chunks(self) -> list[Chunk]:
        mtmd = self._mtmd
        out: list[Chunk] = []
        with self.pinned() as ptr:
            for i in range(int(mtmd.mtmd_input_chunks_size(ptr))):
                chunk = mtmd.mtmd_input_chunks_get(ptr, i)
                kind = int(mtmd.mtmd_input_chunk_get_type(chunk))
                if kind == CHUNK_TEXT:
                    n = ctypes.c_size_t(0)
                    data = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
                    tokens = tuple(data[: n.value]) if n.value else ()
                    out.append(Chunk(kind, tokens, len(tokens), len(tokens), "", chunk))
                else:
                    out.append(Chunk(kind, (), int(mtmd.mtmd_input_chunk_get_n_tokens(chunk)),
                                     int(mtmd.mtmd_input_chunk_get_n_pos(chunk)),
                                     (mtmd.mtmd_input_chunk_get_id(chunk) or b"").decode(), chunk))
        return out


class MediaEncoder(NativeHandle):
    """Encodes media chunks and decodes their embeddings into a context, as llama-server does: a
    medium's encode also encodes the media after it that mtmd can batch with it (one graph), and
    those are then decoded from the batch without encoding again."""

    _kind = "media encoder"

    def __init__(self, projector: Projector) -> None:
        self._projector = projector
        self._mtmd = projector._mtmd
        self._shim = projector._shim
        with projector.pinned() as ptr:
            batch = self._mtmd.mtmd_batch_init(ptr)
            if not batch:
                raise MemoryError("mtmd_batch_init failed")
            super().__init__(batch, self._mtmd.mtmd_batch_free)
            projector._adopt(self)
        self._holds: tuple[int, ...] = ()

    def evaluate(self, context: Context, media: Sequence[Chunk], n_past: int, seq_id: int = 0) -> int | None:
        """Decode ``media[0]``'s embeddings into ``seq_id`` from position ``n_past``; returns the position
        after it, or None when an abort request (``Context.request_abort``) stopped the decode. ``media``
        lists the prompt's media chunks from this one on (encoded together when this one is not encoded
        yet). LlamaInferenceException when it fails; LlamaContextException when the context is full."""
        chunk = media[0]
        if chunk.kind not in (CHUNK_IMAGE, CHUNK_AUDIO):
            raise LlamaInferenceException("only image and audio chunks are encoded")
        forks.mark(context._threads_max)
        rc = self._decode(context, chunk, n_past, seq_id)
        if rc == 1:   # not in the batch: encode it with what follows, then decode
            self._encode(media)
            rc = self._decode(context, chunk, n_past, seq_id)
        if rc < 0 or rc == 1:
            raise LlamaInferenceException(f"could not decode the {_kind_name(chunk)}'s embeddings: "
                                          f"{self._err.message or f'code {rc}'}")
        if rc == 2:
            return None
        if rc != 0:
            context._raise_decode_error(rc)
        return self._new_n_past.value

    def _encode(self, media: Sequence[Chunk]) -> None:
        forks.mark(self._projector.n_threads)
        array = (_p * len(media))(*[c.ptr for c in media])
        added = ctypes.c_int32(0)
        err = ErrorBuffer()
        position = log.mark()
        with self._projector.pinned(), self.pinned() as batch:
            # a fresh batch: mtmd appends to the one it has
            self._mtmd.mtmd_batch_free(batch)
            fresh = self._mtmd.mtmd_batch_init(self._projector.ptr)
            if not fresh:
                self._ptr = None
                raise MemoryError("mtmd_batch_init failed")
            self._ptr = fresh
            rc = self._shim.llamact_mtmd_batch_encode(fresh, array, len(media), ctypes.byref(added), *err.args)
        self._holds = tuple(c.ptr for c in media[: added.value])
        if rc != 0:
            reasons = [err.message] if err.message else log.problems_since(position)
            raise LlamaInferenceException(
                f"the projector could not encode the {_kind_name(media[0])}: "
                + ("; ".join(reasons) if reasons else f"code {rc}"), {"code": rc, "native_log": reasons})

    def _decode(self, context: Context, chunk: Chunk, n_past: int, seq_id: int) -> int:
        if chunk.ptr not in self._holds:
            return 1
        self._err = ErrorBuffer()
        self._new_n_past = ctypes.c_int32(n_past)
        with self._projector.pinned() as proj, self.pinned() as batch, context.pinned() as ctx:
            return int(self._shim.llamact_mtmd_decode_chunk(
                proj, ctx, batch, chunk.ptr, n_past, seq_id, context.n_batch, context._abort_ptr,
                ctypes.byref(self._new_n_past), *self._err.args))


def _kind_name(chunk: Chunk) -> str:
    return "audio" if chunk.kind == CHUNK_AUDIO else "image"
