"""Damaged GGUF files, and a child process that loads them one by one with a deadline each.

Used by tests/native/test_gguf_faults.py (a representative subset) and scripts/soak.py (all of
them). What enters: a good GGUF file. What leaves: named faults (truncations at field boundaries,
bit flips and absurd values in counts, lengths, types and offsets), each loaded with
``LlamaEngine.load`` in a child process: ``(outcome, message)`` where outcome is an exception
class name, ``LOADED`` (then it also generated a little: ``message`` says how that went),
``CRASHED`` (the child died) or ``HUNG`` (no answer in time).

The GGUF reader here is a minimal one written from the format's documentation: header (magic,
version, tensor count, key/value count), key/value pairs (u64-length key, u32 type, value),
tensor infos (name, u32 n_dims, u64 dims, u32 type, u64 offset), then aligned tensor data.
"""

from __future__ import annotations

import os
import select
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value types
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class Field:
    """One integer field of the file: ``role`` is what it is (count, length, type, offset...)."""

    name: str
    role: str
    offset: int
    size: int  # 4 or 8 bytes, little-endian
    value: int


@dataclass(frozen=True)
class Layout:
    fields: tuple[Field, ...]
    data: int  # where tensor data starts
    size: int  # file size


def read_layout(path: Path) -> Layout:
    """Every count, length, type and offset field of the header, key/values and tensor infos."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        data = fh.read(min(size, 64 * 2**20))  # the header sections are near the start
    pos = 0
    fields: list[Field] = []

    def take(name: str, role: str, fmt: str) -> int:
        nonlocal pos
        (value,) = struct.unpack_from(fmt, data, pos)
        fields.append(Field(name, role, pos, struct.calcsize(fmt), int(value)))
        pos += struct.calcsize(fmt)
        return int(value)

    def skip_value(name: str, vtype: int) -> None:
        nonlocal pos
        if vtype == _STRING:
            length = take(f"{name}.length", "length", "<Q")  # not `pos += take(...)`: take moves pos
            pos += length
        elif vtype == _ARRAY:
            etype = take(f"{name}.element_type", "type", "<I")
            count = take(f"{name}.count", "count", "<Q")
            if etype in _SCALAR_SIZES:
                pos += _SCALAR_SIZES[etype] * count
            else:
                for i in range(count):
                    if i in (0, count - 1):  # the first and last string lengths of an array
                        skip_value(f"{name}[{i}]", etype)
                    else:
                        (length,) = struct.unpack_from("<Q", data, pos)
                        pos += 8 + length
        else:
            pos += _SCALAR_SIZES[vtype]

    if data[:4] != b"GGUF":
        raise ValueError(f"{path} is not a GGUF file")
    pos = 4
    take("version", "version", "<I")
    n_tensors = take("n_tensors", "count", "<Q")
    n_kv = take("n_kv", "count", "<Q")
    alignment = 32
    for i in range(n_kv):
        key_len = take(f"kv{i}.key_length", "length", "<Q")
        key = data[pos : pos + key_len].decode("utf-8", errors="replace")
        pos += key_len
        vtype = take(f"kv{i}({key}).type", "type", "<I")
        if key == "general.alignment":
            alignment = struct.unpack_from("<I", data, pos)[0]
            fields.append(Field(f"kv{i}({key}).value", "alignment", pos, 4, alignment))
        skip_value(f"kv{i}({key})", vtype)
    for i in range(n_tensors):
        name_len = take(f"tensor{i}.name_length", "length", "<Q")
        pos += name_len
        n_dims = take(f"tensor{i}.n_dims", "count", "<I")
        for d in range(n_dims):
            take(f"tensor{i}.dim{d}", "dimension", "<Q")
        take(f"tensor{i}.type", "type", "<I")
        take(f"tensor{i}.offset", "offset", "<Q")
    data_start = (pos + alignment - 1) // alignment * alignment
    return Layout(tuple(fields), data_start, size)


@dataclass(frozen=True)
class Fault:
    """A damaged variant: the first ``length`` bytes of the file (None = all) with ``patch``
    (offset, bytes) applied."""

    name: str
    length: int | None = None
    patch: tuple[int, bytes] | None = None


def _spread(items: list[Field], most: int) -> list[Field]:
    """At most ``most`` items, evenly spread (first and last included)."""
    if len(items) <= most:
        return items
    step = (len(items) - 1) / (most - 1)
    return [items[round(i * step)] for i in range(most)]


def truncations(layout: Layout, tensors_sampled: int = 6) -> Iterator[Fault]:
    """The file cut at the start and in the middle of every header and key/value field, at those
    of a spread of tensor infos, at the start of the data, in the data, and one byte short."""
    tensor_names = sorted({f.name.split(".")[0] for f in layout.fields if f.name.startswith("tensor")},
                          key=lambda n: int(n[6:]))
    keep = set(tensor_names[:: max(1, len(tensor_names) // tensors_sampled)] + tensor_names[-1:])
    yield Fault("truncated-after-magic", 4)
    for f in layout.fields:
        if f.name.startswith("tensor") and f.name.split(".")[0] not in keep:
            continue
        yield Fault(f"truncated-at-{f.name}", f.offset)
        yield Fault(f"truncated-inside-{f.name}", f.offset + f.size // 2)
    yield Fault("truncated-at-data", layout.data)
    yield Fault("truncated-mid-data", layout.data + (layout.size - layout.data) // 2)
    yield Fault("truncated-one-byte-short", layout.size - 1)


ABSURD = {"zero": 0, "one": 1, "2^31": 2**31, "2^32-1": 2**32 - 1, "2^63": 2**63, "max": 2**64 - 1}


BITS = (0, 1, 7, 15, 31, 32, 47, 62, 63)


def mutations(f: Field) -> Iterator[Fault]:
    """Each bit of BITS flipped in field ``f``, and ``f`` set to each ABSURD value."""
    fmt = "<I" if f.size == 4 else "<Q"
    for bit in BITS:
        if bit < 8 * f.size:
            yield Fault(f"flip-bit{bit}-{f.name}", None, (f.offset, struct.pack(fmt, f.value ^ (1 << bit))))
    for label, absurd in ABSURD.items():
        absurd &= (1 << (8 * f.size)) - 1
        if absurd != f.value:
            yield Fault(f"set-{label}-{f.name}", None, (f.offset, struct.pack(fmt, absurd)))


def corruptions(layout: Layout, per_role: int = 8) -> Iterator[Fault]:
    """The mutations of the header's version and counts, and of a spread of at most ``per_role``
    fields of each role (count, length, type, dimension, offset) after it."""
    header = [f for f in layout.fields if f.name in ("version", "n_tensors", "n_kv")]
    by_role: dict[str, list[Field]] = {}
    for f in layout.fields:
        if f not in header:
            by_role.setdefault(f.role, []).append(f)
    for f in header + [f for _, fields in sorted(by_role.items()) for f in _spread(fields, per_role)]:
        yield from mutations(f)


# -- loading in a child, one file at a time, each with a deadline ----------------------------------

_CHILD = r"""
import sys
from llamact import GenerationParams, LlamaEngine, ModelParams
print("READY", flush=True)
for line in sys.stdin:
    path = line.rstrip("\n")
    try:
        engine = LlamaEngine.load(path, ModelParams(n_ctx=64, n_threads=1))
    except Exception as exc:
        print("RESULT", type(exc).__name__, "|", str(exc).replace("\n", " "), flush=True)
        continue
    try:  # it loads: it must not crash when used either
        with engine:
            result = engine.complete([1, 2, 3], GenerationParams(max_tokens=2, greedy=True))
        print("RESULT LOADED | generated", len(result.tokens), "tokens", flush=True)
    except Exception as exc:
        print("RESULT LOADED | then", type(exc).__name__, str(exc).replace("\n", " "), flush=True)
"""


class FaultRunner:
    """Materialises each fault next to a working copy of ``source`` and loads it in a child
    process; a child that dies or misses the deadline is replaced for the next fault."""

    def __init__(self, source: Path, workdir: Path, timeout: float = 60.0) -> None:
        self.source, self.workdir, self.timeout = source, workdir, timeout
        self.full = workdir / "patched.gguf"
        shutil.copyfile(source, self.full)
        self.child: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        env = {**os.environ, "GGML_NO_BACKTRACE": "1"}
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, cwd=self.workdir, env=env,
        )
        if self._line(child, self.timeout * 4) != "READY":
            child.kill()
            raise RuntimeError("the fault-loading child did not start")
        return child

    @staticmethod
    def _line(child: subprocess.Popen[str], timeout: float) -> str | None:
        """The child's next line; "" if it exited, None if it gave none in time."""
        assert child.stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([child.stdout], [], [], left)
            if ready:
                return child.stdout.readline().rstrip("\n")

    def _materialise(self, fault: Fault) -> tuple[Path, bytes | None]:
        """The file to load, and the original bytes to put back after (patches are in place)."""
        if fault.length is None:
            assert fault.patch is not None
            offset, raw = fault.patch
            with self.full.open("r+b") as fh:
                fh.seek(offset)
                original = fh.read(len(raw))
                fh.seek(offset)
                fh.write(raw)
            return self.full, original
        path = self.workdir / "truncated.gguf"
        with self.source.open("rb") as src, path.open("wb") as dst:
            left = fault.length
            while left > 0:
                chunk = src.read(min(left, 2**22))
                if not chunk:
                    break
                dst.write(chunk)
                left -= len(chunk)
        if fault.patch is not None:
            with path.open("r+b") as fh:
                fh.seek(fault.patch[0])
                fh.write(fault.patch[1])
        return path, None

    def run(self, fault: Fault) -> tuple[str, str]:
        path, original = self._materialise(fault)
        try:
            if self.child is None or self.child.poll() is not None:
                self.child = self._start()
            assert self.child.stdin is not None
            self.child.stdin.write(f"{path}\n")
            self.child.stdin.flush()
            line = self._line(self.child, self.timeout)
            if not line:
                if line is None:
                    self.child.kill()
                code = self.child.wait()
                self.child = None
                return ("HUNG", f"no answer in {self.timeout:.0f} s") if line is None else ("CRASHED", f"exit {code}")
            kind, _, message = line.removeprefix("RESULT ").partition(" | ")
            return kind, message
        finally:
            if original is not None and fault.patch is not None:
                with self.full.open("r+b") as fh:
                    fh.seek(fault.patch[0])
                    fh.write(original)

    def close(self) -> None:
        if self.child is not None:
            if self.child.stdin is not None:
                self.child.stdin.close()
            try:
                self.child.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait()
            self.child = None

    def __enter__(self) -> FaultRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
