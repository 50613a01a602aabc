"""What keys the answer caches of upstream's programs (the oracle, llama-server): a sha256 over the
executable and the shared libraries beside it, so that any rebuild that changes the code answering
asks afresh, and a rebuild that changes nothing keeps the answers.

llamact's own shim (``libllamact-shim``) is left out: neither program loads it, and counting it
threw every cached answer away on each change to the shim. Builds are reproducible across
checkouts (the CMake build writes the install RPATH at link time, so a build folder's path leaves
no trace in the binaries), which is what lets CI's clean clone read the answers a checkout cached.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["upstream_binary_identity"]

OWN_LIBRARIES = ("libllamact",)   # llamact's code, never loaded by upstream's programs


def upstream_binary_identity(executable: Path) -> str:
    """sha256 over ``executable`` and the upstream libraries in ``../_lib`` (an install's layout)
    and beside it (a build folder's)."""
    files = [executable]
    for lib_dir in (executable.parent.parent / "_lib", executable.parent):
        if lib_dir.is_dir():
            files += sorted(p for p in lib_dir.iterdir()
                            if p.is_file() and ".so" in p.name and not p.name.startswith(OWN_LIBRARIES))
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode("utf-8") + b"\0")
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()
