"""The prefix router inside Ray's request-router interface (llamact/serve_ray/router.py), driven as
Ray drives it, without a cluster: its own count of each replica's requests, a burst of requests with
one prefix that fills the owner's free slots and no more, keys recorded where a request was sent."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from ray.serve._private.common import DeploymentHandleSource, DeploymentID

from llamact.serve_ray.prefix import block_keys
from llamact.serve_ray.router import PREFIX_KEYWORD, PrefixAwareRouter

REPLICAS = [SimpleNamespace(replica_id=f"r{i}") for i in range(2)]
SYSTEM = block_keys(list(range(64)), 16)


def request(i: int, keys: tuple[bytes, ...]) -> Any:
    return SimpleNamespace(kwargs={PREFIX_KEYWORD: keys}, metadata=SimpleNamespace(internal_request_id=f"q{i}"))


def names(ranks: list[list[Any]]) -> list[list[str]]:
    return [[r.replica_id for r in rank] for rank in ranks]


def run(steps: Any) -> Any:
    async def main() -> Any:
        router = PrefixAwareRouter(deployment_id=DeploymentID(name="replicas", app_name="test"),
                                   handle_source=DeploymentHandleSource.UNKNOWN)
        router.initialize_state(capacity=2)
        return await steps(router)
    return asyncio.run(main())


def test_a_burst_with_one_prefix_fills_the_owners_slots_then_the_others() -> None:
    async def steps(router: PrefixAwareRouter) -> Any:
        router.table.record(SYSTEM, "r0")
        # Ray asks for five requests before any is sent (its routing tasks run side by side)
        return [names(await router.choose_replicas(REPLICAS, request(i, SYSTEM))) for i in range(5)], \
            dict(router.in_flight)

    ranks, counts = run(steps)
    assert ranks == [[["r0"], ["r1"]], [["r0"], ["r1"]], [["r1"], ["r0"]], [["r1"], ["r0"]], [["r0", "r1"]]]
    assert counts == {"r0": 2, "r1": 2}


def test_counts_follow_where_requests_went_and_when_they_ended() -> None:
    async def steps(router: PrefixAwareRouter) -> Any:
        first = request(1, SYSTEM)
        assert names(await router.choose_replicas(REPLICAS, first)) == [["r0", "r1"]]   # nobody owns it yet
        router.on_request_routed(first, "r1", None)
        assert router.table.owner(SYSTEM, {"r0": 0, "r1": 0}) == ("r1", 4)
        again = request(2, SYSTEM)
        assert names(await router.choose_replicas(REPLICAS, again)) == [["r1"], ["r0"]]
        assert names(await router.choose_replicas(REPLICAS, again)) == [["r1"], ["r0"]]   # asked again: counted once
        assert router.in_flight == {"r1": 2}
        router.on_request_routed(again, "r0", None)   # r1 refused it: Ray sent it on
        assert router.in_flight == {"r0": 1, "r1": 1}
        router.on_request_completed("r1", "q1")
        router.on_request_completed("r1", "q1")   # told twice: counted once
        router.on_request_completed("r0", "q9")   # never sent: nothing to count
        return dict(router.in_flight)

    assert run(steps) == {"r0": 1, "r1": 0}


def test_a_first_choice_never_sent_stops_counting(monkeypatch: Any) -> None:
    import llamact.serve_ray.router as router_module

    async def steps(router: PrefixAwareRouter) -> Any:
        router.table.record(SYSTEM, "r0")
        await router.choose_replicas(REPLICAS, request(1, SYSTEM))   # its client left before Ray sent it
        assert router.in_flight == {"r0": 1}
        later = router_module.time.monotonic() + router_module.PROMISE_TTL_S + 1
        monkeypatch.setattr(router_module.time, "monotonic", lambda: later)
        await router.choose_replicas(REPLICAS, request(2, SYSTEM))
        return dict(router.in_flight)

    assert run(steps) == {"r0": 1}   # the new request's alone
