"""State files on disk: opened only when they are regular files, and sealed with a checksum when
llamact writes them for itself.

    data = read_state_file(path)      # the bytes, the seal checked and removed; LlamaStateException
    refuse_special_target(path)       # before llama.cpp opens ``path`` to write it
    seal(path)                        # append the checksum (llamact's own files)

**Special files.** A FIFO, a device or a directory where a state file is expected would block the
reader (opening a FIFO waits for a writer: a server restoring one froze for minutes) or read without
end; they are refused before anything reads or writes them. A file is opened without blocking and
checked on the descriptor it was opened as (no window in which the name could change).

**The seal.** llama.cpp's session and sequence files carry no checksum: a flipped bit in the KV
cells loads and generates garbage. llamact's own state files (``LlamaEngine.save_state``, a
session's ``kv.state``) are llama.cpp's file followed by a 48-byte trailer: ``SEAL_MAGIC`` (16
bytes) and the SHA-256 of everything before it. A sealed file whose digest does not match is
refused; a file without the trailer is read as llama.cpp's (older llamact files, llama.cpp's own).
llama-server's slot files are left unsealed, so they still move between the two servers both
ways. To give a sealed file to llama.cpp's own tools, drop its last 48 bytes.
"""

from __future__ import annotations

import hashlib
import os
import stat

from ..errors import LlamaStateException

__all__ = ["SEAL_MAGIC", "SEAL_SIZE", "read_state_file", "refuse_special_target", "seal"]

SEAL_MAGIC = b"llamact-sha256\x00\x01"   # 16 bytes: the name, a NUL, the seal's version
SEAL_SIZE = len(SEAL_MAGIC) + 32
_CHUNK = 1 << 20


def _not_regular(path: str | os.PathLike[str], mode: int) -> LlamaStateException:
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "not a regular file")
    return LlamaStateException(f"{path} is {kind}, not a state file: refused before reading or writing it",
                               {"path": str(path)})


def read_state_file(path: str | os.PathLike[str]) -> memoryview:
    """The bytes of the state file at ``path`` (a sealed file without its trailer, once its digest
    matched). LlamaStateException for a file that cannot be read, is not a regular file, or whose
    seal does not match."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise LlamaStateException(f"could not read a state from {path}: {exc.strerror}", {"path": str(path)}) from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(path, mode)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read()
    except OSError as exc:
        raise LlamaStateException(f"could not read a state from {path}: {exc.strerror}", {"path": str(path)}) from exc
    finally:
        os.close(fd)
    return _unsealed(memoryview(data), path)


def _unsealed(data: memoryview, path: str | os.PathLike[str]) -> memoryview:
    if len(data) < SEAL_SIZE or data[-SEAL_SIZE:-32] != SEAL_MAGIC:
        return data   # llama.cpp's own file: nothing to check
    body = data[:-SEAL_SIZE]
    if hashlib.sha256(body).digest() != data[-32:]:
        raise LlamaStateException(
            f"could not load a state from {path}: its checksum does not match its contents (the file was changed "
            "or damaged after llamact wrote it)", {"path": str(path)})
    return body


def refuse_special_target(path: str | os.PathLike[str]) -> None:
    """Refuse to write a state over something that is not a regular file (a FIFO would block the
    writer until a reader came)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return   # nothing there (or llama.cpp will say why it cannot write)
    if not stat.S_ISREG(mode):
        raise _not_regular(path, mode)


def seal(path: str | os.PathLike[str]) -> None:
    """Append the trailer (see the module docstring) to the file llama.cpp just wrote."""
    digest = hashlib.sha256()
    try:
        with open(path, "r+b") as fh:
            for chunk in iter(lambda: fh.read(_CHUNK), b""):
                digest.update(chunk)
            fh.write(SEAL_MAGIC + digest.digest())
    except OSError as exc:
        raise LlamaStateException(f"could not seal the state file {path}: {exc.strerror}", {"path": str(path)}) from exc
