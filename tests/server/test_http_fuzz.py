"""A bounded HTTP fuzzer (issue 26: a server that no request can crash, stall or wedge): hostile requests
from ``tests/fuzz_bodies.py`` against a live ``llamact serve --parallel 2`` (the batched path), one
family of routes per test. Every answer must come within ``REQUEST_LIMIT_S`` and be no 5xx (nor a
stream ending in a server error event); after every request the process is alive and ``/health``
says ok; its RSS stays under ``RSS_LIMIT`` (sampled during the request: the server is killed above
it, so that a runaway allocation cannot take the machine down). At the end a normal chat works and
``/metrics`` counts no request as processing.

The profile "fuzz-ci" (derandomized, no shrinking: a failure prints the request whole) keeps the file
to about three minutes on two cores; ``LLAMACT_FUZZ_PROFILE=fuzz-long`` runs the same tests longer,
and ``scripts/fuzz/campaign.py`` runs the same strategies for a set time, also against llama-server.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import fuzz_bodies as fb
import pytest
from hypothesis import given, settings
from server_live import LiveServer

pytestmark = [pytest.mark.model, pytest.mark.slow]

SERVER_ARGS = ("--threads", "1", "--ctx-size", "1024", "--parallel", str(fb.N_SLOTS), "--n-predict", "8")


class FuzzServer:
    """The module's server, started again (and the death reported) when an example killed it; its
    --slot-save-path holds special files (``fb.special_slot_dir``), --media-path is the same folder."""

    def __init__(self, model: Path, root: Path, extra: tuple[str, ...] = ()) -> None:
        self.model = model
        self.slots = fb.special_slot_dir(root)
        self.extra = extra
        self.live: LiveServer | None = None

    def ensure(self) -> LiveServer:
        if self.live is not None and self.pid is not None and fb.alive(self.pid):
            return self.live
        if self.live is not None:
            self.live.stop()
        self.live = LiveServer("--model", str(self.model), *SERVER_ARGS, "--slot-save-path", str(self.slots),
                               "--media-path", str(self.slots), *self.extra)
        self.live.start()
        return self.live

    def restart(self) -> None:
        if self.live is not None:
            self.live.stop()
        self.live = None
        self.ensure()

    @property
    def pid(self) -> int | None:
        process = self.live._process if self.live is not None else None
        return process.pid if process is not None else None

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()


@pytest.fixture(scope="module")
def fuzz_server(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzServer]:
    server = FuzzServer(smollm2_path, tmp_path_factory.mktemp("fuzz"))
    server.ensure()
    try:
        yield server
    finally:
        server.stop()


def health(live: LiveServer, limit: float = 10.0) -> fb.Outcome:
    return fb.send(live.port, fb.Case("GET", "/health", None, {}, "health"), limit)


def check(server: FuzzServer, case: fb.Case) -> None:
    """Send one case; fail with the request, the answer and the server's log for anything wrong."""
    live = server.ensure()
    pid = server.pid
    assert pid is not None
    with fb.RssWatch(pid) as watch:
        outcome = fb.send(live.port, case)
    found = fb.problems(case, outcome)
    if watch.killed:
        found.append(f"RSS above {fb.RSS_LIMIT >> 20} MiB during the request (the server was killed)")
    elif not fb.alive(pid):
        found.append("the server died")
    else:
        probe = health(live)
        if probe.status != 200:
            found.append(f"/health after it: {probe.describe(300)}")
        rss = fb.rss_bytes(pid) if fb.alive(pid) else 0
        if rss > fb.RSS_LIMIT:
            found.append(f"RSS {rss >> 20} MiB > {fb.RSS_LIMIT >> 20} MiB")
    if found:
        log = live.log_tail(3000)
        server.restart()   # the next example starts on a fresh server (no slot held by a hung request)
        pytest.fail(f"{'; '.join(found)}\nrequest: {case.describe()}\nanswer: {outcome.describe()}\n"
                    f"server log (end):\n{log}", pytrace=False)


def _settings(family: str) -> settings:
    parent = settings.get_profile(fb.PROFILE)
    if fb.PROFILE == "fuzz-ci":
        return settings(parent, max_examples=fb.CI_EXAMPLES[family])
    return settings(parent)


@_settings("chat")
@given(case=fb.chat_cases())
def test_chat_bodies(fuzz_server: FuzzServer, case: fb.Case) -> None:
    check(fuzz_server, case)


@_settings("completions")
@given(case=fb.completion_cases())
def test_completion_bodies(fuzz_server: FuzzServer, case: fb.Case) -> None:
    check(fuzz_server, case)


@_settings("grammars")
@given(case=fb.grammar_cases())
def test_grammars_and_schemas(fuzz_server: FuzzServer, case: fb.Case) -> None:
    check(fuzz_server, case)


@_settings("templates")
@given(case=fb.template_cases())
def test_template_and_token_bodies(fuzz_server: FuzzServer, case: fb.Case) -> None:
    check(fuzz_server, case)


@_settings("raw_bodies")
@given(case=fb.raw_body_cases())
def test_bodies_that_are_not_json_objects(fuzz_server: FuzzServer, case: fb.Case) -> None:
    check(fuzz_server, case)


@_settings("admin")
@given(case=fb.admin_cases())
def test_admin_routes_unknown_routes_and_methods(fuzz_server: FuzzServer, case: fb.Case) -> None:
    check(fuzz_server, case)


@_settings("routes")
@given(case=fb.route_cases())
def test_the_other_routes_bodies(fuzz_server: FuzzServer, case: fb.Case) -> None:
    """Responses, Messages, token counts, embeddings, rerank, native completion and infill."""
    check(fuzz_server, case)


@_settings("dry")
@given(case=fb.dry_cases())
def test_dry_sequence_breakers(fuzz_server: FuzzServer, case: fb.Case) -> None:
    """Issue 46: many breakers stalled every slot; any count is refused or run within the limit."""
    check(fuzz_server, case)


@_settings("slots")
@given(case=fb.slot_cases())
def test_slot_ids_and_special_slot_files(fuzz_server: FuzzServer, case: fb.Case) -> None:
    """Issue 46: id_slot honoured as llama-server honours it; a FIFO in the slot folder refused at once."""
    check(fuzz_server, case)


@pytest.fixture(scope="module")
def media_server(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzServer]:
    """A projector (a small random one for SmolLM2) and --media-path: file:// parts are read."""
    from llamact.parity.projectors import write_projector

    root = tmp_path_factory.mktemp("media-fuzz")
    projector = write_projector(root / "mmproj.gguf", 576, "mlp")
    server = FuzzServer(smollm2_path, root, ("--mmproj", str(projector)))
    server.ensure()
    try:
        yield server
    finally:
        server.stop()


@_settings("media_files")
@given(case=fb.media_file_cases())
def test_media_file_paths(media_server: FuzzServer, case: fb.Case) -> None:
    """Issue 46: a NUL in a file:// path was a 500; a FIFO there is refused before it blocks."""
    check(media_server, case)


@pytest.fixture(scope="module")
def lora_server(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    adapter = fb.write_lora(tmp_path_factory.mktemp("lora") / "adapter.gguf")
    with LiveServer("--model", str(smollm2_path), "--threads", "1", "--ctx-size", "2048", "--parallel", "4",
                    "--lora-scaled", f"{adapter}:0") as live:
        yield live


@_settings("lora_rounds")
@given(round_=fb.lora_rounds)
def test_concurrent_lora_scales(lora_server: LiveServer, round_: fb.LoraRound) -> None:
    """Issue 46: a request decodes with its own adapter scale whatever runs beside it."""
    wrong = fb.lora_round_problems(lora_server.port, round_, _LORA_SOLO)
    assert not wrong, f"{round_}: {wrong}\nserver log (end):\n{lora_server.log_tail(2000)}"


_LORA_SOLO: dict[tuple[str, str, float], bytes] = {}


@pytest.mark.parametrize("name", sorted(fb.FINDINGS))
def test_findings(fuzz_server: FuzzServer, name: str) -> None:
    """What the fuzzer found (tests/fuzz_bodies.py, FINDINGS), each request on its own."""
    check(fuzz_server, fb.FINDINGS[name])


def test_server_is_fine_at_the_end(fuzz_server: FuzzServer) -> None:
    """After all the above (whatever failed), the server answers a normal chat, streamed and not,
    counts nothing as processing once idle, and its RSS is bounded."""
    live = fuzz_server.ensure()
    assert health(live).status == 200
    for stream in (False, True):
        case = fb.Case("POST", "/v1/chat/completions", fb.encode({**fb.CHAT_BASE, "stream": stream}), kind="valid")
        outcome = fb.send(live.port, case)
        assert outcome.status == 200 and not fb.problems(case, outcome), outcome.describe()
        if not stream:
            assert json.loads(outcome.body)["choices"][0]["message"]["role"] == "assistant"
    deadline = time.monotonic() + 10
    while True:
        metrics = fb.send(live.port, fb.Case("GET", "/metrics", None, {}, "admin")).body.decode()
        processing = re.search(r"^llamacpp:requests_processing (\S+)", metrics, re.M)
        assert processing is not None, metrics
        if float(processing.group(1)) == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert float(processing.group(1)) == 0, f"an idle server counts requests as processing:\n{metrics}"
    pid = fuzz_server.pid
    assert pid is not None and fb.rss_bytes(pid) < fb.RSS_LIMIT
