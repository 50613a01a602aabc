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
    dangling pointer to C. A dependent (a context of a model) holds its owner by reference and is
    closed before it. The collector finalises a reference cycle in no set order, after clearing
    weak references, so an owner also counts its open dependents: one finalised while some are
    still open leaves its free to the last of them.
    """

    _kind = "resource"

    def __init__(self, pointer: int, free: Callable[[Any], None]) -> None:
        self._ptr: int | None = pointer
        self._free = free
        self._close_lock = threading.RLock()
        self._dependents: weakref.WeakSet[NativeHandle] = weakref.WeakSet()
        self._open_dependents = 0
        self._owner: NativeHandle | None = None
        self._orphan: int | None = None  # closed, free deferred until the open dependents close

    def _adopt(self, dependent: NativeHandle) -> None:
        """Register a handle that must be closed before this one (a context of a model)."""
        with self._close_lock:
            self._dependents.add(dependent)
            self._open_dependents += 1
        dependent._owner = self

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
        """Close the dependents, then free this resource. Idempotent and thread-safe: when
        ``close()`` returns, in any thread, the resource has been freed (a concurrent caller
        waits for the free in progress instead of returning early)."""
        for dependent in list(self._dependents):
            dependent.close()
        with self._close_lock:
            ptr, self._ptr = self._ptr, None
            if ptr is None:
                return
            if self._open_dependents > 0:
                # The collector (see the class docstring), or a dependent adopted while closing.
                self._orphan = ptr
                return
            self._release(ptr)

    def _release(self, ptr: int) -> None:
        """Free ``ptr`` (the lock is held), then tell the owner. Locks go dependent -> owner."""
        try:
            self._free(ptr)
        finally:
            owner, self._owner = self._owner, None
            if owner is not None:
                owner._dependent_closed()

    def _dependent_closed(self) -> None:
        with self._close_lock:
            self._open_dependents -= 1
            ptr = self._orphan
            if ptr is not None and self._open_dependents == 0:
                self._orphan = None
                self._release(ptr)

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
