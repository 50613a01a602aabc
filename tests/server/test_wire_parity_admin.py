"""Wire parity of the admin routes: the same requests, in the same order, to llama-server and to
``llamact serve`` (SmolLM2, one slot, greedy) give the same status and JSON body, once what differs
by nature is removed: ``id_task`` (each server numbers its tasks its own way) and ``timings``
(milliseconds). Routes: GET /slots, POST /slots/{id} (save / restore / erase and their refusals),
GET / POST /lora-adapters, POST /props, with and without the switches that enable them.

Named deviations, each checked here to hold as named: a slot action whose body is not JSON or
lacks a string ``filename`` is 400 here, 500 with nlohmann's exception text there (docs/design.md,
deviation 12); after a LoRA scale change llamact evaluates the next prompt afresh where llama-server
reuses a KV cache computed with the old scales (``test_lora_scale_change_evaluates_the_prompt_afresh``).
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
from server_live import LiveServer

from llamact.json_types import Json
from llamact.parity.llama_server import HOST, LlamaServer, ServerConfig, find_llama_server

pytestmark = [pytest.mark.parity, pytest.mark.model, pytest.mark.slow]

HELLO = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8, "temperature": 0}
RAW = {"prompt": "Once upon a time", "max_tokens": 6, "temperature": 0}


def write_lora(path: Path, n_embd: int = 576, rank: int = 4) -> None:
    """A random LoRA adapter on attn_q of SmolLM2's first two layers (large enough to move the logits)."""
    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(rank))
    for layer in (0, 1):
        writer.add_tensor(f"blk.{layer}.attn_q.weight.lora_a", rng.normal(0, 0.5, (rank, n_embd)).astype(np.float32))
        writer.add_tensor(f"blk.{layer}.attn_q.weight.lora_b", rng.normal(0, 0.5, (n_embd, rank)).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def call(port: int, method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Json]:
    conn = http.client.HTTPConnection(HOST, port, timeout=300)
    try:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        text = response.read()
        return response.status, json.loads(text) if text else None
    finally:
        conn.close()


def normalized(value: Json) -> Json:
    """Without ids, timestamps and timings; a slot's ``params.seed`` is left out too: it is the
    server's ``--seed`` for a request without one, and the harness starts llama-server with
    ``--seed 0`` while ``llamact serve`` has no such flag (its default is LLAMA_DEFAULT_SEED)."""
    if isinstance(value, dict) and "params" in value and isinstance(value["params"], dict):
        value = {**value, "params": {k: v for k, v in value["params"].items() if k != "seed"}}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items() if k not in ("id_task", "timings", "id", "created",
                                                                      "system_fingerprint")
                or (k == "id" and not isinstance(v, str))}
    return value


class Pair:
    """One llama-server and one ``llamact serve`` started with the same admin flags."""

    def __init__(self, model: Path, save_dir: Path | None, flags: tuple[str, ...]) -> None:
        up_flags, our_flags = list(flags), list(flags)
        if save_dir is not None:
            (save_dir / "up").mkdir()
            (save_dir / "ours").mkdir()
            up_flags += ["--slot-save-path", str(save_dir / "up")]
            our_flags += ["--slot-save-path", str(save_dir / "ours")]
        self.up = LlamaServer(ServerConfig(model, extra_args=tuple(up_flags)), find_llama_server())
        self.ours = LiveServer("--model", str(model), "--threads", "1", "--ctx-size", "4096", *our_flags)

    def __enter__(self) -> Pair:
        self.up.start()
        self.ours.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.up.stop()
        self.ours.stop()

    def both(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple[Json, Json]:
        expected = call(self.up.port, method, path, body, raw)
        got = call(self.ours.port, method, path, body, raw)
        return (expected[0], normalized(expected[1])), (got[0], normalized(got[1]))


@pytest.fixture(scope="module")
def lora_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lora") / "adapter.gguf"
    write_lora(path)
    return path


@pytest.fixture(scope="module")
def enabled(smollm2_path: Path, lora_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """--slot-save-path, --props and one LoRA adapter at scale 0 (the base model's answers)."""
    with Pair(smollm2_path, tmp_path_factory.mktemp("slots"), ("--props", "--lora-scaled", f"{lora_file}:0")) as pair:
        yield pair


@pytest.fixture(scope="module")
def disabled(smollm2_path: Path) -> Iterator[Pair]:
    """No --slot-save-path, no --props, --no-slots: upstream's refusals."""
    with Pair(smollm2_path, None, ("--no-slots",)) as pair:
        yield pair


def test_slots_get_and_actions_equal_llama_server(enabled: Pair) -> None:
    steps: list[tuple[str, str, Any]] = [
        ("GET", "/slots", None),
        ("POST", "/v1/chat/completions", HELLO),
        ("GET", "/slots", None),
        ("POST", "/slots/0?action=save", {"filename": "chat.bin"}),
        ("POST", "/slots/0?action=erase", None),
        ("GET", "/slots", None),
        ("POST", "/slots/0?action=restore", {"filename": "chat.bin"}),
        ("POST", "/v1/chat/completions", HELLO),            # the restored cache serves this prompt
        ("POST", "/v1/completions", RAW),
        ("GET", "/slots", None),
        ("POST", "/slots/0?action=save", {"filename": "empty.bin", "extra": 1}),
        ("POST", "/slots/3?action=erase", None),             # any id: taken modulo the slots
        ("POST", "/slots/-1?action=erase", None),
        ("POST", "/slots/1abc?action=erase", None),          # std::stoi reads the leading digits
    ]
    for method, path, body in steps:
        expected, got = enabled.both(method, path, body)
        assert got == expected, (method, path, body)


BAD_ACTIONS: list[tuple[str, Any]] = [
    ("/slots/x?action=erase", None),
    ("/slots/99999999999?action=erase", None),
    ("/slots/0?action=bogus", None),
    ("/slots/0", {}),
    ("/slots/0?action=restore", {"filename": "missing.bin"}),
] + [("/slots/0?action=save", {"filename": name}) for name in (
    "../escape.bin", "/tmp/absolute.bin", "sub/dir.bin", "back\\slash", "a:b", "", ".", "x.", " lead", "trail ",
    "a..b", "tab\tname", "q?.bin", "\u2215slash", "\uff0e\uff0e", "\ufeffbom", "x" * 256)]


@pytest.mark.parametrize(("path", "body"), BAD_ACTIONS, ids=[repr(b)[:40] + p for p, b in BAD_ACTIONS])
def test_slot_refusals_equal_llama_server(enabled: Pair, path: str, body: Any) -> None:
    expected, got = enabled.both("POST", path, body)
    assert expected[0] == 400 and got == expected
    assert not Path("/tmp/absolute.bin").exists()   # a hostile name writes nothing anywhere


@pytest.mark.parametrize("raw", [b"{}", b"not json", b"[1]", b'{"filename": 5}'])
def test_slot_body_deviation_is_400_where_upstream_500(enabled: Pair, raw: bytes) -> None:
    """Deviation 12: llama-server answers 500 with nlohmann::json's exception; llamact a 400."""
    (up_status, up_body), (status, body) = enabled.both("POST", "/slots/0?action=save", raw=raw)
    assert up_status == 500 and up_body["error"]["type"] == "server_error"
    assert status == 400 and body["error"]["type"] == "invalid_request_error"


def test_lora_adapters_equal_llama_server(enabled: Pair) -> None:
    """The requests evaluate their whole prompt (cache_prompt false): with one slot llama-server also
    keeps prompts in host memory (--cache-ram) and may restore an older one, which llamact's single
    slot does not do; the adapters' effect is what is compared here."""
    scale_1 = [{"id": 0, "scale": 1.0}]
    hello = {**HELLO, "cache_prompt": False}
    steps: list[tuple[str, str, Any]] = [
        ("GET", "/lora-adapters", None),
        ("POST", "/v1/chat/completions", hello),                           # scale 0: the base model
        ("POST", "/v1/chat/completions", {**hello, "lora": scale_1}),      # this request's own scale
        ("POST", "/v1/chat/completions", {**hello, "lora": [{"id": 3, "scale": 1}]}),   # no adapter 3: 0
        ("POST", "/v1/chat/completions", {**hello, "lora": 5}),            # not an array: 400
        ("POST", "/v1/completions", {**RAW, "cache_prompt": False, "lora": [{"id": 0, "scale": 0.5}]}),
        ("GET", "/slots", None),                                           # params.lora: the last request's
        ("POST", "/lora-adapters", [{"id": 7, "scale": 2.0}]),             # adapter 0 left out: scale 0
        ("GET", "/lora-adapters", None),
        ("POST", "/lora-adapters", {"id": 0}),                             # not an array: 400
        ("POST", "/lora-adapters", [{"id": "0", "scale": 0.5}, {"scale": True}]),   # mistyped: id -1
        ("POST", "/lora-adapters", [{"id": 0, "scale": 0.1}]),
        ("GET", "/lora-adapters", None),
    ]
    answers = []
    for method, path, body in steps:
        expected, got = enabled.both(method, path, body)
        assert got == expected, (method, path, body)
        answers.append(got)
    assert answers[2] != answers[1], "the adapter at scale 1 changes the answer"
    assert answers[3] == answers[1], "at scale 0 the answer is the base model's"


def test_lora_scale_change_evaluates_the_prompt_afresh(enabled: Pair) -> None:
    """Deviation: after ``POST /lora-adapters``, llama-server's next request without a ``lora``
    field keeps the slot's KV cache, computed with the previous scales (launch_slot_with_task sets
    ``slot.lora`` from the server's adapters without lora_should_clear_cache), so its answer is
    neither the old nor the new scale's. llamact evaluates the prompt afresh: its answer is the one
    llama-server gives a request that asks for the scale itself (which does clear the cache)."""
    scale_1 = [{"id": 0, "scale": 1.0}]
    enabled.both("POST", "/lora-adapters", [{"id": 0, "scale": 0.0}])
    enabled.both("POST", "/v1/chat/completions", HELLO)                 # both caches: the prompt at scale 0
    oracle, _ = enabled.both("POST", "/v1/chat/completions", {**HELLO, "lora": scale_1})
    enabled.both("POST", "/v1/chat/completions", HELLO)                 # back to scale 0, cache at 0
    enabled.both("POST", "/lora-adapters", scale_1)
    _stale, got = enabled.both("POST", "/v1/chat/completions", HELLO)
    assert got[1]["choices"] == oracle[1]["choices"]
    assert got[1]["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    enabled.both("POST", "/lora-adapters", [{"id": 0, "scale": 0.0}])


def test_props_post_equal_llama_server(enabled: Pair, disabled: Pair) -> None:
    for pair in (enabled, disabled):
        expected, got = pair.both("POST", "/props", {"n_ctx": 5})
        assert got == expected


@pytest.mark.parametrize(("method", "path", "body"), [
    ("GET", "/slots", None),
    ("POST", "/slots/0?action=save", {"filename": "a.bin"}),
    ("POST", "/slots/x?action=erase", None),
    ("POST", "/props", {}),
    ("GET", "/lora-adapters", None),
    ("POST", "/lora-adapters", []),
])
def test_refusals_without_switches_equal_llama_server(disabled: Pair, method: str, path: str, body: Any) -> None:
    expected, got = disabled.both(method, path, body)
    assert got == expected


@pytest.fixture(scope="module")
def two_slots(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with Pair(smollm2_path, tmp_path_factory.mktemp("slots2"), ("--parallel", "2")) as pair:
        yield pair


def _busy(slots: Json) -> int:
    """The id of the one slot that has run a request."""
    (slot_id,) = [s["id"] for s in slots if "params" in s]
    return int(slot_id)


def _without_ids(answer: tuple[int, Json]) -> tuple[int, Json]:
    status, body = answer
    if isinstance(body, list):
        return status, sorted(({k: v for k, v in s.items() if k != "id"} for s in body), key=json.dumps)
    return status, {k: v for k, v in body.items() if k != "id_slot"}


def test_two_slots_equal_llama_server_but_for_slot_ids(two_slots: Pair) -> None:
    """With --parallel 2 the same answers, but for which slot a request lands in: llama-server puts
    the first request of an idle server in its last slot, llamact's scheduler in the lowest id
    (packing busy slots into few ids: engine/batched.py, _pick_slot). A slot saved from one slot
    restores into the other, and the next request finds it there (a prompt cache hit)."""
    expected, got = two_slots.both("GET", "/slots")
    assert got == expected
    two_slots.both("POST", "/v1/chat/completions", HELLO)
    expected, got = two_slots.both("GET", "/slots")
    assert _without_ids(got) == _without_ids(expected)
    up_id, our_id = _busy(expected[1]), _busy(got[1])
    results = []
    for action, body in (("save", {"filename": "s.bin"}), ("erase", None), ("restore", {"filename": "s.bin"})):
        target = action == "restore"   # restore into the other slot
        up = call(two_slots.up.port, "POST", f"/slots/{(up_id + target) % 2}?action={action}", body)
        ours = call(two_slots.ours.port, "POST", f"/slots/{(our_id + target) % 2}?action={action}", body)
        assert _without_ids((ours[0], normalized(ours[1]))) == _without_ids((up[0], normalized(up[1]))), action
        results.append(ours)
    assert results[0][1]["n_saved"] == results[2][1]["n_restored"] > 0
    expected, got = two_slots.both("POST", "/v1/chat/completions", HELLO)
    assert got == expected
    assert got[1]["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    expected, got = two_slots.both("GET", "/slots")
    assert _without_ids(got) == _without_ids(expected)


@pytest.fixture(scope="module")
def odd_seed(smollm2_path: Path) -> Iterator[Pair]:
    """A --seed outside uint32_t, the type llama.cpp keeps a seed in."""
    with Pair(smollm2_path, None, ("--seed", "-5")) as pair:
        yield pair


def test_a_seed_outside_uint32_is_reported_as_llama_server_keeps_it(odd_seed: Pair) -> None:
    """/props reports the server's --seed as llama.cpp's uint32_t holds it (wire/task_params.py, the one
    writer of task_params that /slots shares; /props wrote -5 before the two were one)."""
    def seed(port: int) -> Any:
        return call(port, "GET", "/props")[1]["default_generation_settings"]["params"]["seed"]

    expected = seed(odd_seed.up.port)
    assert seed(odd_seed.ours.port) == expected != -5


@pytest.fixture(scope="module")
def four_slots(smollm2_path: Path) -> Iterator[Pair]:
    with Pair(smollm2_path, None, ("--parallel", "4")) as pair:
        yield pair


# id_slot as a request gives it: an id (taken modulo the slots, as an unsigned size), a number cast
# as C++ casts it, a boolean read as 0 / 1 (nlohmann's get<int>)
ID_SLOTS: list[Any] = [2, 3, 6, -3, 2.7, True]


@pytest.mark.parametrize("id_slot", ID_SLOTS, ids=[repr(v) for v in ID_SLOTS])
def test_id_slot_runs_where_llama_server_runs_it(four_slots: Pair, id_slot: Any) -> None:
    """Issue 46: ``id_slot`` was ignored and every answer said 0; llama-server runs the request in
    that slot and reports it, so a client saving ``/slots/{id_slot}`` afterwards saves its own."""
    body = {**RAW, "id_slot": id_slot, "n_predict": 2}
    (up_status, up_body), (status, got) = four_slots.both("POST", "/completion", body)
    assert up_status == status == 200
    assert got["id_slot"] == up_body["id_slot"], (id_slot, up_body["id_slot"], got["id_slot"])
