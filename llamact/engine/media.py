"""Images and audio in a prompt: bytes fetched under a policy, checked, decoded and tokenized into
text and media chunks; media evaluated between the text, and cached by the hash of their bytes.

    policy = MediaPolicy.from_params(model_params)
    data = media_bytes(ref, policy)                       # a MediaRef's bytes (data:, base64, file, http)
    prompt = MediaPrompt.build(projector, text, datas, policy, n_ctx)   # keys and media spans
    prompt.keys                                           # one int per position (media: their key)
    prompt.evaluate(context, start, n_past, seq_id)       # the media chunk at `start` into the context

What enters: the rendered prompt (``chat.media.RENDER_MARKER`` where each medium goes) and the media's
bytes. What leaves: a ``MediaPrompt``: its ``keys`` are what the prompt caches compare (a text token's
id; each position of a medium holds the medium's key, a negative number made from the SHA-256 of its
bytes, so a prompt with the same image at the same place shares the prefix -- llama-server compares
the chunks' ids the same way -- and a different image does not); ``spans`` say where the media are.
Raised: ``LlamaMediaException`` (a source the policy refuses, bytes that are no image or audio, a
medium past the limits, one the projector cannot take), ``LlamaContextException`` (more media than the
context holds), ``LlamaUnsupportedException`` (audio to a vision-only projector and the reverse).

Positions: a medium takes ``n_tokens`` cells of the KV cache over ``n_pos`` positions; the two differ
on M-RoPE projectors (Qwen-VL: an image's tokens share positions), so the text after it sits at
``index + offset``; ``position(index)`` gives it and the loops decode text there.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import hashlib
import os
import stat
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..chat.media import MediaRef
from ..errors import (
    LlamaContextException,
    LlamaInferenceException,
    LlamaMediaException,
    LlamaStateException,
    LlamaUnsupportedException,
)
from ..native.context import Context
from ..native.mtmd import (
    CHUNK_AUDIO,
    CHUNK_TEXT,
    MEDIA_AUDIO,
    MEDIA_IMAGE,
    Chunk,
    InputChunks,
    MediaEncoder,
    Projector,
    probe_media,
)
from .params import ModelParams

__all__ = ["MediaPolicy", "MediaPrompt", "MediaSpan", "media_bytes", "media_key"]

FETCH_MAX_BYTES = 10 << 20   # llama-server's download bound (10 MB, 10 s)
FETCH_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class MediaPolicy:
    """Where a request's media may come from, and how large they may decode (``ModelParams``'
    ``media_*`` fields, the server's ``--media-path`` / ``--media-fetch`` / ``--media-max-*``)."""

    files_root: Path | None = None     # file:// URLs are read under it (None: refused)
    fetch: bool = False                # http(s):// URLs are downloaded (bounded) when True
    max_pixels: int = 50_000_000       # an image's width x height, read from its header first
    max_audio_seconds: float = 600.0   # an audio clip's length, read from its header first

    @classmethod
    def from_params(cls, params: ModelParams) -> MediaPolicy:
        root = Path(params.media_path).resolve() if params.media_path is not None else None
        return cls(root, params.media_fetch, params.media_max_pixels, params.media_max_audio_seconds)


def media_key(media_id: str) -> int:
    """The prompt-cache key of every position of a medium: negative (never a token id, never -1)
    and made from its bytes' SHA-256, so equal bytes share a prefix and different bytes do not."""
    return -2 - int(media_id[:15] or "0", 16)


def media_bytes(ref: MediaRef, policy: MediaPolicy) -> bytes:
    """The bytes of a medium, read as llama-server's ``handle_media`` reads a part's url: a data: URL of
    an image, audio or video type in base64, raw base64, ``file://`` under ``policy.files_root``, or
    ``http(s)://`` when ``policy.fetch`` allows it."""
    url = ref.url
    if url.startswith(("http://", "https://")):
        if not policy.fetch:
            raise LlamaMediaException(
                "remote media URLs are not fetched unless enabled (ModelParams(media_fetch=True), llamact serve "
                "--media-fetch); send the bytes as a data: URL instead", {"url": url[:200]})
        return _download(url)
    if url.startswith("file://"):
        return _read_file(url[7:], policy.files_root)
    if url.startswith("data:"):
        head, sep, payload = url.partition(",")
        if not sep or "," in payload:
            raise LlamaMediaException("Invalid uri-encoded base64 value")
        if not head.startswith(("data:image/", "data:video/", "data:audio/")):
            raise LlamaMediaException(f"Invalid uri format: {head[:100]}")
        if not head.endswith("base64"):
            raise LlamaMediaException("uri must be base64 encoded")
        return _b64(payload)
    data = _b64(url)
    if not data:
        raise LlamaMediaException("Invalid base64 value")
    return data


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError) as exc:
        raise LlamaMediaException(f"the medium is not valid base64: {exc}") from None


def _read_file(name: str, root: Path | None) -> bytes:
    if root is None:
        raise LlamaMediaException("file:// URLs are not allowed unless a media path is set (ModelParams(media_path="
                                  "...), llamact serve --media-path DIR)")
    if "\0" in name:   # (Path and open() raise ValueError on it: a 500 once)
        raise LlamaMediaException(f"file path is not allowed (it holds a NUL character): {name!r}")
    path = (root / name.lstrip("/")).resolve()
    if not path.is_relative_to(root) or any(part in ("..",) for part in Path(name).parts):
        raise LlamaMediaException(f"file path is not allowed: {name}")
    try:   # opened without blocking and checked on its descriptor: a FIFO would wait for a writer forever
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        raise LlamaMediaException(f"file does not exist or cannot be opened: {name}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LlamaMediaException(f"not a regular file (a FIFO, a device or a directory): {name}")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(FETCH_MAX_BYTES * 4 + 1)
    except OSError:
        raise LlamaMediaException(f"file does not exist or cannot be opened: {name}") from None
    finally:
        os.close(fd)
    if len(data) > FETCH_MAX_BYTES * 4:
        raise LlamaMediaException(f"file is larger than {FETCH_MAX_BYTES * 4 >> 20} MiB: {name}")
    return data


def _download(url: str) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "llamact"})
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as response:   # noqa: S310 (http(s) only)
            data = response.read(FETCH_MAX_BYTES + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise LlamaMediaException(f"Failed to download image: {exc}", {"url": url[:200]}) from None
    if len(data) > FETCH_MAX_BYTES:
        raise LlamaMediaException(f"Failed to download image: larger than {FETCH_MAX_BYTES >> 20} MB",
                                  {"url": url[:200]})
    return data


@dataclass(frozen=True)
class MediaSpan:
    """A medium's place in a prompt: positions ``start .. start + n_tokens - 1`` of the keys."""

    start: int
    n_tokens: int
    n_pos: int
    id: str
    kind: str   # "image" or "audio"

    @property
    def end(self) -> int:
        return self.start + self.n_tokens


class MediaPrompt:
    """A prompt with media, tokenized (see the module docstring). Owns its native chunks: ``close()``
    (or the end of the generation that evaluates it) frees them."""

    def __init__(self, keys: list[int], spans: Sequence[MediaSpan], chunks: InputChunks | None,
                 media: dict[int, Chunk], projector: Projector | None) -> None:
        self.keys = keys
        self.spans = tuple(spans)
        self._starts = [s.start for s in self.spans]
        self._chunks = chunks
        self._media = media             # start -> the native chunk (while open)
        self._projector = projector
        self._encoder: MediaEncoder | None = None

    @classmethod
    def build(cls, projector: Projector, text: str, media: Sequence[bytes], policy: MediaPolicy,
              n_ctx: int) -> MediaPrompt:
        """Tokenize ``text`` (one ``RENDER_MARKER`` per medium) with the media's bytes, after checking
        each against the projector and the policy's limits."""
        bitmaps = []
        try:
            for i, data in enumerate(media):
                _check_medium(projector, data, policy, i)
                try:
                    bitmaps.append(projector.bitmap(data))
                except LlamaInferenceException as exc:   # the header read, the rest did not
                    raise LlamaMediaException(f"medium {i + 1}: {exc}", {"index": i, **exc.details}) from None
            try:
                chunks = projector.tokenize(text, bitmaps)
            except Exception as exc:
                raise LlamaMediaException(str(exc), getattr(exc, "details", {})) from None
        finally:
            for bitmap in bitmaps:
                bitmap.close()
        try:
            keys: list[int] = []
            spans: list[MediaSpan] = []
            native: dict[int, Chunk] = {}
            for chunk in chunks.chunks():
                if chunk.kind == CHUNK_TEXT:
                    keys.extend(chunk.tokens)
                    continue
                span = MediaSpan(len(keys), chunk.n_tokens, chunk.n_pos, chunk.id,
                                 "audio" if chunk.kind == CHUNK_AUDIO else "image")
                spans.append(span)
                native[span.start] = chunk
                keys.extend([media_key(chunk.id)] * chunk.n_tokens)
            if spans and spans[-1].end == len(keys):
                raise LlamaMediaException("a prompt with media must end with text after its last medium (the "
                                          "model's next token is read from the text's last position)")
            if len(keys) > n_ctx:
                n_media = sum(s.n_tokens for s in spans)
                raise LlamaContextException(
                    f"the prompt ({len(keys)} tokens, {n_media} of them for {len(spans)} media) does not fit the "
                    f"context ({n_ctx} tokens); use a larger n_ctx, fewer or smaller media, or a shorter prompt",
                    {"n_prompt": len(keys), "n_media_tokens": n_media, "n_ctx": n_ctx})
        except BaseException:
            chunks.close()
            raise
        return cls(keys, spans, chunks, native, projector)

    # -- where things are -----------------------------------------------------------------------

    def span_at(self, index: int) -> MediaSpan | None:
        """The medium starting at ``index``, if one does."""
        i = bisect.bisect_left(self._starts, index)
        return self.spans[i] if i < len(self.spans) and self._starts[i] == index else None

    def cut(self, n: int) -> int:
        """The largest prefix length <= ``n`` that does not split a medium (a cache may keep it)."""
        i = bisect.bisect_right(self._starts, n - 1) - 1
        if i >= 0 and self.spans[i].start < n < self.spans[i].end:
            return self.spans[i].start
        return n

    def position(self, index: int) -> int:
        """The position the key at ``index`` is decoded at (the index, unless an M-RoPE medium before
        it covers fewer positions than tokens)."""
        offset = 0
        for span in self.spans:
            if span.end > index:
                break
            offset += span.n_pos - span.n_tokens
        return index + offset

    def index_of(self, position: int) -> int:
        """How many keys lie before ``position`` (``position``'s inverse: a cache holding positions up to
        ``position - 1`` holds that many keys). Past the prompt, keys are generated tokens."""
        if not any(s.n_pos != s.n_tokens for s in self.spans):
            return position
        lo, hi = 0, max(position, len(self.keys)) + 1
        while lo < hi:   # the first index whose position reaches `position`
            mid = (lo + hi) // 2
            if self.position(mid) < position:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def next_media(self, start: int) -> int:
        """The index of the first medium at or after ``start`` (``len(keys)`` when none)."""
        i = bisect.bisect_left(self._starts, start)
        return self._starts[i] if i < len(self._starts) else len(self.keys)

    # -- evaluation -------------------------------------------------------------------------------

    def evaluate(self, context: Context, start: int, seq_id: int = 0) -> bool:
        """Decode the medium at ``start`` into ``seq_id`` at its position (encoding it, with the media
        after it that mtmd batches together, unless that is done). False when an abort request
        (``Context.request_abort``) stopped it."""
        if self._projector is None or self._chunks is None:
            raise LlamaStateException("this prompt's media were freed (its generation ended)")
        if self._encoder is None:
            self._encoder = MediaEncoder(self._projector)
        later = [self._media[s] for s in self._starts if s >= start]
        return self._encoder.evaluate(context, later, self.position(start), seq_id) is not None

    def close(self) -> None:
        """Free the native chunks (the keys and spans stay readable)."""
        encoder, self._encoder = self._encoder, None
        if encoder is not None:
            encoder.close()
        chunks, self._chunks = self._chunks, None
        if chunks is not None:
            chunks.close()
        self._media = {}


def _check_medium(projector: Projector, data: bytes, policy: MediaPolicy, index: int) -> None:
    """Refuse, before decoding, a medium the projector cannot take or one past the policy's limits."""
    probe = probe_media(data, projector.audio_sample_rate if projector.supports_audio else 0)
    where = {"index": index, "sha256": hashlib.sha256(data).hexdigest()}
    if probe.kind == MEDIA_IMAGE:
        if not projector.supports_vision:
            raise LlamaUnsupportedException("this model's projector takes audio, not images", where)
        pixels = probe.width * probe.height
        if pixels > policy.max_pixels or probe.width <= 0 or probe.height <= 0:
            raise LlamaMediaException(
                f"image {index + 1} is {probe.width}x{probe.height} pixels, more than the {policy.max_pixels} allowed "
                "(ModelParams.media_max_pixels, llamact serve --media-max-pixels); scale it down first",
                {**where, "width": probe.width, "height": probe.height})
        return
    if probe.kind == MEDIA_AUDIO or _looks_like_audio(data):
        if not projector.supports_audio:
            raise LlamaUnsupportedException("this model's projector takes images, not audio", where)
        if probe.kind != MEDIA_AUDIO:
            raise LlamaMediaException(f"medium {index + 1} looks like audio but cannot be read as WAV, MP3 or FLAC",
                                      where)
        seconds = probe.frames / projector.audio_sample_rate
        if seconds > policy.max_audio_seconds:
            raise LlamaMediaException(
                f"audio {index + 1} lasts {seconds:.0f} s, more than the {policy.max_audio_seconds:g} s allowed "
                "(ModelParams.media_max_audio_seconds, llamact serve --media-max-audio-seconds); cut it first",
                {**where, "seconds": seconds})
        return
    raise LlamaMediaException(
        f"medium {index + 1} is not an image or audio file mtmd can read (images: PNG, JPEG, GIF, BMP, TGA, PSD, "
        "HDR, PNM; audio: WAV, MP3, FLAC)", where)


def _looks_like_audio(data: bytes) -> bool:
    return len(data) >= 12 and (data[:4] == b"RIFF" and data[8:12] == b"WAVE" or data[:3] == b"ID3"
                                or data[0] == 0xFF and data[1] & 0xE0 == 0xE0 or data[:4] == b"fLaC")
