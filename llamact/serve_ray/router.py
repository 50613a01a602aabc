"""The prefix-aware request router, as Ray Serve's custom request router (``ray.serve.request_router``).

    RequestRouterConfig(request_router_class=PrefixAwareRouter,
                        request_router_kwargs={"capacity": 4, "max_keys": 200_000})

Ray calls ``choose_replicas`` for each request sent through a ``DeploymentHandle`` to the replicas; the
ingress passes the prompt's block keys as the call's ``prefix`` keyword (``prompts`` + ``prefix``).
The router asks each replica's requests in flight (Ray's queue-length cache, probing a replica it
has no fresh figure for), ranks the replicas with ``PrefixTable.choose`` (the prefix's owner while
it has a free slot, else all together: Ray then takes the least loaded of a rank, and moves on to
the next rank when a replica refuses), and, once Ray has sent the request, records its keys as that
replica's (``on_request_routed``). A request without keys is routed by load alone.

The table lives in the router's process (each ingress replica keeps its own; one ingress is the
default). Ray's request-router interface is marked alpha; the one private call here is Ray's own
``_probe_queue_lens``, which Ray's prefix router (ray.llm) uses the same way.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from ray.serve.request_router import FIFOMixin, PendingRequest, ReplicaID, RequestRouter, RunningReplica

from .prefix import PrefixTable

__all__ = ["PREFIX_KEYWORD", "PrefixAwareRouter"]

PREFIX_KEYWORD = "prefix"   # the handle call's keyword carrying the prompt's block keys


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

    async def _loads(self, replicas: Sequence[RunningReplica]) -> dict[Hashable, int | None]:
        loads: dict[Hashable, int | None] = {}
        unknown = []
        for replica in replicas:
            load = self.replica_queue_len_cache.get(replica.replica_id)
            loads[replica.replica_id] = load
            if load is None:
                unknown.append(replica)
        if unknown:
            for replica, load in await self._probe_queue_lens(unknown, 0):
                loads[replica.replica_id] = load
        return loads

    async def choose_replicas(self, candidate_replicas: list[RunningReplica],
                              pending_request: PendingRequest | None = None) -> list[list[RunningReplica]]:
        if not candidate_replicas:
            return []
        keys = _keys(pending_request)
        by_id = {r.replica_id: r for r in candidate_replicas}
        if not keys:
            return [candidate_replicas]
        ranks = self.table.choose(keys, await self._loads(candidate_replicas), self.capacity)
        return [[by_id[i] for i in rank if i in by_id] for rank in ranks]

    def on_request_routed(self, pending_request: PendingRequest, replica_id: ReplicaID, result: Any) -> None:
        keys = _keys(pending_request)
        if keys:
            self.table.record(keys, replica_id)

    def on_replica_actor_died(self, replica_id: ReplicaID) -> None:
        super().on_replica_actor_died(replica_id)
        self.table.forget(replica_id)
