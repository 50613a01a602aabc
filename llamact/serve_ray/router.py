"""The prefix-aware request router, as Ray Serve's custom request router (``ray.serve.request_router``).

    RequestRouterConfig(request_router_class=PrefixAwareRouter,
                        request_router_kwargs={"capacity": 4, "max_keys": 200_000})

Ray calls ``choose_replicas`` for each request sent through a ``DeploymentHandle`` to the replicas; the
ingress passes the prompt's block keys as the call's ``prefix`` keyword (``prompts`` + ``prefix``).
The router counts the requests it sent each replica and that have not completed
(``on_request_routed`` / ``on_request_completed``: exact, where Ray's queue-length cache is a
sample), ranks the replicas with ``PrefixTable.choose`` (the prefix's owner while it has a free
slot, else by load: Ray takes any replica of the first rank that accepts, and moves on to the next
rank when one refuses), and, once Ray has sent the request, records its keys as that replica's. A
request ranked first for its owner counts there from that moment, so that a burst of requests with
one prefix (new chats sharing a system prompt) fills the owner's free slots and no more, although
Ray routes several requests at once. A request without keys is routed by load alone.

The table and the counts live in the router's process (each ingress replica keeps its own and
counts only its own requests; one ingress is the default). Ray's request-router interface is
marked alpha.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from typing import Any

from ray.serve.request_router import FIFOMixin, PendingRequest, ReplicaID, RequestRouter, RunningReplica

from .prefix import PrefixTable, by_load

__all__ = ["PREFIX_KEYWORD", "PROMISE_TTL_S", "PrefixAwareRouter"]

PREFIX_KEYWORD = "prefix"   # the handle call's keyword carrying the prompt's block keys
PROMISE_TTL_S = 30.0        # a first choice not sent by then (the request was dropped) stops counting


def _keys(pending_request: PendingRequest | None) -> Sequence[bytes]:
    if pending_request is None:
        return ()
    keys = pending_request.kwargs.get(PREFIX_KEYWORD, ())
    return keys if isinstance(keys, (tuple, list)) else ()


class PrefixAwareRouter(FIFOMixin, RequestRouter):
    """See the module docstring."""

    def initialize_state(self, capacity: int = 1, max_keys: int = 200_000, **_: Any) -> None:
        self.capacity = capacity
        self.table = PrefixTable(max_keys)
        self.in_flight: dict[Hashable, int] = {}     # requests this router sent each replica, not yet done
        self._promised: dict[str, tuple[Hashable, float]] = {}   # request id -> (its first choice, when)
        self._sent: dict[str, Hashable] = {}         # request id -> the replica it was sent to

    def _count(self, replica: Hashable, delta: int) -> None:
        self.in_flight[replica] = max(0, self.in_flight.get(replica, 0) + delta)

    async def choose_replicas(self, candidate_replicas: list[RunningReplica],
                              pending_request: PendingRequest | None = None) -> list[list[RunningReplica]]:
        if not candidate_replicas:
            return []
        request_id = pending_request.metadata.internal_request_id if pending_request is not None else None
        now = time.monotonic()
        for stale in [i for i, (_r, t) in self._promised.items() if now - t > PROMISE_TTL_S]:
            self._count(self._promised.pop(stale)[0], -1)   # a request dropped before it was sent
        previous = self._promised.pop(request_id, None) if request_id is not None else None
        if previous is not None:   # asked again (the replica refused, or Ray backs off): counted anew
            self._count(previous[0], -1)
        by_id: dict[Hashable, RunningReplica] = {r.replica_id: r for r in candidate_replicas}
        loads: dict[Hashable, int] = {replica_id: self.in_flight.get(replica_id, 0) for replica_id in by_id}
        keys = _keys(pending_request)
        ranks = self.table.choose(keys, loads, self.capacity) if keys else by_load(loads)
        if request_id is not None and len(ranks[0]) == 1:
            # the first choice counts the request from now: requests routed meanwhile see its slot taken
            self._promised[request_id] = (ranks[0][0], now)
            self._count(ranks[0][0], +1)
        return [[by_id[i] for i in rank] for rank in ranks]

    def on_request_routed(self, pending_request: PendingRequest, replica_id: ReplicaID, result: Any) -> None:
        request_id = pending_request.metadata.internal_request_id
        promised = self._promised.pop(request_id, None)
        if promised is not None:
            self._count(promised[0], -1)
        self._count(replica_id, +1)
        self._sent[request_id] = replica_id
        keys = _keys(pending_request)
        if keys:
            self.table.record(keys, replica_id)

    def on_request_completed(self, replica_id: ReplicaID, internal_request_id: str) -> None:
        if self._sent.pop(internal_request_id, None) is not None:
            self._count(replica_id, -1)

    def on_replica_actor_died(self, replica_id: ReplicaID) -> None:
        super().on_replica_actor_died(replica_id)
        self.table.forget(replica_id)
        self.in_flight.pop(replica_id, None)
