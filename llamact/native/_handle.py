"""One owner per native resource: freed exactly once, refused after close."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from ..errors import LlamaStateException


class NativeHandle:
    """Owns one native pointer and the function that frees it.

    ``close()`` is idempotent; any use afterwards raises LlamaStateException instead of passing a
    dangling pointer to C. Owners that others depend on (a model under its contexts) keep their
    dependents alive by reference, so Python's collector never frees a model before its contexts.
    """

    _kind = "resource"

    def __init__(self, pointer: int, free: Callable[[Any], None]) -> None:
        self._ptr: int | None = pointer
        self._free = free
        self._close_lock = threading.Lock()
        self._dependents: weakref.WeakSet[NativeHandle] = weakref.WeakSet()

    def _adopt(self, dependent: NativeHandle) -> None:
        """Register a handle that must be closed before this one (a context of a model)."""
        self._dependents.add(dependent)

    @property
    def closed(self) -> bool:
        return self._ptr is None

    @property
    def ptr(self) -> int:
        """The live native pointer; raises if this handle was closed."""
        ptr = self._ptr
        if ptr is None:
            raise LlamaStateException(
                f"this {self._kind} was closed; create a new one to keep working",
                {"kind": self._kind},
            )
        return ptr

    def check_open(self) -> None:
        """Raise LlamaStateException if this handle was closed."""
        self.ptr  # noqa: B018 - the property raises when closed

    def close(self) -> None:
        for dependent in list(self._dependents):
            dependent.close()
        with self._close_lock:
            ptr, self._ptr = self._ptr, None
        if ptr is not None:
            self._free(ptr)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Interpreter shutdown may already have torn down ctypes; a leak at exit is harmless.
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self._ptr is None else f"0x{self._ptr:x}"
        return f"<{type(self).__name__} {state}>"
