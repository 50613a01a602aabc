"""NativeHandle: one owner per native pointer, freed exactly once, dependents before owners.

Most tests use fake pointers and a recording free function; the last ones wrap the real free
functions of libllama to check Model / Context / SamplerChain / the engine free exactly once.
"""

from __future__ import annotations

import functools
import gc
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from llamact.errors import LlamaStateException
from llamact.native._handle import NativeHandle, SharedHandle


class Recorder:
    """A fake ``free``: records every call (name, pointer) in order, optionally slow or blocking."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def free(self, name: str, delay: float = 0.0, gate: threading.Event | None = None,
             entered: threading.Event | None = None) -> Any:
        def _free(ptr: int) -> None:
            if entered is not None:
                entered.set()
            if gate is not None:
                assert gate.wait(10), "test gate never opened"
            if delay:
                time.sleep(delay)
            with self.lock:
                self.calls.append((name, ptr))

        return _free

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def count(self, name: str) -> int:
        return self.names().count(name)


class Fake(NativeHandle):
    _kind = "fake resource"


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture(autouse=True)
def _collect_between_tests() -> Iterator[None]:
    # Handles that the tests drop must be finalised inside the test that made them.
    gc.collect()
    yield
    gc.collect()


# -- free exactly once --------------------------------------------------------------------------


def test_close_frees_once_and_is_idempotent(rec: Recorder) -> None:
    h = Fake(0x1234, rec.free("h"))
    assert not h.closed
    assert h.ptr == 0x1234
    h.close()
    h.close()
    h.close()
    assert rec.calls == [("h", 0x1234)]
    assert h.closed
    del h
    gc.collect()
    assert rec.calls == [("h", 0x1234)], "__del__ after close() must not free again"


def test_use_after_close_raises_state_exception_naming_the_kind(rec: Recorder) -> None:
    h = Fake(7, rec.free("h"))
    h.close()
    with pytest.raises(LlamaStateException) as info:
        h.ptr  # noqa: B018
    assert "fake resource" in str(info.value)
    assert "closed" in str(info.value)
    assert "create a new one" in str(info.value)  # says what to do
    assert info.value.details["kind"] == "fake resource"
    with pytest.raises(LlamaStateException):
        h.check_open()


def test_context_manager_closes(rec: Recorder) -> None:
    with Fake(1, rec.free("h")) as h:
        assert not h.closed
    assert h.closed
    assert rec.count("h") == 1


def test_context_manager_closes_on_exception(rec: Recorder) -> None:
    with pytest.raises(RuntimeError):
        with Fake(1, rec.free("h")):
            raise RuntimeError("boom")
    assert rec.count("h") == 1


def test_del_frees(rec: Recorder) -> None:
    h = Fake(5, rec.free("h"))
    del h
    gc.collect()
    assert rec.calls == [("h", 5)]


def test_del_frees_a_handle_in_a_reference_cycle(rec: Recorder) -> None:
    h = Fake(5, rec.free("h"))
    h.me = h  # type: ignore[attr-defined]
    del h
    assert rec.calls == []  # only the cycle collector can reach it
    gc.collect()
    assert rec.calls == [("h", 5)]


def test_repr_shows_state(rec: Recorder) -> None:
    h = Fake(0xABC, rec.free("h"))
    assert "0xabc" in repr(h)
    h.close()
    assert "closed" in repr(h)


def close_together(handles: list[NativeHandle], after: Any = None) -> list[BaseException]:
    """Close every handle in ``handles`` from its own thread, all released at once by a barrier;
    ``after(handle)`` runs in the thread once its close() returned. Returns what the threads raised."""
    barrier = threading.Barrier(len(handles))
    errors: list[BaseException] = []

    def closer(h: NativeHandle) -> None:
        try:
            barrier.wait()
            h.close()
            if after is not None:
                after(h)
        except BaseException as exc:  # pragma: no cover - reported by the caller
            errors.append(exc)

    threads = [threading.Thread(target=closer, args=(h,)) for h in handles]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return errors


def _note_freed(rec: Recorder, out: list[bool], _handle: NativeHandle) -> None:
    out.append(rec.count("h") == 1)


def test_concurrent_close_frees_exactly_once(rec: Recorder) -> None:
    for _ in range(20):
        rec.calls.clear()
        h = Fake(42, rec.free("h", delay=0.002))
        # close() returned in a thread: the free must be complete there, not merely started
        freed_when_returned: list[bool] = []
        errors = close_together([h] * 12, after=functools.partial(_note_freed, rec, freed_when_returned))
        assert not errors
        assert rec.calls == [("h", 42)]
        assert freed_when_returned == [True] * 12


def test_concurrent_close_of_owner_and_dependents_frees_each_once(rec: Recorder) -> None:
    for _ in range(20):
        rec.calls.clear()
        owner = Fake(1, rec.free("owner", delay=0.001))
        deps = [Fake(10 + i, rec.free(f"dep{i}", delay=0.001)) for i in range(4)]
        for d in deps:
            owner._adopt(d)
        assert not close_together([owner, *deps] * 3)
        names = rec.names()
        assert sorted(names) == sorted(["owner", "dep0", "dep1", "dep2", "dep3"])
        assert names[-1] == "owner", f"owner freed before a dependent: {names}"


# -- dependents before owners --------------------------------------------------------------------


def test_dependents_are_closed_before_the_owner(rec: Recorder) -> None:
    owner = Fake(1, rec.free("owner"))
    a = Fake(2, rec.free("a"))
    b = Fake(3, rec.free("b"))
    owner._adopt(a)
    owner._adopt(b)
    owner.close()
    assert sorted(rec.names()[:2]) == ["a", "b"]
    assert rec.names()[-1] == "owner"
    assert a.closed and b.closed and owner.closed
    with pytest.raises(LlamaStateException):
        a.ptr  # noqa: B018
    # closing the dependents again is harmless
    a.close()
    b.close()
    assert len(rec.calls) == 3


def test_nested_dependents_close_innermost_first(rec: Recorder) -> None:
    model = Fake(1, rec.free("model"))
    ctx = Fake(2, rec.free("ctx"))
    inner = Fake(3, rec.free("inner"))
    model._adopt(ctx)
    ctx._adopt(inner)
    model.close()
    assert rec.names() == ["inner", "ctx", "model"]


def test_dependent_closed_first_then_owner(rec: Recorder) -> None:
    owner = Fake(1, rec.free("owner"))
    dep = Fake(2, rec.free("dep"))
    owner._adopt(dep)
    dep.close()
    assert rec.names() == ["dep"]
    assert not owner.closed
    owner.close()
    assert rec.names() == ["dep", "owner"]


def test_owner_does_not_keep_dependents_alive(rec: Recorder) -> None:
    owner = Fake(1, rec.free("owner"))
    dep = Fake(2, rec.free("dep"))
    owner._adopt(dep)
    del dep
    gc.collect()
    assert rec.names() == ["dep"]  # freed by its own __del__
    owner.close()
    assert rec.names() == ["dep", "owner"]


def test_owner_close_waits_for_a_dependent_free_in_progress(rec: Recorder) -> None:
    """Another thread is freeing a dependent; closing the owner must not free it meanwhile."""
    gate, entered = threading.Event(), threading.Event()
    owner = Fake(1, rec.free("owner"))
    dep = Fake(2, rec.free("dep", gate=gate, entered=entered))
    owner._adopt(dep)
    t_dep = threading.Thread(target=dep.close)
    t_dep.start()
    assert entered.wait(10)
    t_owner = threading.Thread(target=owner.close)
    t_owner.start()
    time.sleep(0.05)
    assert rec.names() == [], "the owner was freed while its dependent's free was still running"
    gate.set()
    t_dep.join(10)
    t_owner.join(10)
    assert rec.names() == ["dep", "owner"]


def test_collector_frees_dependents_before_owner_in_a_cycle(rec: Recorder) -> None:
    """The cycle collector clears weak references, then finalises a cycle in no set order: an
    owner finalised before its dependents must leave its free to the last of them."""
    for _ in range(5):
        rec.calls.clear()
        owner = Fake(1, rec.free("owner"))
        deps = [Fake(10 + i, rec.free(f"dep{i}")) for i in range(3)]
        for d in deps:
            owner._adopt(d)
            d.owner = owner  # type: ignore[attr-defined]
            d.me = d  # type: ignore[attr-defined]
        owner.me = owner  # type: ignore[attr-defined]
        del owner, deps, d
        gc.collect()
        names = rec.names()
        assert sorted(names) == ["dep0", "dep1", "dep2", "owner"]
        assert names[-1] == "owner", names


def test_partially_constructed_subclass_does_not_complain_when_collected() -> None:
    """A subclass whose __init__ fails before NativeHandle.__init__ must not raise from __del__."""

    class Broken(NativeHandle):
        def __init__(self) -> None:
            raise ValueError("bad input")

    seen: list[Any] = []
    old_hook = __import__("sys").unraisablehook
    __import__("sys").unraisablehook = seen.append
    try:
        with pytest.raises(ValueError):
            Broken()
        gc.collect()
    finally:
        __import__("sys").unraisablehook = old_hook
    assert seen == []


# -- shared pins (a model: read-only once loaded) -----------------------------------------------


class SharedFake(SharedHandle):
    _kind = "shared fake"


def _hold_pin(handle: SharedHandle, entered: threading.Event, gate: threading.Event) -> threading.Thread:
    def hold() -> None:
        with handle.pinned():
            entered.set()
            assert gate.wait(10), "test gate never opened"
    thread = threading.Thread(target=hold)
    thread.start()
    assert entered.wait(10)
    return thread


def test_shared_pins_run_side_by_side(rec: Recorder) -> None:
    """A long call on a shared handle (a DRY sampler scanning the vocabulary) does not hold the
    other threads' calls (their tokenizing): the second pin enters while the first is held."""
    h = SharedFake(7, rec.free("h"))
    gate = threading.Event()
    holder = _hold_pin(h, threading.Event(), gate)
    entered_second = threading.Event()

    def read() -> None:
        with h.pinned():
            entered_second.set()
    second = threading.Thread(target=read)
    second.start()
    try:
        assert entered_second.wait(5), "a second reader waited for the first"
    finally:
        gate.set()
        holder.join(10)
        second.join(10)


def test_close_of_a_shared_handle_waits_for_every_pin(rec: Recorder) -> None:
    h = SharedFake(7, rec.free("h"))
    gate = threading.Event()
    holder = _hold_pin(h, threading.Event(), gate)
    closer = threading.Thread(target=h.close)
    closer.start()
    time.sleep(0.05)
    assert rec.names() == [], "freed while another thread had it pinned"
    # the pin in progress still has a live handle (a context it makes is adopted, not refused: a
    # soak of 16 threads closing an engine mid-generation corrupted the heap when the pointer went
    # before the pins ended)
    assert h.ptr == 7 and not h.closed
    late: list[str] = []

    def pin_late() -> None:   # no new pin once closing: it waits for the close, then is refused
        try:
            with h.pinned():
                late.append("pinned")
        except LlamaStateException:
            late.append("refused")

    newcomer = threading.Thread(target=pin_late)
    newcomer.start()
    time.sleep(0.05)
    assert late == [], "a new pin ran while the handle was closing"
    gate.set()
    for thread in (holder, closer, newcomer):
        thread.join(10)
    assert rec.names() == ["h"] and late == ["refused"]


def test_exclusive_waits_for_readers_and_holds_new_ones(rec: Recorder) -> None:
    h = SharedFake(7, rec.free("h"))
    gate = threading.Event()
    holder = _hold_pin(h, threading.Event(), gate)
    order: list[str] = []
    in_exclusive, leave_exclusive = threading.Event(), threading.Event()

    def exclusive() -> None:
        with h.exclusive():
            order.append("exclusive")
            in_exclusive.set()
            assert leave_exclusive.wait(10)

    writer = threading.Thread(target=exclusive)
    writer.start()
    time.sleep(0.05)
    assert order == [], "exclusive entered beside a reader"
    gate.set()
    holder.join(10)
    assert in_exclusive.wait(10)
    def read() -> None:
        with h.pinned():
            order.append("reader")
    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.05)
    assert order == ["exclusive"], "a reader entered during an exclusive call"
    leave_exclusive.set()
    writer.join(10)
    reader.join(10)
    assert order == ["exclusive", "reader"]


def test_a_thread_may_close_what_it_has_pinned(rec: Recorder) -> None:
    h = SharedFake(7, rec.free("h"))
    with h.pinned():
        h.close()
    assert rec.names() == ["h"]


# -- the real classes ---------------------------------------------------------------------------


@pytest.fixture
def counted_frees(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """Wrap libllama's free functions so every call is recorded (and still performed)."""
    from llamact.native._library import native

    lib = native().llama
    rec = Recorder()
    for name in ("llama_model_free", "llama_free", "llama_sampler_free", "llama_batch_free"):
        original = getattr(lib, name)

        def wrapper(arg: Any, _original: Any = original, _name: str = name) -> Any:
            with rec.lock:
                rec.calls.append((_name, 0))
            return _original(arg)

        monkeypatch.setattr(lib, name, wrapper)
    return rec


@pytest.mark.model
def test_model_context_sampler_free_exactly_once(smollm2_path: Any, counted_frees: Recorder) -> None:
    from llamact.native.context import Batch, Context, ContextOptions
    from llamact.native.model import Model
    from llamact.native.sampler import Greedy, SamplerChain, TopK

    rec = counted_frees
    model = Model(smollm2_path)
    ctx1 = Context(model, ContextOptions(n_ctx=128))
    ctx2 = Context(model, ContextOptions(n_ctx=128))
    chain1 = SamplerChain(model, [Greedy()])
    chain2 = SamplerChain(model, [TopK(5), Greedy()])
    batch = Batch(ctx1, 8)

    chain1.close()
    chain1.close()
    assert rec.names() == ["llama_sampler_free"]

    model.close()
    names = rec.names()
    assert names.count("llama_model_free") == 1
    assert names.count("llama_free") == 2
    assert names.count("llama_sampler_free") == 2
    assert names[-1] == "llama_model_free", f"the model was freed before a dependent: {names}"
    for h in (model, ctx1, ctx2, chain1, chain2):
        assert h.closed
        h.close()
    batch.close()
    batch.close()
    del model, ctx1, ctx2, chain1, chain2, batch
    gc.collect()
    names = rec.names()
    assert names.count("llama_model_free") == 1
    assert names.count("llama_free") == 2
    assert names.count("llama_sampler_free") == 2
    assert names.count("llama_batch_free") == 1


@pytest.mark.model
def test_garbage_collected_model_and_context_free_once_in_order(smollm2_path: Any, counted_frees: Recorder) -> None:
    """Model and Context sit in reference cycles (Model <-> Vocab, Context <-> abort callback), so
    the cycle collector finalises them in no set order; the context must still go first."""
    from llamact.native.context import Context, ContextOptions
    from llamact.native.model import Model
    from llamact.native.sampler import Greedy, SamplerChain

    rec = counted_frees
    gc.disable()
    try:
        model = Model(smollm2_path)
        ctx = Context(model, ContextOptions(n_ctx=128))
        chain = SamplerChain(model, [Greedy()])
        del model, ctx, chain
        gc.collect()
    finally:
        gc.enable()
    names = rec.names()
    assert sorted(names) == ["llama_free", "llama_model_free", "llama_sampler_free"], names
    assert names[-1] == "llama_model_free", f"the model was freed before a dependent: {names}"


@pytest.mark.model
def test_engine_frees_everything_exactly_once(smollm2_path: Any, counted_frees: Recorder) -> None:
    from llamact import GenerationParams, LlamaEngine, ModelParams

    rec = counted_frees
    engine = LlamaEngine.load(smollm2_path, ModelParams(n_ctx=128))
    result = engine.complete("Hello", GenerationParams(max_tokens=3, greedy=True))
    assert result.tokens
    # one sampler chain per generation, freed when the stream ends
    assert rec.names() == ["llama_sampler_free"]
    stream = engine.generate("Hello", GenerationParams(max_tokens=5, greedy=True))
    next(iter(stream))
    stream.close()
    stream.close()
    assert rec.names() == ["llama_sampler_free"] * 2
    engine.close()
    engine.close()
    names = rec.names()
    assert names == ["llama_sampler_free", "llama_sampler_free", "llama_free", "llama_model_free"]
    del engine, stream
    gc.collect()
    assert rec.names() == names


@pytest.mark.model
def test_a_dry_set_up_does_not_hold_the_vocabulary(smollm2_path: Any) -> None:
    """Issue 46: DRY's set-up scans the whole vocabulary once per sequence breaker (seconds with
    many) while pinning the model; every other request's tokenizing -- and the slots' token
    pieces -- waited for it. The bound: another thread tokenizes while the set-up runs (its
    tokenizations finish in the middle of the set-up, not only before or after it)."""
    from llamact.native.model import Model, ModelLoadOptions
    from llamact.native.sampler import Dry, Greedy, SamplerChain

    model = Model(smollm2_path, ModelLoadOptions(vocab_only=True))
    breakers = tuple(f"b{i:05d}xyz" for i in range(12))
    span: list[float] = []
    done = threading.Event()

    def build() -> None:
        span.append(time.monotonic())
        SamplerChain(model, [Dry(multiplier=0.8, penalty_last_n=64, seq_breakers=breakers), Greedy()]).close()
        span.append(time.monotonic())
        done.set()

    builder = threading.Thread(target=build)
    finished: list[float] = []
    builder.start()
    while not done.is_set():
        model.vocab.tokenize("Hello there", add_special=False)
        finished.append(time.monotonic())
    builder.join(60)
    start, end = span
    middle = [t for t in finished if start + 0.25 * (end - start) < t < end - 0.05 * (end - start)]
    assert middle, f"no tokenization finished during the {end - start:.2f} s set-up ({len(finished)} in all)"
    model.close()
