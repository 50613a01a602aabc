"""What a ``.litertlm`` bundle says about itself, read from the file without the runtime.

    info = read_bundle(path)      -> BundleInfo
    info.template                 the embedded Jinja chat template (LlmMetadata.jinja_prompt_template) or None
    info.model_type               "generic", "gemma3", "qwen3", ... (LlmMetadata.llm_model_type), or None
    info.channels                 the model's output channels (e.g. a thought channel's start / end markers)

LiteRT-LM's C API has no getter for the embedded template, so this reads it from the file. The
layout (LiteRT-LM's ``schema/core``): the magic ``LITERTLM``, three uint32 version numbers, 4 bytes
of padding, a uint64 offset where the header ends, then the header -- a FlatBuffer
(``LiteRTLMMetaData``: system metadata, and the sections with their byte ranges and types). The
``LlmMetadataProto`` section is a protocol-buffer message (``litert.lm.proto.LlmMetadata``).
Both are decoded here with a few lines each (fields by number), so reading a bundle needs nothing
installed.

Raises ``LlamaModelException`` saying what is wrong and what to do: not a bundle (wrong magic), a
file format major version this reader does not know, a header or a section that runs past the end
of the file (a truncated download), or metadata that does not decode (a corrupt file). The runtime
is only given files that passed these checks.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ...errors import LlamaModelException

__all__ = ["BundleInfo", "Channel", "FILE_MAJOR_VERSION", "read_bundle", "vocab_size"]

MAGIC = b"LITERTLM"
FILE_MAJOR_VERSION = 1           # the file format major version LiteRT-LM 0.18 reads
_PREAMBLE = 32                   # magic, 3 x uint32 version, 4 bytes padding, uint64 header end
_MAX_HEADER = 64 * 1024 * 1024   # a header is kilobytes; a larger claim is a corrupt file

# AnySectionDataType (litertlm_header_schema.fbs)
SECTION_TYPES = ("none", "generic_binary", "deprecated", "tflite_model", "sp_tokenizer", "llm_metadata",
                 "hf_tokenizer_zlib", "tflite_weights", "executor_metadata")
_LLM_METADATA = SECTION_TYPES.index("llm_metadata")

# LlmModelType's oneof (llm_model_type.proto): field number -> family name
MODEL_TYPES = {1: "generic", 2: "gemma3n", 3: "function_gemma", 4: "gemma3", 5: "qwen3", 7: "qwen2p5",
               8: "gemma4", 9: "fast_vlm", 11: "lfm2", 12: "minicpm5", 13: "gemma3_270m"}


@dataclass(frozen=True)
class Channel:
    """An output channel the runtime separates from the answer (LlmMetadata.channels)."""

    name: str
    start: str
    end: str
    is_reasoning: bool


@dataclass(frozen=True)
class Section:
    type: str
    begin: int
    end: int


@dataclass(frozen=True)
class BundleInfo:
    path: Path
    version: tuple[int, int, int]
    sections: tuple[Section, ...]
    system_metadata: dict[str, object]
    template: str | None              # the embedded Jinja chat template
    model_type: str | None            # MODEL_TYPES' name; None when the metadata names none
    channels: tuple[Channel, ...]
    max_num_tokens: int               # 0: not stated
    min_runtime_version: str | None
    force_string_content: bool        # GenericModel.force_string_content

    @property
    def has_llm_metadata(self) -> bool:
        return any(s.type == "llm_metadata" for s in self.sections)


def read_bundle(path: str | os.PathLike[str]) -> BundleInfo:
    """Read and check ``path``'s header and LLM metadata (see the module docstring)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            preamble = f.read(_PREAMBLE)
            if preamble[:8] != MAGIC:
                raise _corrupt(path, f"it does not start with {MAGIC.decode()} (its first bytes are "
                                     f"{preamble[:8]!r}); give a LiteRT-LM bundle, or a .gguf file for llama.cpp")
            if len(preamble) < _PREAMBLE:
                raise _truncated(path, "its header ends early")
            major, minor, patch = struct.unpack_from("<3I", preamble, 8)
            if major != FILE_MAJOR_VERSION:
                raise LlamaModelException(
                    f"{path.name} is a LiteRT-LM file of format version {major}.{minor}.{patch}; this runtime "
                    f"reads version {FILE_MAJOR_VERSION}.x: install the litert-lm-api release that made it, or "
                    "export the model again", {"path": str(path), "version": f"{major}.{minor}.{patch}"})
            (header_end,) = struct.unpack_from("<Q", preamble, 24)
            if header_end < _PREAMBLE or header_end - _PREAMBLE > _MAX_HEADER:
                raise _corrupt(path, f"its header size ({header_end}) is impossible")
            if header_end > size:
                raise _truncated(path, f"its header needs {header_end} bytes, the file has {size}")
            header = f.read(header_end - _PREAMBLE)
            sections, system = _header(path, header)
            for section in sections:
                if section.end > size or section.begin > section.end:
                    raise _truncated(path, f"its {section.type} section ends at byte {section.end}, the file has "
                                           f"{size}")
            fields = _LlmFields()
            for section in sections:
                if section.type == "llm_metadata":
                    f.seek(section.begin)
                    fields = _llm_metadata(path, f.read(section.end - section.begin))
    except OSError as exc:
        raise LlamaModelException(f"cannot read the model file {path}: {exc.strerror or exc}",
                                  {"path": str(path)}) from None
    return BundleInfo(path, (major, minor, patch), tuple(sections), system, fields.template, fields.model_type,
                      tuple(fields.channels or ()), fields.max_num_tokens, fields.min_runtime_version,
                      fields.force_string_content)


def vocab_size(info: BundleInfo) -> int | None:
    """The vocabulary's size from the bundle's HuggingFace tokenizer (its largest id + 1), None when
    the bundle carries another kind of tokenizer or it does not decode."""
    section = next((s for s in info.sections if s.type == "hf_tokenizer_zlib"), None)
    if section is None:
        return None
    try:
        with info.path.open("rb") as f:
            f.seek(section.begin)
            data = f.read(section.end - section.begin)
        tokenizer = json.loads(zlib.decompress(data[8:]))
        ids = list((tokenizer.get("model") or {}).get("vocab", {}).values())
        ids += [t.get("id", -1) for t in tokenizer.get("added_tokens") or ()]
        return max(int(i) for i in ids) + 1 if ids else None
    except (OSError, ValueError, zlib.error, TypeError, AttributeError):
        return None


def _corrupt(path: Path, why: str) -> LlamaModelException:
    return LlamaModelException(f"{path.name} is not a readable LiteRT-LM bundle: {why}", {"path": str(path)})


def _truncated(path: Path, why: str) -> LlamaModelException:
    return LlamaModelException(f"{path.name} is truncated ({why}): download or export it again",
                               {"path": str(path)})


# -- the FlatBuffer header ----------------------------------------------------------------------


class _Table:
    """A FlatBuffer table: fields by index, bounds-checked (a corrupt offset raises ValueError)."""

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf, self.pos = buf, pos
        vtable = pos - _i32(buf, pos)
        self._vsize = _u16(buf, vtable)
        self._vtable = vtable

    def _field(self, index: int) -> int:
        slot = 4 + 2 * index
        if slot >= self._vsize:
            return 0
        offset = _u16(self.buf, self._vtable + slot)
        return self.pos + offset if offset else 0

    def scalar(self, index: int, fmt: str, default: int | float | bool = 0) -> int | float | bool:
        at = self._field(index)
        if not at:
            return default
        _check(self.buf, at, struct.calcsize(fmt))
        value: int | float | bool = struct.unpack_from("<" + fmt, self.buf, at)[0]
        return value

    def _ref(self, index: int) -> int:
        at = self._field(index)
        return at + _u32(self.buf, at) if at else 0

    def table(self, index: int) -> _Table | None:
        at = self._ref(index)
        return _Table(self.buf, at) if at else None

    def string(self, index: int) -> str | None:
        at = self._ref(index)
        if not at:
            return None
        n = _u32(self.buf, at)
        _check(self.buf, at + 4, n)
        return self.buf[at + 4: at + 4 + n].decode("utf-8", errors="replace")

    def tables(self, index: int) -> Iterator[_Table]:
        at = self._ref(index)
        if not at:
            return
        for i in range(_u32(self.buf, at)):
            item = at + 4 + 4 * i
            yield _Table(self.buf, item + _u32(self.buf, item))


def _check(buf: bytes, at: int, n: int) -> None:
    if at < 0 or at + n > len(buf):
        raise ValueError(f"offset {at}+{n} outside the header ({len(buf)} bytes)")


def _u16(buf: bytes, at: int) -> int:
    _check(buf, at, 2)
    return int(struct.unpack_from("<H", buf, at)[0])


def _u32(buf: bytes, at: int) -> int:
    _check(buf, at, 4)
    return int(struct.unpack_from("<I", buf, at)[0])


def _i32(buf: bytes, at: int) -> int:
    _check(buf, at, 4)
    return int(struct.unpack_from("<i", buf, at)[0])


# VData's union members (litertlm_header_schema.fbs), by union type id: the struct format of each
_VDATA = {1: "B", 2: "b", 3: "H", 4: "h", 5: "I", 6: "i", 7: "f", 8: "?", 10: "Q", 11: "q", 12: "d"}
_VDATA_STRING = 9


def _header(path: Path, buf: bytes) -> tuple[list[Section], dict[str, object]]:
    try:
        root = _Table(buf, _u32(buf, 0))
        sections = []
        section_metadata = root.table(1)
        if section_metadata is None:
            raise ValueError("no section metadata")
        for obj in section_metadata.tables(0):
            kind = int(obj.scalar(3, "B"))
            sections.append(Section(SECTION_TYPES[kind] if kind < len(SECTION_TYPES) else f"type {kind}",
                                    int(obj.scalar(1, "Q")), int(obj.scalar(2, "Q"))))
        system: dict[str, object] = {}
        system_metadata = root.table(0)
        for pair in system_metadata.tables(0) if system_metadata is not None else ():
            key, kind, value = pair.string(0), int(pair.scalar(1, "B")), pair.table(2)
            if key is None or value is None:
                continue
            system[key] = value.string(0) if kind == _VDATA_STRING else \
                value.scalar(0, _VDATA[kind]) if kind in _VDATA else None
    except (ValueError, struct.error, IndexError) as exc:
        raise _corrupt(path, f"its header does not decode ({exc})") from None
    return sections, system


# -- the LlmMetadata protocol buffer ----------------------------------------------------------------


@dataclass
class _LlmFields:
    template: str | None = None
    model_type: str | None = None
    channels: list[Channel] | None = None
    max_num_tokens: int = 0
    min_runtime_version: str | None = None
    force_string_content: bool = False

    def __post_init__(self) -> None:
        self.channels = self.channels or []


def _proto_fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) pairs of a protocol-buffer message: varints and fixed values as ints,
    length-delimited ones as bytes. Raises ValueError for a message that does not decode."""
    at, n = 0, len(data)

    def varint() -> int:
        nonlocal at
        value = shift = 0
        while True:
            if at >= n or shift > 63:
                raise ValueError("a varint runs past the message")
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while at < n:
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            yield number, varint()
        elif wire == 2:
            length = varint()
            if at + length > n:
                raise ValueError("a field runs past the message")
            yield number, data[at: at + length]
            at += length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if at + size > n:
                raise ValueError("a field runs past the message")
            yield number, int.from_bytes(data[at: at + size], "little")
            at += size
        else:
            raise ValueError(f"wire type {wire} (field {number})")


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise ValueError("a string field holds a number")
    return value.decode("utf-8", errors="replace")


def _llm_metadata(path: Path, data: bytes) -> _LlmFields:
    out = _LlmFields()
    channels: list[Channel] = []
    try:
        for number, value in _proto_fields(data):
            if number == 5 and isinstance(value, int):
                out.max_num_tokens = value
            elif number == 6 and isinstance(value, bytes):
                for kind, body in _proto_fields(value):
                    out.model_type = MODEL_TYPES.get(kind, f"type {kind}")
                    if kind == 1 and isinstance(body, bytes):
                        out.force_string_content = any(f == 2 and v == 1 for f, v in _proto_fields(body))
            elif number == 7:
                out.template = _text(value)
            elif number == 8 and isinstance(value, bytes):
                parts = dict(_proto_fields(value))
                channels.append(Channel(_text(parts.get(1, b"")), _text(parts.get(2, b"")), _text(parts.get(3, b"")),
                                        parts.get(4) == 1))
            elif number == 14:
                out.min_runtime_version = _text(value)
    except ValueError as exc:
        raise _corrupt(path, f"its LLM metadata does not decode ({exc})") from None
    out.channels = channels
    return out
