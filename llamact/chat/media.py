"""Images and audio in a chat request's messages: OpenAI's content parts, as llama-server reads them.

    messages, media = extract_media(messages)   # media parts -> markers; the media, in order
    image_part("cat.png"), audio_part(wav_bytes) # content parts for the messages (paths, bytes, arrays)

What enters: messages whose content parts may be ``{"type": "image_url", "image_url": {"url": ...}}``
or ``{"type": "input_audio", "input_audio": {"data": B64, "format": "wav"}}`` (Anthropic's and the
Responses API's media arrive converted to these by the server). What leaves: the messages with each
media part replaced by a ``media_marker`` part (upstream's ``oaicompat_chat_params_parse``: the
template renders the marker where the medium goes; the part list is joined without newlines around
it), and one ``MediaRef`` per medium, in the order of the markers. The bytes are fetched later, by
the engine, under its ``MediaPolicy`` (files, remote URLs): here nothing is read.

The marker: llama-server renders a random one per process (``get_media_marker``), so that text a
user types can never pose as a medium. llamact does the same (``RENDER_MARKER``) and shows mtmd's
default ``<__media__>`` (``MEDIA_MARKER``) in the prompts it returns (``chat_template()``,
``/apply-template``): what llama-server shows with ``LLAMA_MEDIA_MARKER=<__media__>``.

Raised: ``ChatRequestError`` (llama-server's reasons: a part without its url, an unsupported part
type) and ``LlamaUnsupportedException`` for video parts (mtmd is built without video: it needs an
ffmpeg program at run time).
"""

from __future__ import annotations

import base64
import io
import mimetypes
import os
import secrets
import struct
import wave
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import LlamaUnsupportedException
from ..json_types import Json
from .messages import ChatMessage
from .oai import ChatRequestError

__all__ = ["MEDIA_MARKER", "RENDER_MARKER", "MediaRef", "audio_part", "display_prompt", "extract_media",
           "image_part"]

MEDIA_MARKER = "<__media__>"   # mtmd_default_marker(): what a returned prompt shows for a medium
"""Where a rendered prompt shows an image or a sound (``chat_template().prompt``, ``/apply-template``),
as llama-server shows it with ``LLAMA_MEDIA_MARKER=<__media__>``."""
RENDER_MARKER = f"<__media_{secrets.token_hex(16)}__>"   # what templates render (unguessable, per process)

_VIDEO = ("input_video", "video_url")


@dataclass(frozen=True)
class MediaRef:
    """One medium of a request: ``kind`` "image" or "audio", and where its bytes are: ``url`` as the
    part gave it (a ``data:`` URL, raw base64, ``file://`` or ``http(s)://``)."""

    kind: str
    url: str

    def __repr__(self) -> str:   # a data URL can be megabytes
        shown = self.url if len(self.url) <= 80 else self.url[:60] + f"...({len(self.url)} chars)"
        return f"MediaRef({self.kind!r}, {shown!r})"


def display_prompt(prompt: str) -> str:
    """A rendered prompt as llamact returns it: each medium shown as ``MEDIA_MARKER``."""
    return prompt.replace(RENDER_MARKER, MEDIA_MARKER)


def extract_media(messages: Json) -> tuple[Json, tuple[MediaRef, ...]]:
    """``messages`` with media parts replaced by marker parts (copies: the caller's are not changed),
    and the media in marker order. Messages without media parts are returned as they are."""
    if not isinstance(messages, (list, tuple)) or not any(_has_media(m) for m in messages):
        return messages, ()
    media: list[MediaRef] = []
    out = [_replace_media(m, media) if _has_media(m) else m for m in messages]
    return out, tuple(media)


def _content(message: Json) -> Json:
    if isinstance(message, ChatMessage):
        return None
    return message.get("content") if isinstance(message, Mapping) else None


def _has_media(message: Json) -> bool:
    content = _content(message)
    return isinstance(content, list) and any(
        isinstance(p, Mapping) and p.get("type") in ("image_url", "input_audio", *_VIDEO) for p in content)


def _replace_media(message: Mapping[str, Any], media: list[MediaRef]) -> dict[str, Any]:
    parts = []
    for part in message["content"]:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "image_url":
            media.append(MediaRef("image", _image_url(part)))
        elif kind == "input_audio":
            media.append(MediaRef("audio", _audio_url(part)))
        elif kind in _VIDEO:
            raise LlamaUnsupportedException(
                "video input is not supported: llamact builds mtmd without video decoding (it needs an ffmpeg "
                "program at run time); send the frames you want the model to see as images", {"part": kind})
        else:
            parts.append(part)
            continue
        parts.append({"type": "media_marker", "text": RENDER_MARKER})
    return {**message, "content": parts}


def _image_url(part: Mapping[str, Any]) -> str:
    image_url = part.get("image_url")
    url = image_url.get("url") if isinstance(image_url, Mapping) else image_url
    if not isinstance(url, str) or not url:
        raise ChatRequestError("an image_url part needs image_url.url (a data: URL, base64, file:// or http(s)://)")
    return url


def _audio_url(part: Mapping[str, Any]) -> str:
    audio = part.get("input_audio")
    if not isinstance(audio, Mapping):
        raise ChatRequestError("an input_audio part needs input_audio.data (base64 of a WAV, MP3 or FLAC file)")
    url = audio.get("data", audio.get("url"))   # "format" is redundant: the bytes say what they are
    if not isinstance(url, str) or not url:
        raise ChatRequestError("an input_audio part needs input_audio.data (base64 of a WAV, MP3 or FLAC file)")
    return url


# -- conveniences: content parts from paths, bytes and arrays ---------------------------------------


def image_part(source: str | os.PathLike[str] | bytes | Any, *, mime: str | None = None) -> dict[str, Any]:
    """An OpenAI ``image_url`` content part for an image, to put in a message's ``content`` list.

    Args:
        source: a file path, the bytes of an image file (PNG, JPEG, GIF, BMP, ...), or an array of
            pixels (height x width x 3 RGB, or x 4 RGBA, or 2-D grey; uint8), which is stored as a PNG.
            A string that is already a URL (``data:``, ``http(s)://``, ``file://``) is passed through.
        mime: the image's type for a path or bytes; None: guessed from the file name, else PNG.

    Returns:
        ``{"type": "image_url", "image_url": {"url": "data:...;base64,..."}}``.

    Raises:
        OSError: a path that cannot be read.
        ValueError: an array that is not uint8, or not an image's shape.

    Example:
        ```python
        messages = [{"role": "user", "content": [{"type": "text", "text": "What is in this picture?"},
                                                 image_part("photo.jpg")]}]
        reply = engine.complete_chat(messages)   # an engine loaded with ModelParams(mmproj=...)
        ```
    """
    if isinstance(source, str) and source.startswith(("data:", "http://", "https://", "file://")):
        return {"type": "image_url", "image_url": {"url": source}}
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        data = path.read_bytes()
        mime = mime or mimetypes.guess_type(path.name)[0] or "image/png"
    elif isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        mime = mime or "image/png"
    else:
        data, mime = _png(source), "image/png"
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{base64.b64encode(data).decode()}"}}


def audio_part(source: str | os.PathLike[str] | bytes | Any, *, sample_rate: int = 16000) -> dict[str, Any]:
    """An OpenAI ``input_audio`` content part for a sound, to put in a message's ``content`` list.

    Args:
        source: a file path or the bytes of a WAV, MP3 or FLAC file (bytes are taken as WAV), or an
            array of samples (mono, float in [-1, 1] or int16), stored as a 16-bit WAV.
        sample_rate: the array's sample rate in Hz (the projector resamples to its own rate).

    Returns:
        ``{"type": "input_audio", "input_audio": {"data": BASE64, "format": "wav"}}``.

    Raises:
        OSError: a path that cannot be read.
        ValueError: an array that is not one channel of float or int16 samples.
    """
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        data, fmt = path.read_bytes(), path.suffix.lstrip(".").lower() or "wav"
    elif isinstance(source, (bytes, bytearray, memoryview)):
        data, fmt = bytes(source), "wav"
    else:
        data, fmt = _wav(source, sample_rate), "wav"
    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(data).decode(), "format": fmt}}


def _png(pixels: Any) -> bytes:
    import numpy as np

    array = np.asarray(pixels)
    if array.dtype != np.uint8:
        raise ValueError(f"an image array must be uint8 (got {array.dtype}); scale it to 0-255 first")
    if array.ndim == 2:
        array = array[:, :, None]
    if array.ndim != 3 or array.shape[2] not in (1, 3, 4) or 0 in array.shape:
        raise ValueError(f"an image array is height x width (x 1, 3 or 4 channels), got shape {array.shape}")
    height, width, channels = array.shape
    color = {1: 0, 3: 2, 4: 6}[channels]
    rows = b"".join(b"\x00" + array[y].tobytes() for y in range(height))   # filter 0 on every row

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _wav(samples: Any, sample_rate: int) -> bytes:
    import numpy as np

    array = np.asarray(samples)
    if array.ndim != 1:
        raise ValueError(f"audio samples are one channel (a 1-D array), got shape {array.shape}")
    if array.dtype.kind == "f":
        array = (np.clip(array, -1.0, 1.0) * 32767.0).astype("<i2")
    elif array.dtype != np.int16:
        raise ValueError(f"audio samples are float in [-1, 1] or int16, got {array.dtype}")
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(int(sample_rate))
        writer.writeframes(array.astype("<i2").tobytes())
    return out.getvalue()
