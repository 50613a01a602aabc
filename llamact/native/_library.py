"""Finding and loading the native libraries that the build installed next to the package.

``llamact/_lib`` holds libllama and ggml (installed there by CMake with an ``$ORIGIN`` rpath);
``LLAMACT_LIB_DIR`` points elsewhere (a development build). Loading happens once per process, on
first use; the backend is initialised then and freed at interpreter exit.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import sys
import threading
from pathlib import Path

from ..errors import LlamaUnsupportedException
from . import llama_h, mtmd_h, shim
from .log import LOG_CALLBACK

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def _shared_name(stem: str) -> str:
    if sys.platform == "darwin":
        return f"lib{stem}.dylib"
    if sys.platform == "win32":
        return f"{stem}.dll"
    return f"lib{stem}.so"


def library_dir() -> Path:
    override = os.environ.get("LLAMACT_LIB_DIR")
    return Path(override).expanduser() if override else _PACKAGE_DIR / "_lib"


class NativeLibrary:
    """The loaded libllama (``llama``) and libggml (``ggml``), with prototypes bound."""

    def __init__(self, directory: Path) -> None:
        llama_path = directory / _shared_name("llama")
        if not llama_path.exists():
            raise LlamaUnsupportedException(
                f"llamact's native library is missing ({llama_path}). The package was installed "
                "without its compiled part: reinstall with `pip install .` from a source tree "
                "(which builds llama.cpp), or set LLAMACT_LIB_DIR to a folder holding libllama.",
                {"path": str(llama_path)},
            )
        # RTLD_LOCAL: each library resolves its symbols in its own dependency tree first, as in a
        # program linked against them. With RTLD_GLOBAL the backends loaded with libggml came first in
        # the process's global scope, so libllama's own copies of C++ template code (std::regex in its
        # tokenizer) bound to libggml-cuda's, compiled by nvcc's host pass: loading any model
        # segfaulted in a CUDA build (seen on an H200, CUDA 13.0; a backtrace shows libllama's
        # _BracketMatcher calling into libggml-cuda).
        mode = getattr(os, "RTLD_LOCAL", 0)
        try:
            self.ggml_base = ctypes.CDLL(str(directory / _shared_name("ggml-base")), mode=mode)
            self.ggml = ctypes.CDLL(str(directory / _shared_name("ggml")), mode=mode)
            self.llama = ctypes.CDLL(str(llama_path), mode=mode)
        except OSError as exc:
            raise LlamaUnsupportedException(
                f"cannot load llamact's native library from {directory}: {exc}",
                {"path": str(directory)},
            ) from exc
        self.directory = directory
        # multimodal projectors (images, audio): loaded before the shim, which links it. A wheel holds
        # libmtmd.so and libmtmd.so.0 as two files (no symlinks in a zip): loaded by path after the shim
        # pulled in .so.0, .so would be a second copy, whose logger the log router would set
        try:
            self.mtmd = ctypes.CDLL(str(directory / _shared_name("mtmd")), mode=mode)
        except OSError as exc:
            raise LlamaUnsupportedException(
                f"cannot load llamact's libmtmd from {directory}: {exc}; reinstall llamact",
                {"path": str(directory)},
            ) from exc
        try:
            self.shim = ctypes.CDLL(str(directory / _shared_name("llamact-shim")), mode=mode)
        except OSError as exc:
            raise LlamaUnsupportedException(
                f"cannot load llamact's shim library from {directory}: {exc}; reinstall llamact",
                {"path": str(directory)},
            ) from exc
        shim_missing = llama_h.bind(self.shim, {**shim.SHIM_FUNCTIONS, **mtmd_h.MEDIA_SHIM_FUNCTIONS})
        shim_missing += llama_h.bind(self.mtmd, mtmd_h.MTMD_FUNCTIONS)
        if shim_missing:
            raise LlamaUnsupportedException(f"libllamact-shim lacks {', '.join(shim_missing)}; reinstall llamact")
        missing = llama_h.bind(self.llama, llama_h.FUNCTIONS)
        if missing:
            raise LlamaUnsupportedException(
                f"libllama at {llama_path} lacks {len(missing)} expected functions "
                f"(e.g. {', '.join(missing[:5])}); it is not the pinned llama.cpp build",
                {"missing": missing},
            )
        # dlsym on libggml also searches its dependency ggml-base, where the device API lives.
        self.ggml_missing = llama_h.bind(self.ggml, llama_h.GGML_FUNCTIONS)


_lock = threading.Lock()
_instance: NativeLibrary | None = None


def native() -> NativeLibrary:
    """The process-wide native library, loaded and initialised on first call."""
    global _instance
    if _instance is not None:
        return _instance
    with _lock:
        if _instance is None:
            lib = NativeLibrary(library_dir())
            lib.llama.llama_log_set(LOG_CALLBACK, None)
            lib.mtmd.mtmd_helper_log_set(LOG_CALLBACK, None)   # mtmd and its helpers log through their own setter
            lib.llama.llama_backend_init()
            atexit.register(lib.llama.llama_backend_free)
            _instance = lib
    return _instance
