"""llama.cpp's RPC backend: remote ggml-rpc-server endpoints become devices a model offloads to.

ggml aborts the whole process when an endpoint it is given cannot be reached or does not speak
its protocol, so every endpoint is probed here first (TCP connect, then the RPC HELLO) and a
failure is a ``LlamaModelException``. Each endpoint is registered with ggml once per process
(ggml keeps registrations for the life of the process; registering twice would duplicate its
devices).
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Sequence
from typing import Any

from ..errors import LlamaModelException, LlamaUnsupportedException
from . import llama_h
from ._library import native

#: the registry name ggml gives the RPC backend (llama.cpp's default device selection uses it too)
RPC_REGISTRY = "RPC"

# ggml-rpc.cpp at the pin: a request is | cmd u8 | size u64 | payload |, a reply | size u64 | payload |.
_CMD_HELLO = 14
_CONN_CAPS_SIZE = 24
_HELLO_REPLY_SIZE = 4 + _CONN_CAPS_SIZE   # major, minor, patch, padding, conn_caps
_PROTO_MAJOR = 7                          # RPC_PROTO_MAJOR_VERSION in ggml-rpc.h
PROBE_TIMEOUT_S = 5.0

_lock = threading.Lock()
_registered: dict[str, list[int]] = {}  # endpoint -> its device handles


def parse_endpoint(endpoint: object) -> tuple[str, int]:
    """``"host:port"`` -> (host, port), refusing what ggml would misparse."""
    if not isinstance(endpoint, str) or endpoint.count(":") != 1:
        raise LlamaModelException(
            f"an RPC server is given as 'host:port' (e.g. '192.168.1.10:50052'), got {endpoint!r}",
            {"endpoint": repr(endpoint)},
        )
    host, _, port_text = endpoint.partition(":")
    if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise LlamaModelException(
            f"an RPC server is given as 'host:port' with a port in 1..65535, got {endpoint!r}",
            {"endpoint": endpoint},
        )
    return host, int(port_text)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the connection closed mid-reply")
        data += chunk
    return data


def probe(endpoint: str, hello: bool = True, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Raise LlamaModelException unless ``endpoint`` accepts a TCP connection and (``hello``)
    answers the RPC HELLO with a protocol version this build speaks.

    An rpc-server serves one client at a time: an endpoint another client holds accepts the
    connection but does not answer within ``timeout``, which is reported as such."""
    host, port = parse_endpoint(endpoint)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            if not hello:
                return
            sock.sendall(struct.pack("<BQ", _CMD_HELLO, _CONN_CAPS_SIZE) + bytes(_CONN_CAPS_SIZE))
            (size,) = struct.unpack("<Q", _recv_exactly(sock, 8))
            if size != _HELLO_REPLY_SIZE:
                raise ConnectionError(f"unexpected HELLO reply size {size}")
            major, minor, patch = _recv_exactly(sock, _HELLO_REPLY_SIZE)[:3]
    except TimeoutError as exc:
        raise LlamaModelException(
            f"RPC server {endpoint} did not answer within {timeout:g} s (is it serving another client?)",
            {"endpoint": endpoint},
        ) from exc
    except (OSError, ConnectionError, struct.error) as exc:
        raise LlamaModelException(
            f"cannot reach RPC server {endpoint}: {exc}. Start one there with `llamact rpc-server "
            "--host HOST --port PORT` (upstream's ggml-rpc-server) on a trusted network only",
            {"endpoint": endpoint},
        ) from exc
    if major != _PROTO_MAJOR:
        raise LlamaModelException(
            f"RPC server {endpoint} speaks protocol {major}.{minor}.{patch}; this build speaks {_PROTO_MAJOR}.x "
            "(run a ggml-rpc-server from the same llama.cpp version)",
            {"endpoint": endpoint, "version": f"{major}.{minor}.{patch}"},
        )


def _add_server_fn() -> Any:
    lib = native()
    reg = lib.ggml.ggml_backend_reg_by_name(RPC_REGISTRY.encode())
    address = lib.ggml.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_rpc_add_server") if reg else None
    if not address:
        raise LlamaUnsupportedException(
            "this llamact build has no RPC backend; rebuild with CMAKE_ARGS=\"-DGGML_RPC=on\" pip install ."
        )
    return llama_h.ggml_backend_rpc_add_server_t(address)


def rpc_devices(endpoints: Sequence[str]) -> list[int]:
    """The device handles of ``endpoints`` (in order), registering each new one with ggml after
    probing it; one already registered is only checked to still accept connections."""
    if isinstance(endpoints, str):
        endpoints = [endpoints]
    for endpoint in endpoints:
        parse_endpoint(endpoint)
    if len(set(endpoints)) != len(endpoints):
        raise LlamaModelException(f"an RPC server is listed twice in {list(endpoints)}", {"endpoints": list(endpoints)})
    handles: list[int] = []
    with _lock:
        for endpoint in endpoints:
            known = _registered.get(endpoint)
            if known is not None:
                # A model in this process may hold the server's only connection: no HELLO.
                probe(endpoint, hello=False)
                handles.extend(known)
                continue
            probe(endpoint)
            add_server = _add_server_fn()
            reg = add_server(endpoint.encode())
            ggml = native().ggml
            count = int(ggml.ggml_backend_reg_dev_count(reg)) if reg else 0
            if not count:
                raise LlamaModelException(f"RPC server {endpoint} offers no devices", {"endpoint": endpoint})
            ggml.ggml_backend_register(reg)
            devs = [int(ggml.ggml_backend_reg_dev_get(reg, i)) for i in range(count)]
            _registered[endpoint] = devs
            handles.extend(devs)
    return handles


def any_registered() -> bool:
    return bool(_registered)


def reachable(endpoint: str) -> bool:
    """Whether ``endpoint`` still accepts connections (ggml aborts on a server that went away)."""
    try:
        probe(endpoint, hello=False, timeout=2.0)
    except LlamaModelException:
        return False
    return True
