"""The installed binaries carry no trace of the folder they were built in, so the same sources give
the same bytes in any checkout: the answer caches of the oracle and llama-server
(llamact/parity/binary_identity.py) are keyed by those bytes, and CI's clean clone must read what a
checkout cached (it did not: a build relinked at install kept the build folder's RPATH as padding
in the string table, so every cached answer of CI's clone missed, minutes of each run).

Read with a small ELF64 reader: the RUNPATH string must be followed directly by the next string
(or the table's end), not by the NUL padding a longer, rewritten path leaves."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

import llamact
from llamact.native._library import library_dir

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF binaries: Linux builds")

DT_RPATH, DT_RUNPATH = 15, 29


def _sections(data: bytes) -> dict[str, tuple[int, int]]:
    """Section name -> (file offset, size) of a little-endian ELF64 file."""
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "not a little-endian ELF64 file"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    found = {}
    for name_off, _type, _flags, _addr, offset, size, *_ in headers:
        end = data.index(b"\0", names_at + name_off)
        found[data[names_at + name_off:end].decode()] = (offset, size)
    return found


def _runpath_padding(path: Path) -> tuple[str, int] | None:
    """(the RUNPATH, how many NUL bytes follow its terminator) or None without one."""
    data = path.read_bytes()
    sections = _sections(data)
    dyn_off, dyn_size = sections[".dynamic"]
    str_off, str_size = sections[".dynstr"]
    for i in range(0, dyn_size, 16):
        tag, value = struct.unpack_from("<qQ", data, dyn_off + i)
        if tag in (DT_RPATH, DT_RUNPATH):
            start = str_off + value
            end = data.index(b"\0", start)
            after = end + 1
            while after < str_off + str_size and data[after] == 0:
                after += 1
            return data[start:end].decode(), after - end - 1
    return None


def _installed_binaries() -> list[Path]:
    bin_dir = Path(llamact.__file__).parent / "_bin"
    files = [p for p in library_dir().iterdir() if ".so" in p.name and not p.is_symlink()]
    files += [p for p in bin_dir.iterdir() if p.is_file()] if bin_dir.is_dir() else []
    return sorted(files)


def test_the_reader_sees_padding_where_a_path_was_rewritten(tmp_path: Path) -> None:
    """The check can fail: a copy whose RUNPATH was overwritten in place by a shorter one (as an
    install's rewrite of a longer build path does) shows the difference as padding."""
    library = next(p for p in _installed_binaries() if p.name.startswith("libggml-base"))
    runpath, padding = _runpath_padding(library) or ("", 0)
    assert runpath.startswith("$ORIGIN"), runpath
    data = bytearray(library.read_bytes())
    str_off, _ = _sections(bytes(data))[".dynstr"]
    start = data.index(runpath.encode() + b"\0", str_off)
    data[start:start + len(runpath)] = b"$O" + b"\0" * (len(runpath) - 2)
    rewritten = tmp_path / library.name
    rewritten.write_bytes(bytes(data))
    assert _runpath_padding(rewritten) == ("$O", padding + len(runpath) - 2)


def test_installed_binaries_keep_no_build_folder_in_their_runpath() -> None:
    binaries = _installed_binaries()
    assert any(p.name.startswith("libllama.so") for p in binaries)
    padded = {}
    for path in binaries:
        found = _runpath_padding(path)
        assert found is not None, f"{path.name} has no RUNPATH (its siblings would not be found)"
        if found[1]:
            padded[path.name] = found
    assert not padded, f"RUNPATH rewritten at install, the build folder's length left as padding: {padded}"
