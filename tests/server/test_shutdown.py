"""``llamact serve`` stops within its bound (issue 26): SIGTERM drains for --shutdown-timeout seconds,
then ends what is left with an error event (a stream) or a 503; a second signal exits at once; a
worker stuck in a native call never has the engine freed under it, nor keeps the process alive."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_live import HOST, LiveServer, sse_events

from llamact.server.config.settings import ServerSettings
from llamact.server.models.state import ServerState
from llamact.server.runners.worker import EngineWorker
from llamact.server.shutdown import EXIT_MARGIN_S

pytestmark = [pytest.mark.model]

LONG = {"prompt": "Once upon a time", "max_tokens": 100_000, "stream": True, "temperature": 1.0,
        "ignore_eos": True}


def _serve(smollm2_path: Path, drain: float) -> LiveServer:
    return LiveServer("--model", str(smollm2_path), "--threads", "1", "--ctx-size", "8192",
                      "--shutdown-timeout", str(drain))


def _stream_in_background(live: LiveServer) -> tuple[threading.Thread, list[Any], threading.Event]:
    events: list[Any] = []
    started = threading.Event()

    def read() -> None:
        try:
            for event in sse_events(HOST, live.port, "/v1/completions", LONG):
                events.append(event)
                started.set()
        except Exception as exc:   # the connection cut without an ending event
            events.append(exc)
        started.set()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    assert started.wait(60)
    return thread, events, started


def _exit_time(live: LiveServer, signals: Iterator[int] | list[int], pause: float = 0.0) -> tuple[float, int]:
    began = time.monotonic()
    for sig in signals:
        live.process.send_signal(sig)
        time.sleep(pause)
    rc = live.process.wait(timeout=120)
    return time.monotonic() - began, rc


def test_sigterm_ends_a_running_stream_with_an_error_event_and_exits_within_the_drain(smollm2_path: Path) -> None:
    drain = 1.0
    with _serve(smollm2_path, drain) as live:
        reader, events, _ = _stream_in_background(live)
        seconds, rc = _exit_time(live, [signal.SIGTERM])
        reader.join(30)
        log = live.log_tail()
    assert rc == 0, log
    assert seconds < drain + EXIT_MARGIN_S, (seconds, log)
    last = events[-1]
    assert isinstance(last, dict) and last["error"]["code"] == 503, events[-3:]
    assert "shutting down" in last["error"]["message"]
    assert len(events) > 2   # it ran, then was ended


def test_a_reply_not_streamed_is_answered_503_when_the_drain_ends(smollm2_path: Path) -> None:
    with _serve(smollm2_path, 0.5) as live:
        answer: list[Any] = []
        body = json.dumps({**LONG, "stream": False}).encode()
        thread = threading.Thread(target=lambda: answer.append(live.request("POST", "/v1/completions", body)))
        thread.start()
        time.sleep(1.0)
        _, rc = _exit_time(live, [signal.SIGTERM])
        thread.join(30)
    status, raw = answer[0]
    assert (status, json.loads(raw)["error"]["type"]) == (503, "unavailable_error")
    assert rc == 0


def test_an_idle_server_exits_at_once_on_sigterm(smollm2_path: Path) -> None:
    with _serve(smollm2_path, 30.0) as live:
        seconds, rc = _exit_time(live, [signal.SIGTERM])
    assert rc == 0 and seconds < 10


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_second_signal_exits_at_once(smollm2_path: Path, sig: int) -> None:
    with _serve(smollm2_path, 60.0) as live:
        _stream_in_background(live)
        seconds, rc = _exit_time(live, [sig, sig], pause=0.5)
        log = live.log_tail()
    assert rc == 128 + sig, log
    assert seconds < 15, log   # not the 60 s drain
    assert "again: exiting now" in log


class _StuckBackend:
    """A generation that sits in a "native call" until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.inside = threading.Event()
        self.closed = False

    def stream(self) -> Iterator[int]:
        self.inside.set()
        self.release.wait(30)
        yield 1

    def close(self) -> None:
        self.closed = True


def test_closing_leaves_the_engine_unfreed_while_a_worker_is_stuck() -> None:
    backend = _StuckBackend()
    state = ServerState(ServerSettings())
    state._engine = backend   # type: ignore[assignment]
    state._worker = EngineWorker(backend, abort=lambda: None)   # an abort that cannot reach the call

    async def run() -> bool:
        state.worker.submit(lambda b: b.stream())
        await asyncio.to_thread(backend.inside.wait, 10)
        return state.close(timeout=0.5)

    began = time.monotonic()
    assert asyncio.run(run()) is False
    assert time.monotonic() - began < 10
    assert state.abandoned and not backend.closed   # never freed under the stuck call
    backend.release.set()
    for _ in range(200):
        if backend.closed:
            break
        time.sleep(0.05)
    assert backend.closed   # freed once the call returned
