"""``/metrics`` for Kubernetes' inference gateway: the model-server gauges its endpoint picker reads,
read with the Prometheus client library's own parser (what a scraper sees), each shown to move
under load; ``/health`` as the gateway's readiness probe uses it.

The names are the endpoint picker's defaults (kubernetes-sigs/gateway-api-inference-extension,
``pkg/epp/server/options.go``: ``vllm:num_requests_waiting``, ``vllm:num_requests_running``,
``vllm:kv_cache_usage_perc``, ``vllm:lora_requests_info``, ``vllm:cache_config_info``), with the
LoRA labels its extractor reads (``running_lora_adapters``, ``waiting_lora_adapters``, ``max_lora``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from server_live import LiveServer
from test_wire_parity_admin import write_lora

pytestmark = [pytest.mark.model, pytest.mark.slow]

N_CTX = 2048
GATEWAY = ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
           "vllm:gpu_cache_usage_perc", "vllm:lora_requests_info", "vllm:cache_config_info")


@pytest.fixture(scope="module")
def lora_server(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, str]]:
    """Two slots, one adapter loaded with scale 0 (a request's ``lora`` field turns it on)."""
    adapter = tmp_path_factory.mktemp("gateway") / "adapter.gguf"
    write_lora(adapter)
    with LiveServer("--model", str(smollm2_path), "--threads", "1", "--ctx-size", str(N_CTX), "--parallel", "2",
                    "--lora-scaled", f"{adapter}:0") as live:
        yield live, str(adapter)


def scrape(live: LiveServer) -> dict[str, list[Any]]:
    """Every sample by name, parsed by prometheus_client (it refuses text a scraper would refuse)."""
    status, body = live.request("GET", "/metrics")
    assert status == 200
    samples: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    return samples


def value(samples: dict[str, list[Any]], name: str) -> float:
    (sample,) = samples[name]
    return float(sample.value)


def test_health_is_the_readiness_probe(lora_server: tuple[LiveServer, str]) -> None:
    live, _adapter = lora_server
    status, body = live.request("GET", "/health")
    assert (status, json.loads(body)) == (200, {"status": "ok"})


def test_each_gateway_series_moves_under_load(lora_server: tuple[LiveServer, str]) -> None:
    live, adapter = lora_server
    idle = scrape(live)
    for name in GATEWAY:
        assert name in idle, name
    # llama-server's own series are still there, under their names, beside the gateway's
    assert "llamacpp:requests_processing" in idle and "llamacpp:prompt_tokens_total" in idle
    assert value(idle, "vllm:num_requests_waiting") == value(idle, "vllm:num_requests_running") == 0
    kv_idle = value(idle, "vllm:kv_cache_usage_perc")
    assert 0 <= kv_idle < 1 and value(idle, "vllm:gpu_cache_usage_perc") == kv_idle
    (info,) = idle["vllm:lora_requests_info"]
    assert info.labels == {"max_lora": "1", "running_lora_adapters": "", "waiting_lora_adapters": ""}
    (cache,) = idle["vllm:cache_config_info"]
    assert cache.labels == {"block_size": "1", "num_gpu_blocks": str(N_CTX)}

    # five requests on two slots, each with the adapter: two run, three wait
    body = {"messages": [{"role": "user", "content": "Count from one to fifty in words."}], "max_tokens": 96,
            "temperature": 0, "lora": [{"id": 0, "scale": 1.0}]}
    answers: list[int] = []

    def ask() -> None:
        status, _ = live.request("POST", "/v1/chat/completions", json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
        answers.append(status)

    clients = [threading.Thread(target=ask) for _ in range(5)]
    for client in clients:
        client.start()
    seen: dict[str, float] = {"waiting": 0, "running": 0, "kv": 0}
    adapters_seen: set[str] = set()
    deadline = time.monotonic() + 120
    while any(c.is_alive() for c in clients) and time.monotonic() < deadline:
        busy = scrape(live)
        seen["waiting"] = max(seen["waiting"], value(busy, "vllm:num_requests_waiting"))
        seen["running"] = max(seen["running"], value(busy, "vllm:num_requests_running"))
        seen["kv"] = max(seen["kv"], value(busy, "vllm:kv_cache_usage_perc"))
        (info,) = busy["vllm:lora_requests_info"]
        assert info.value > 1.7e9   # a Unix time: the picker keeps the newest series
        for label in ("running_lora_adapters", "waiting_lora_adapters"):
            if info.labels[label] == adapter:
                adapters_seen.add(label)
        time.sleep(0.05)
    for client in clients:
        client.join(timeout=60)
    assert answers == [200] * 5
    assert seen["running"] == 2 and seen["waiting"] >= 1, seen
    assert seen["kv"] > kv_idle, seen
    assert adapters_seen == {"running_lora_adapters", "waiting_lora_adapters"}

    after = scrape(live)
    assert value(after, "vllm:num_requests_waiting") == value(after, "vllm:num_requests_running") == 0
    assert value(after, "vllm:kv_cache_usage_perc") > kv_idle   # the slots keep their prompts' cells
    (info,) = after["vllm:lora_requests_info"]
    assert info.labels["running_lora_adapters"] == info.labels["waiting_lora_adapters"] == ""
