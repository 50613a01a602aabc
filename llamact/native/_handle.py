"""One owner per native resource: freed exactly once, refused after close, never freed while in use."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from ..errors import LlamaStateException


class NativeHandle:
    """Owns one native pointer and the function that frees it.

    ``close()`` is idempotent; any use afterwards raises LlamaStateException instead of passing a
    dangling pointer to C. A native call runs with the handle *pinned* (``with handle.pinned() as
    ptr:``): the handle's lock is held for the call, so a ``close()`` from another thread waits for
    it to return before freeing (a subclass whose calls can run long makes them return early first,
    as Context does with its abort flag). Concurrent calls on one handle take turns; llama.cpp's
    objects are not safe for concurrent use anyway.

    A dependent (a context of a model) holds its owner by reference and is closed before it: the
    owner's ``close()`` marks it closed (new uses and new dependents are refused), closes the
    dependents, then frees. Locks are taken dependent -> owner, never the other way. The collector
    finalises a reference cycle in no set order, after clearing weak references, so an owner also
    counts its open dependents: one finalised while some are still open leaves its free to the last
    of them.
    """

    _kind = "resource"

    def __init__(self, pointer: int, free: Callable[[Any], None]) -> None:
        self._ptr: int | None = pointer
        self._free = free
        self._close_lock = threading.RLock()  # held by every pinned call and by the free
        self._dependents: weakref.WeakSet[NativeHandle] = weakref.WeakSet()
        self._open_dependents = 0
        self._owner: NativeHandle | None = None
        self._unfreed: int | None = None  # closed, not freed yet: the dependents close first
        self._orphan: int | None = None  # closed, free deferred until the open dependents close
        self._poison: LlamaStateException | None = None   # why it is unusable (poison()), if not closed

    def _adopt(self, dependent: NativeHandle) -> None:
        """Register a handle that must be closed before this one (a context of a model). Call it
        with this handle pinned, so that a concurrent ``close()`` sees the new dependent."""
        with self._close_lock:
            self.check_open()
            self._dependents.add(dependent)
            self._open_dependents += 1
        dependent._owner = self

    @property
    def closed(self) -> bool:
        return self._ptr is None

    def poison(self, error: LlamaStateException) -> None:
        """Make the handle unusable without freeing it: every use raises ``error`` (a forked child's
        copy of an object whose native state did not survive the fork: ``forks``)."""
        self._ptr, self._poison = None, error

    def _closed_error(self) -> LlamaStateException:
        if self._poison is not None:
            return self._poison
        return LlamaStateException(
            f"this {self._kind} was closed; create a new one to keep working", {"kind": self._kind}
        )

    @property
    def ptr(self) -> int:
        """The live native pointer; raises if this handle was closed. Only safe to pass to C while
        the handle is pinned (or from the thread that owns every use of it)."""
        ptr = self._ptr
        if ptr is None:
            raise self._closed_error()
        return ptr

    def check_open(self) -> None:
        """Raise LlamaStateException if this handle was closed."""
        self.ptr  # noqa: B018 - the property raises when closed

    def pinned(self) -> _Pinned:
        """``with handle.pinned() as ptr:`` the live pointer, not freed before the block ends.
        Raises LlamaStateException if the handle is closed."""
        return _Pinned(self)  # made per call: a cached one would be a reference cycle

    def close(self) -> None:
        """Close the dependents, then free this resource. Idempotent and thread-safe: waits for a
        pinned call in progress, and when ``close()`` returns, in any thread, the resource has been
        freed (a concurrent caller waits for the free in progress instead of returning early)."""
        with self._close_lock:
            ptr, self._ptr = self._ptr, None
            if ptr is not None:
                self._unfreed = ptr
        for dependent in list(self._dependents):
            dependent.close()
        with self._close_lock:
            self._wait_unpinned()
            ptr, self._unfreed = self._unfreed, None
            if ptr is None:  # freed by a concurrent close(), under this lock
                return
            if self._open_dependents > 0:
                # The collector (see the class docstring): the last dependent to close frees it.
                self._orphan = ptr
                return
            self._release(ptr)

    def _wait_unpinned(self) -> None:
        """Wait (the lock held) until no other thread has the handle pinned: here the lock itself
        excludes them; ``SharedHandle``'s pins run side by side and are counted."""

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
                self._wait_unpinned()
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


class _Pinned:
    """The context manager behind ``NativeHandle.pinned()``: a class, not a generator, because
    native calls on the per-token path go through it."""

    __slots__ = ("_handle",)

    def __init__(self, handle: NativeHandle) -> None:
        self._handle = handle

    def __enter__(self) -> int:
        handle = self._handle
        handle._close_lock.acquire()
        ptr = handle._ptr
        if ptr is None:
            handle._close_lock.release()
            raise handle._closed_error()
        return ptr

    def __exit__(self, *exc: object) -> None:
        self._handle._close_lock.release()


class SharedHandle(NativeHandle):
    """A handle whose pinned calls run side by side: for native objects that are read-only once made
    (a model: its weights and vocabulary), whose readers must not take turns -- a request's sampler
    set-up (DRY scans the whole vocabulary once per sequence breaker) would otherwise hold every
    other request's tokenizing, and the slots' token pieces, for as long as it runs.

    ``pinned()`` counts the pin instead of holding the lock through the call; ``close()`` (and
    ``exclusive()``, for the few calls that change the object: loading a LoRA adapter into a model)
    waits until the pins of other threads have ended, and new pins wait for it."""

    def __init__(self, pointer: int, free: Callable[[Any], None]) -> None:
        super().__init__(pointer, free)
        self._unpinned = threading.Condition(self._close_lock)
        self._pins = 0                         # pins in progress, every thread's
        self._own_pins = threading.local()     # this thread's (its own never block it)
        self._closing = False                  # close() waits for the pins: new ones wait for it

    def pinned(self) -> _SharedPin:  # type: ignore[override]
        return _SharedPin(self)

    def exclusive(self) -> _Exclusive:
        """``with handle.exclusive() as ptr:`` no other thread's call runs in the block."""
        return _Exclusive(self)

    def _wait_unpinned(self) -> None:
        while self._pins > getattr(self._own_pins, "n", 0):
            self._unpinned.wait()

    def close(self) -> None:
        """As ``NativeHandle.close()``, but the pointer is taken away only once the pins in progress
        have ended (new ones wait meanwhile): what the exclusive lock gave. A pinned call that made
        a native object of this handle's (a context, a sampler holding its vocabulary) has then
        registered it as a dependent before close() looks at the dependents, and no call runs on
        with the pointer once it is gone (a soak of 16 threads closing an engine mid-generation
        corrupted the heap without this)."""
        with self._close_lock:
            self._closing = True
            try:
                self._wait_unpinned()
                ptr, self._ptr = self._ptr, None
                if ptr is not None:
                    self._unfreed = ptr
            finally:
                self._closing = False
                self._unpinned.notify_all()
        super().close()


class _SharedPin:
    """``SharedHandle.pinned()``: the lock is taken only to count the pin in and out."""

    __slots__ = ("_handle",)

    def __init__(self, handle: SharedHandle) -> None:
        self._handle = handle

    def __enter__(self) -> int:
        handle = self._handle
        with handle._close_lock:
            while handle._closing and not getattr(handle._own_pins, "n", 0):
                handle._unpinned.wait()
            ptr = handle._ptr
            if ptr is None:
                raise handle._closed_error()
            handle._pins += 1
            own = handle._own_pins
            own.n = getattr(own, "n", 0) + 1
        return ptr

    def __exit__(self, *exc: object) -> None:
        handle = self._handle
        with handle._close_lock:
            handle._pins -= 1
            handle._own_pins.n -= 1
            handle._unpinned.notify_all()


class _Exclusive:
    """``SharedHandle.exclusive()``: the lock held through the call, once the other pins have ended."""

    __slots__ = ("_handle",)

    def __init__(self, handle: SharedHandle) -> None:
        self._handle = handle

    def __enter__(self) -> int:
        handle = self._handle
        handle._close_lock.acquire()
        try:
            handle._wait_unpinned()
            ptr = handle._ptr
            if ptr is None:
                raise handle._closed_error()
        except BaseException:
            handle._close_lock.release()
            raise
        return ptr

    def __exit__(self, *exc: object) -> None:
        self._handle._close_lock.release()
