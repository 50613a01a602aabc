"""Where models run: the devices ggml registered, and the RPC server a machine lends to others."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import LlamaUnsupportedException
from ..native.devices import Device, list_devices

RPC_SERVER_NAME = "ggml-rpc-server.exe" if sys.platform == "win32" else "ggml-rpc-server"

__all__ = ["Device", "devices", "rpc_server_command", "rpc_server_path"]


def devices() -> list[Device]:
    """ggml's registered devices with their memory: the CPU, each GPU of the compiled backends,
    and the RPC servers this process has added (``ModelParams(rpc_servers=...)``). Their names are
    what ``ModelParams(devices=[...])`` takes.

    Raises:
        LlamaUnsupportedException: the native library is not built or cannot be loaded.
    """
    return list_devices()


def rpc_server_path() -> Path:
    """Upstream's ggml-rpc-server installed with llamact (``$LLAMACT_BIN_DIR`` first)."""
    candidates = []
    if os.environ.get("LLAMACT_BIN_DIR"):
        candidates.append(Path(os.environ["LLAMACT_BIN_DIR"]) / RPC_SERVER_NAME)
    candidates.append(Path(__file__).resolve().parent.parent / "_bin" / RPC_SERVER_NAME)
    for path in candidates:
        if path.is_file():
            return path
    raise LlamaUnsupportedException(
        f"{RPC_SERVER_NAME} is not installed (looked in {', '.join(map(str, candidates))}); "
        'rebuild llamact with the RPC backend (the default; CMAKE_ARGS="-DGGML_RPC=on" pip install .)'
    )


def rpc_server_command(
    host: str = "127.0.0.1",
    port: int = 50052,
    threads: int | None = None,
    devices: Sequence[str] = (),
    cache: bool = False,
) -> list[str]:
    """The argv that starts an RPC server lending this machine's devices to other llamact (or
    llama.cpp) processes. It has no authentication and trusts its clients with memory access:
    bind it to 127.0.0.1 or a private network, never to an exposed interface."""
    argv = [str(rpc_server_path()), "--host", host, "--port", str(port)]
    if threads:
        argv += ["--threads", str(threads)]
    if devices:
        argv += ["--device", ",".join(devices)]
    if cache:
        argv.append("--cache")
    return argv
