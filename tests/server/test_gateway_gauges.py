"""The gateway gauges' arithmetic, without a server: a picker must never read more requests running
than there are slots (CI saw ``vllm:num_requests_running`` 3 on a two-slot server while a third
request was being prepared)."""

from __future__ import annotations

from llamact.server.models.gateway_metrics import GatewayGauges, on_slots


def test_requests_being_prepared_count_as_waiting_when_the_slots_are_full() -> None:
    # two on slots, one being prepared (processing 3), two deferred
    assert on_slots(2, 3, 2) == (3, 2)


def test_running_never_exceeds_what_processing_says() -> None:
    # the scheduler read after a request finished: processing is the lower figure
    assert on_slots(0, 1, 2) == (0, 1)


def test_one_request_at_a_time_keeps_llama_servers_figures() -> None:
    assert on_slots(4, 1, None) == (4, 1)


def test_the_text_carries_the_split() -> None:
    waiting, running = on_slots(1, 3, 2)
    text = GatewayGauges(waiting, running, 10, 100).prometheus()
    assert "vllm:num_requests_waiting 2\n" in text and "vllm:num_requests_running 2\n" in text
