"""Bad media get a typed LlamaException with a message a user can act on, before anything large is
allocated, and the engine stays usable: bytes that are no image or audio, formats mtmd cannot read,
decompression bombs (a header that claims billions of pixels or hours of audio), truncated files, more
media than the context holds, a projector made for another model, media to a model without a
projector or of the wrong kind, sources the policy refuses (remote URLs, files outside the media
path), and video."""

from __future__ import annotations

import base64
import http.server
import struct
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from media_helpers import engine_params, noise_image

from llamact import (
    GenerationParams,
    LlamaContextException,
    LlamaEngine,
    LlamaMediaException,
    LlamaModelException,
    LlamaUnsupportedException,
)
from llamact.chat.media import audio_part, image_part
from llamact.json_types import Json

pytestmark = [pytest.mark.model]

GREEDY = GenerationParams(max_tokens=4, temperature=0)


def _png_claiming(width: int, height: int) -> bytes:
    """A PNG whose header says width x height, with one compressed row of data."""
    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00" * 64))
            + chunk(b"IEND", b""))


def _jpeg_claiming(width: int, height: int) -> bytes:
    """The start of a baseline JPEG whose frame header says width x height."""
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return b"\xff\xd8" + sof + b"\x00" * 64


def _ask(part: Json) -> list[Json]:
    return [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, part]}]


def _b64_image(data: bytes, mime: str = "image/png") -> Json:
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{base64.b64encode(data).decode()}"}}


@pytest.fixture(scope="module", autouse=True)
def _still_usable(vision_engine: LlamaEngine) -> Iterator[None]:
    """After every refusal of this module the engine answers a good request."""
    yield
    assert vision_engine.complete_chat(_ask(noise_image(99)), params=GREEDY).usage.completion_tokens > 0


@pytest.mark.parametrize("data, why", [
    (b"this is not an image at all, just text " * 4, "not an image or audio file"),
    (b"RIFF\x24\x00\x00\x00WEBPVP8 " + b"\x00" * 32, "not an image or audio file"),           # WebP: no stb reader
    (b"II*\x00" + b"\x00" * 60, "not an image or audio file"),                                  # TIFF
    (_png_claiming(16_000, 16_000), "16000x16000 pixels"),   # a bomb, refused by its header
    (_jpeg_claiming(12_000, 12_000), "12000x12000 pixels"),
    (_png_claiming(64, 64)[:40], "not an image or audio file"),                                 # cut inside its header
])
def test_bad_image_bytes(vision_engine: LlamaEngine, data: bytes, why: str) -> None:
    with pytest.raises(LlamaMediaException, match=why):
        vision_engine.complete_chat(_ask(_b64_image(data)), params=GREEDY)


def test_an_image_whose_pixels_do_not_decode(vision_engine: LlamaEngine) -> None:
    """Its header reads (the probe passes it); stb_image then fails on the broken compressed data. (A
    JPEG cut short is not refused: stb_image decodes what it has, and so does llama-server.)"""
    broken = _png_claiming(64, 64).replace(zlib.compress(b"\x00" * 64), b"\x78\x9c\xff\xff\xff\xff")
    with pytest.raises(LlamaMediaException, match="medium 1: mtmd could not decode the media"):
        vision_engine.complete_chat(_ask(_b64_image(broken)), params=GREEDY)


def test_audio_longer_than_allowed(smollm2_path: Path, projectors: dict[str, Path]) -> None:
    """The length is read before decoding (miniaudio counts the frames): a clip past the limit is refused.
    A header that claims more than the file holds is no bomb: the decoder reads what is there."""
    params = engine_params(projectors["smollm2_audio"], media_max_audio_seconds=1.5)
    with LlamaEngine.load(smollm2_path, params) as engine:
        with pytest.raises(LlamaMediaException, match="lasts 2 s, more than the 1.5 s allowed"):
            engine.complete_chat(_ask(audio_part(np.zeros(32000, np.float32))), params=GREEDY)
        with pytest.raises(LlamaUnsupportedException, match="takes audio, not images"):
            engine.complete_chat(_ask(noise_image(1)), params=GREEDY)


def test_audio_to_a_vision_projector(vision_engine: LlamaEngine) -> None:
    with pytest.raises(LlamaUnsupportedException, match="takes images, not audio"):
        vision_engine.complete_chat(_ask(audio_part(np.zeros(16000, np.float32))), params=GREEDY)


def test_the_pixel_limit_is_a_setting(smollm2_path: Path, projectors: dict[str, Path]) -> None:
    with LlamaEngine.load(smollm2_path, engine_params(projectors["smollm2"], media_max_pixels=1000)) as engine:
        with pytest.raises(LlamaMediaException, match="media_max_pixels"):
            engine.complete_chat(_ask(noise_image(2, 40, 48)), params=GREEDY)   # 1,920 pixels


def test_more_media_than_the_context_holds(smollm2_path: Path, projectors: dict[str, Path]) -> None:
    with LlamaEngine.load(smollm2_path, engine_params(projectors["smollm2"], n_ctx=256)) as engine:
        n = engine.n_ctx // 16 + 1
        parts = [noise_image(i, 8, 8) for i in range(n)]   # 16 embeddings each
        with pytest.raises(LlamaContextException, match=f"{16 * n} of them for {n} media"):
            engine.complete_chat([{"role": "user", "content": parts + [{"type": "text", "text": "?"}]}],
                                 params=GREEDY)


def test_a_projector_of_another_model(smollm2_path: Path, projectors: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(LlamaModelException, match="n_embd = 576.*n_embd = 640"):
        LlamaEngine.load(smollm2_path, engine_params(projectors["gemma3_for_smollm2"]))
    not_gguf = tmp_path / "mmproj.gguf"
    not_gguf.write_bytes(b"not a gguf file")
    with pytest.raises(LlamaModelException, match="not a GGUF file"):
        LlamaEngine.load(smollm2_path, engine_params(not_gguf))
    with pytest.raises(LlamaModelException, match="cannot read the multimodal projector"):
        LlamaEngine.load(smollm2_path, engine_params(tmp_path / "missing.gguf"))


def test_media_to_a_model_without_a_projector(smollm2_path: Path) -> None:
    with LlamaEngine.load(smollm2_path, n_ctx=512, n_threads=1) as engine:
        assert not engine.supports_vision and not engine.supports_audio
        with pytest.raises(LlamaUnsupportedException, match=r"mmproj"):
            engine.complete_chat(_ask(noise_image(3)), params=GREEDY)


def test_video_parts_are_refused(vision_engine: LlamaEngine) -> None:
    for kind in ("input_video", "video_url"):
        with pytest.raises(LlamaUnsupportedException, match="video input is not supported"):
            vision_engine.complete_chat(_ask({"type": kind, kind: {"url": "data:video/mp4;base64,AAAA"}}),
                                        params=GREEDY)


@pytest.mark.parametrize("url, why", [
    ("data:text/plain;base64,aGVsbG8=", "Invalid uri format: data:text/plain;base64"),
    ("data:image/png,rawtext", "uri must be base64 encoded"),
    ("data:image/png;base64,a,b", "Invalid uri-encoded base64 value"),
    ("http://127.0.0.1:9/cat.png", "remote media URLs are not fetched unless enabled"),
    ("file:///etc/passwd", "file:// URLs are not allowed unless a media path is set"),
])
def test_sources_the_policy_refuses(vision_engine: LlamaEngine, url: str, why: str) -> None:
    with pytest.raises(LlamaMediaException, match=why):
        vision_engine.complete_chat(_ask({"type": "image_url", "image_url": {"url": url}}), params=GREEDY)


def test_files_under_the_media_path_only(smollm2_path: Path, projectors: dict[str, Path], tmp_path: Path) -> None:
    media = tmp_path / "media"
    media.mkdir()
    png = base64.b64decode(noise_image(4)["image_url"]["url"].split(",", 1)[1])   # type: ignore[index]
    (media / "cat.png").write_bytes(png)
    (tmp_path / "secret.png").write_bytes(png)
    with LlamaEngine.load(smollm2_path, engine_params(projectors["smollm2"], media_path=media)) as engine:
        assert engine.complete_chat(_ask(image_part("file://cat.png")), params=GREEDY).usage.prompt_tokens > 16
        for name in ("../secret.png", "/../secret.png", "missing.png"):
            with pytest.raises(LlamaMediaException, match="not allowed|does not exist"):
                engine.complete_chat(_ask(image_part(f"file://{name}")), params=GREEDY)


def test_special_names_and_files_under_the_media_path(smollm2_path: Path, projectors: dict[str, Path],
                                                      tmp_path: Path) -> None:
    """Issue 46: a NUL in the path was a ValueError (a 500 on the server); a FIFO or a directory is
    refused before anything blocks on it (opening a FIFO waits for a writer)."""
    import os

    media = tmp_path / "media"
    media.mkdir()
    os.mkfifo(media / "pipe.png")
    (media / "folder.png").mkdir()
    outcome: list[BaseException] = []
    with LlamaEngine.load(smollm2_path, engine_params(projectors["smollm2"], media_path=media)) as engine:
        for name, why in (("x\x00y", "NUL"), ("x%00y", "does not exist"), ("folder.png", "not a regular file"),
                          ("pipe.png", "not a regular file")):
            def ask(name: str = name) -> None:
                try:
                    engine.complete_chat(_ask(image_part(f"file://{name}")), params=GREEDY)
                except BaseException as exc:   # noqa: BLE001 - the test reads it
                    outcome.append(exc)

            worker = threading.Thread(target=ask, daemon=True)
            worker.start()
            worker.join(60)
            if worker.is_alive():   # blocked on the FIFO: give it a writer, then fail
                os.close(os.open(media / "pipe.png", os.O_WRONLY | os.O_NONBLOCK))
                worker.join(60)
                pytest.fail(f"reading file://{name!r} blocked")
            assert isinstance(outcome[-1], LlamaMediaException) and why in str(outcome[-1]), (name, outcome[-1])


class _Images(http.server.BaseHTTPRequestHandler):
    png = b""

    def do_GET(self) -> None:   # noqa: N802 (http.server's name)
        body = self.png if self.path == "/cat.png" else b"\x00" * (11 << 20)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_remote_media_when_enabled_are_bounded(smollm2_path: Path, projectors: dict[str, Path]) -> None:
    _Images.png = base64.b64decode(noise_image(5)["image_url"]["url"].split(",", 1)[1])   # type: ignore[index]
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Images)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        with LlamaEngine.load(smollm2_path, engine_params(projectors["smollm2"], media_fetch=True)) as engine:
            reply = engine.complete_chat(_ask(image_part(f"{base}/cat.png")), params=GREEDY)
            assert reply.usage.prompt_tokens > 16
            with pytest.raises(LlamaMediaException, match="larger than 10 MB"):
                engine.complete_chat(_ask(image_part(f"{base}/huge.png")), params=GREEDY)
    finally:
        httpd.shutdown()
        httpd.server_close()
