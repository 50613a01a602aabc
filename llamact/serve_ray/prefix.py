"""Prefix-aware routing's bookkeeping, free of Ray: a prompt's token blocks hashed in a chain, which
replica last served each block, and the choice of a replica for the next prompt.

    keys = block_keys(tokens, block=16)             # one key per whole block; key i covers blocks 0..i
    table = PrefixTable(max_keys=200_000)
    ranks = table.choose(keys, loads, capacity)     # [[owner], the others by load] or all by load
    table.record(keys, replica)                     # once the request was sent there

A key is a hash of its block's token ids and the key before it, so equal keys mean equal prefixes up
to that block, and the longest key a replica owns is the longest prefix of the prompt that replica
last served (the turns of one conversation: each turn's prompt starts with the previous turn's).
``choose`` sends a prompt to the replica owning its longest known prefix while that replica is not
overloaded (its requests in flight below ``capacity``: its free slots), else to the least loaded.
Only whole blocks are keyed: a prompt shorter than a block has no prefix to follow. The table
forgets its least recently recorded keys beyond ``max_keys`` (a few MB). Keys are blake2b
digests: the same in every process, unlike ``hash()``.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence

__all__ = ["PrefixTable", "block_keys", "by_load"]


def block_keys(tokens: Sequence[int], block: int) -> tuple[bytes, ...]:
    """The chained key of each whole ``block`` of ``tokens``."""
    keys: list[bytes] = []
    previous = b""
    for start in range(0, len(tokens) - block + 1, block):
        digest = hashlib.blake2b(previous, digest_size=8)
        digest.update(array("q", tokens[start:start + block]).tobytes())
        previous = digest.digest()
        keys.append(previous)
    return tuple(keys)


def by_load(loads: Mapping[Hashable, int]) -> list[list[Hashable]]:
    """Replicas in ranks of equal load, the least loaded first."""
    ranks: dict[int, list[Hashable]] = {}
    for replica, load in loads.items():
        ranks.setdefault(load, []).append(replica)
    return [ranks[load] for load in sorted(ranks)]


class PrefixTable:
    """Which replica last served each key (see the module docstring). Not thread-safe: one router's
    event loop uses it."""

    def __init__(self, max_keys: int = 200_000) -> None:
        self.max_keys = max_keys
        self._owner: OrderedDict[bytes, Hashable] = OrderedDict()

    def __len__(self) -> int:
        return len(self._owner)

    def owner(self, keys: Sequence[bytes], candidates: Mapping[Hashable, object]) -> tuple[Hashable | None, int]:
        """The candidate owning the longest prefix of ``keys``, and that prefix's length in blocks."""
        for n in range(len(keys), 0, -1):
            replica = self._owner.get(keys[n - 1])
            if replica is not None and replica in candidates:
                return replica, n
        return None, 0

    def choose(self, keys: Sequence[bytes], loads: Mapping[Hashable, int], capacity: int) -> list[list[Hashable]]:
        """Ranks of replicas for a prompt: its prefix's owner alone first while it has fewer than
        ``capacity`` requests in flight, then the others by load; else all by load (the least
        loaded first, equal loads in one rank: Ray takes any of a rank)."""
        owner, _n = self.owner(keys, loads)
        if owner is not None and loads[owner] < capacity:
            return [[owner], *by_load({r: n for r, n in loads.items() if r != owner})]
        return by_load(loads)

    def record(self, keys: Sequence[bytes], replica: Hashable) -> None:
        """``replica`` served a prompt with ``keys``: it owns each of them now."""
        for key in keys:
            self._owner[key] = replica
            self._owner.move_to_end(key)
        while len(self._owner) > self.max_keys:
            self._owner.popitem(last=False)

    def forget(self, replica: Hashable) -> None:
        """A replica is gone: it owns nothing."""
        for key in [k for k, r in self._owner.items() if r == replica]:
            del self._owner[key]
