"""Corrupt images and audio fed to the media pipeline: no crash, no hang, no untyped exception.

    python scripts/fuzz/media.py --cases 200 --seed 7            # a campaign (SmolLM2, random projectors)
    python scripts/fuzz/media.py --replay tests/media/fuzz_corpus # the saved findings again

Seeds: a PNG and a WAV made here, upstream's test JPEG and MP3 (tools/mtmd in the pinned tree), and a
BMP and a GIF. Each case mutates one seed (truncation, byte flips, a run of random bytes, a header
field made huge, zero or all-ones, a chunk repeated, pure noise) and sends it through what a request
does with a medium: the header probe, the decode (stb_image / miniaudio, as mtmd decodes), the
projector's preprocessing and tokenizing, and for every eighth case the encode and the decode into the
context. Every case runs in a worker process watched by the parent: a signal (a crash) or no answer
within ``--case-seconds`` (a hang) is a finding, and so is an exception that is not a
``LlamaException``; a typed refusal or an answer is fine. Findings are written to ``--out`` (one file
per case: the bytes, and a line saying what happened), which ``tests/media/test_media_fuzz.py``
replays. Exit status 1 when anything was found.
"""

from __future__ import annotations

import argparse
import base64
import io
import multiprocessing as mp
import random
import struct
import sys
import tempfile
import time
import wave
import zlib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
# --self-test appends a case the worker answers by aborting (SIGABRT): the harness must report it
_ABORT = b"llamact media fuzz: abort here"


def _png(rng: random.Random) -> bytes:
    width, height = rng.randint(1, 40), rng.randint(1, 40)
    rows = b"".join(b"\x00" + bytes(rng.getrandbits(8) for _ in range(width * 3)) for _ in range(height))

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _bmp(rng: random.Random) -> bytes:
    width, height = rng.randint(1, 16), rng.randint(1, 16)
    stride = (width * 3 + 3) & ~3
    pixels = bytes(rng.getrandbits(8) for _ in range(stride * height))
    header = struct.pack("<2sIHHI", b"BM", 54 + len(pixels), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    return header + info + pixels


def _gif(rng: random.Random) -> bytes:   # a 1x1 GIF: the smallest well-formed one
    return (b"GIF89a\x01\x00\x01\x00\x80\x00\x00" + bytes(rng.getrandbits(8) for _ in range(6))
            + b"!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")


def _wav(rng: random.Random) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(rng.choice((1, 2)))
        writer.setsampwidth(2)
        writer.setframerate(rng.choice((8000, 16000, 44100)))
        writer.writeframes(bytes(rng.getrandbits(8) for _ in range(2 * rng.randint(10, 4000))))
    return out.getvalue()


def seeds(rng: random.Random) -> list[tuple[str, bytes]]:
    mtmd = REPO / "vendor" / "llama.cpp" / "tools" / "mtmd"
    found = [("png", _png(rng)), ("bmp", _bmp(rng)), ("gif", _gif(rng)), ("wav", _wav(rng))]
    for name, kind in (("test-1.jpeg", "jpeg"), ("test-2.mp3", "mp3")):
        if (mtmd / name).is_file():
            data = (mtmd / name).read_bytes()
            found.append((kind, data if kind == "jpeg" else data[:24_000]))   # a short clip: ~1.5 s
    return found


def mutate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One mutation of ``data``: (what was done, the bytes)."""
    buf = bytearray(data)
    kind = rng.choice(("truncate", "flip", "noise_run", "header_field", "repeat", "garbage"))
    if kind == "truncate":
        return kind, bytes(buf[: rng.randint(0, max(0, len(buf) - 1))])
    if kind == "flip":
        for _ in range(rng.randint(1, 16)):
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        return kind, bytes(buf)
    if kind == "noise_run":
        i = rng.randrange(len(buf))
        n = rng.randint(1, 64)
        buf[i:i + n] = bytes(rng.getrandbits(8) for _ in range(n))
        return kind, bytes(buf)
    if kind == "header_field":   # sizes and counts live in the first bytes of every format here
        i = rng.randrange(min(len(buf), 64))
        value = rng.choice((b"\xff\xff\xff\xff", b"\x00\x00\x00\x00", b"\x7f\xff\xff\xff", b"\x00\x01\x00\x00"))
        buf[i:i + 4] = value
        return kind, bytes(buf)
    if kind == "repeat":
        i = rng.randrange(len(buf))
        j = min(len(buf), i + rng.randint(1, 256))
        return kind, bytes(buf[:j] + buf[i:j] * rng.randint(1, 8) + buf[j:])
    return kind, bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 512)))


# -- the worker: one engine per modality, loaded once ---------------------------------------------

def _worker(jobs: Any, results: Any, projectors: dict[str, str]) -> None:
    import logging

    logging.disable(logging.CRITICAL)
    from llamact import ChatRequest, GenerationParams, LlamaEngine, LlamaException, ModelParams
    from llamact.chat.media import audio_part
    from llamact.models import smollm2_path

    engines = {kind: LlamaEngine.load(smollm2_path(), ModelParams(n_ctx=2048, n_threads=1, mmproj=path))
               for kind, path in projectors.items()}
    greedy = GenerationParams(max_tokens=1, temperature=0)
    while True:
        job = jobs.get()
        if job is None:
            return
        index, data, evaluate = job
        if data == _ABORT:
            import os

            os.abort()
        url = "data:image/png;base64," + base64.b64encode(data).decode()
        audio = data[:4] in (b"RIFF", b"fLaC") or data[:3] == b"ID3" or data[:1] == b"\xff"
        part = audio_part(data) if audio else {"type": "image_url", "image_url": {"url": url}}
        engine = engines["audio" if audio else "vision"]
        messages = [{"role": "user", "content": [part, {"type": "text", "text": "?"}]}]
        try:
            if evaluate:
                engine.complete_chat(messages, params=greedy)
                outcome = "answered"
            else:
                engine.prompt_length(ChatRequest(messages))
                outcome = "tokenized"
        except LlamaException as exc:
            outcome = "refused: " + type(exc).__name__
        except Exception as exc:   # untyped: a finding
            outcome = f"UNTYPED {type(exc).__name__}: {exc}"
        results.put((index, outcome))


def _answer(results: Any, worker: Any, seconds: float) -> tuple[int, str] | None:
    """The worker's answer to the case it has, or None once it died or ``seconds`` passed."""
    import queue

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            return results.get(timeout=0.2)   # type: ignore[no-any-return]
        except queue.Empty:
            if not worker.is_alive():
                try:   # it may have answered just before it died
                    return results.get(timeout=0.2)   # type: ignore[no-any-return]
                except queue.Empty:
                    return None
    return None


def run(cases: list[tuple[str, bytes]], case_seconds: float, evaluate_every: int = 8) -> list[tuple[int, str]]:
    """Run ``cases`` ((label, bytes)); returns (index, what went wrong) for each finding."""
    from llamact.models import smollm2_path
    from llamact.parity.projectors import embedding_width, write_projector

    folder = Path(tempfile.mkdtemp(prefix="llamact-media-fuzz-"))
    width = embedding_width(smollm2_path())
    projectors = {"vision": str(write_projector(folder / "v.gguf", width, "mlp")),
                  "audio": str(write_projector(folder / "a.gguf", width, "qwen2a"))}
    ctx = mp.get_context("spawn")
    findings: list[tuple[int, str]] = []
    i = 0
    while i < len(cases):
        jobs, results = ctx.Queue(), ctx.Queue()
        worker = ctx.Process(target=_worker, args=(jobs, results, projectors), daemon=True)
        worker.start()
        started = False
        while i < len(cases):
            jobs.put((i, cases[i][1], i % evaluate_every == 0))
            deadline = case_seconds + (120.0 if not started else 0.0)   # the first case waits for the load
            answer = _answer(results, worker, deadline)
            if answer is None:   # no answer: crashed (a signal) or hung
                worker.join(1.0)
                code = worker.exitcode
                what = f"CRASH (signal {-code})" if code is not None and code < 0 else (
                    f"EXIT {code}" if code is not None else f"HANG (> {deadline:.0f} s)")
                findings.append((i, f"{cases[i][0]}: {what}"))
                worker.kill()
                i += 1
                break
            started = True
            index, outcome = answer
            if outcome.startswith("UNTYPED"):
                findings.append((index, f"{cases[index][0]}: {outcome}"))
            i += 1
        else:
            jobs.put(None)
            worker.join(30)
            if worker.is_alive():
                worker.kill()
    return findings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--case-seconds", type=float, default=60.0, help="a case's time before it is a hang")
    parser.add_argument("--replay", type=Path, help="run the saved findings in this folder instead")
    parser.add_argument("--self-test", action="store_true",
                        help="add a case that crashes the worker on purpose (it must be the one finding)")
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "media" / "fuzz_corpus",
                        help="where findings are saved")
    args = parser.parse_args(argv)
    if args.replay is not None:
        files = sorted(args.replay.glob("*.bin"))
        cases = [(f.name, f.read_bytes()) for f in files]
    else:
        rng = random.Random(args.seed)
        pool = seeds(rng)
        cases = []
        for n in range(args.cases):
            name, data = pool[n % len(pool)]
            what, mutant = mutate(data, random.Random(f"{args.seed}:{n}"))
            cases.append((f"{name}-{what}-{n}", mutant))
    if args.self_test:
        cases.append(("self-test", _ABORT))
    start = time.monotonic()
    findings = run(cases, args.case_seconds)
    print(f"{len(cases)} cases in {time.monotonic() - start:.0f} s: {len(findings)} findings")
    for index, what in findings:
        print(f"  {what}")
        if args.replay is None and cases[index][0] != "self-test":
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"{args.seed}-{index}.bin").write_bytes(cases[index][1])
            (args.out / f"{args.seed}-{index}.txt").write_text(what + "\n")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
