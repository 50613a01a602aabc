"""ggml's registered compute devices (CPU, GPUs, RPC servers) and the device lists a model load takes."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import LlamaModelException, LlamaUnsupportedException
from . import llama_h, rpc
from ._library import NativeLibrary, native
from .rpc import RPC_REGISTRY

_TYPE_NAMES = {
    llama_h.GgmlBackendDevType.CPU: "cpu",
    llama_h.GgmlBackendDevType.GPU: "gpu",
    llama_h.GgmlBackendDevType.IGPU: "igpu",
    llama_h.GgmlBackendDevType.ACCEL: "accel",
    llama_h.GgmlBackendDevType.META: "meta",
}
_KNOWN_TYPES = {int(kind) for kind in llama_h.GgmlBackendDevType}


@dataclass(frozen=True)
class Device:
    """One device ggml can compute on. ``name`` is what ``ModelParams(devices=[...])`` takes."""

    name: str
    description: str
    type: str           # "cpu", "gpu", "igpu" (shares host memory), "accel" (BLAS, AMX), "meta"
    backend: str        # the registry that provides it: "CPU", "Vulkan", "CUDA", "RPC", ...
    memory_free: int    # bytes
    memory_total: int   # bytes


def _ggml(lib: NativeLibrary) -> ctypes.CDLL:
    needed = ("ggml_backend_dev_count", "ggml_backend_dev_get", "ggml_backend_dev_memory")
    missing = [name for name in needed if name in lib.ggml_missing]
    if missing:
        raise LlamaUnsupportedException(
            f"libggml lacks the device API ({', '.join(missing)}); reinstall llamact", {"missing": missing}
        )
    return lib.ggml


def _text(value: bytes | None) -> str:
    return value.decode("utf-8", errors="replace") if value else ""


def _describe(ggml: ctypes.CDLL, dev: int) -> Device:
    kind = int(ggml.ggml_backend_dev_type(dev))
    reg = ggml.ggml_backend_dev_backend_reg(dev)
    backend = _text(ggml.ggml_backend_reg_name(reg)) if reg else ""
    description = _text(ggml.ggml_backend_dev_description(dev))
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    # An RPC device's description is its endpoint; asking a server that has gone away for its
    # memory aborts the process, so such a device reports 0 bytes instead.
    if backend != RPC_REGISTRY or rpc.reachable(description):
        ggml.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
    return Device(
        name=_text(ggml.ggml_backend_dev_name(dev)),
        description=description,
        type=_TYPE_NAMES.get(llama_h.GgmlBackendDevType(kind), str(kind)) if kind in _KNOWN_TYPES else str(kind),
        backend=backend,
        memory_free=int(free.value),
        memory_total=int(total.value),
    )


def _handles(ggml: ctypes.CDLL) -> list[int]:
    return [int(ggml.ggml_backend_dev_get(i)) for i in range(int(ggml.ggml_backend_dev_count()))]


def list_devices() -> list[Device]:
    """Every device registered in this process, in ggml's order (RPC servers once added)."""
    ggml = _ggml(native())
    return [_describe(ggml, dev) for dev in _handles(ggml)]


class DeviceList:
    """A NULL-terminated ``ggml_backend_dev_t`` array for ``llama_model_params.devices``; keep it
    alive for the duration of the load call."""

    def __init__(self, handles: Sequence[int]) -> None:
        self.names: tuple[str, ...] = ()
        self.array = (llama_h.ggml_backend_dev_t * (len(handles) + 1))(*handles, None)

    def __len__(self) -> int:
        return len(self.array) - 1

    @property
    def pointer(self) -> ctypes._Pointer[ctypes.c_void_p]:
        return ctypes.cast(self.array, ctypes.POINTER(llama_h.ggml_backend_dev_t))


def devices_named(names: Sequence[str]) -> DeviceList:
    """The devices called ``names`` (as ``list_devices()`` reports them), in that order."""
    ggml = _ggml(native())
    by_name: dict[str, int] = {}
    for dev in _handles(ggml):
        by_name.setdefault(_text(ggml.ggml_backend_dev_name(dev)), dev)
    chosen: list[int] = []
    for name in names:
        if not isinstance(name, str) or name not in by_name:
            raise LlamaModelException(
                f"unknown device {name!r}; this process has: {', '.join(by_name) or 'none'} "
                "(llamact.devices() lists them; RPC servers appear once rpc_servers names them)",
                {"device": repr(name), "available": list(by_name)},
            )
        if int(ggml.ggml_backend_dev_type(by_name[name])) == llama_h.GgmlBackendDevType.CPU:
            raise LlamaModelException(
                f"{name!r} is the CPU, which always takes what is not offloaded: devices names the "
                "devices to offload to (devices=[] offloads nothing)",
                {"device": name},
            )
        if by_name[name] in chosen:
            raise LlamaModelException(f"device {name!r} is listed twice", {"device": name})
        chosen.append(by_name[name])
    result = DeviceList(chosen)
    result.names = tuple(names)
    return result


def local_default_devices() -> DeviceList:
    """What llama.cpp picks by default (dedicated GPUs, else integrated ones), without RPC
    servers: once a process has added RPC servers, a load that did not ask for them must not
    silently offload to them (and abort if one has gone away since)."""
    ggml = _ggml(native())
    gpus: list[int] = []
    igpus: list[int] = []
    for dev in _handles(ggml):
        kind = int(ggml.ggml_backend_dev_type(dev))
        reg = ggml.ggml_backend_dev_backend_reg(dev)
        if reg and _text(ggml.ggml_backend_reg_name(reg)) == RPC_REGISTRY:
            continue
        if kind == llama_h.GgmlBackendDevType.GPU:
            gpus.append(dev)
        elif kind == llama_h.GgmlBackendDevType.IGPU and (not igpus or _same_registry(ggml, dev, igpus[0])):
            igpus.append(dev)  # one integrated GPU seen through several backends counts once
    return DeviceList(gpus or igpus)


def _same_registry(ggml: ctypes.CDLL, a: int, b: int) -> bool:
    return bool(ggml.ggml_backend_dev_backend_reg(a) == ggml.ggml_backend_dev_backend_reg(b))
