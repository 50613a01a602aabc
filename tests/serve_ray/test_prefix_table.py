"""The prefix router's bookkeeping without Ray (llamact/serve_ray/prefix.py): chained block keys, the
owner of a prompt's longest known prefix, the choice under load, the table's bound."""

from __future__ import annotations

from llamact.serve_ray.prefix import PrefixTable, block_keys

SYSTEM = list(range(100, 164))            # four blocks of 16 shared by every conversation
A1 = SYSTEM + list(range(1000, 1040))     # conversation A, turn 1: six whole blocks
A2 = A1 + list(range(2000, 2030))         # A, turn 2 starts with turn 1
B1 = SYSTEM + list(range(3000, 3040))


def test_keys_chain_so_equal_keys_mean_equal_prefixes() -> None:
    a1, a2, b1 = block_keys(A1, 16), block_keys(A2, 16), block_keys(B1, 16)
    assert len(a1) == len(A1) // 16 == 6 and len(a2) == len(A2) // 16
    assert a2[:len(a1)] == a1                  # a later turn extends the earlier one's keys
    assert b1[:4] == a1[:4] and b1[4] != a1[4]  # the shared system prompt, then apart
    # the same block at another place has another key: a key names the whole prefix up to it
    assert block_keys(list(range(16)) * 2, 16)[0] != block_keys(list(range(16)) * 2, 16)[1]
    assert block_keys(list(range(15)), 16) == ()   # no whole block: nothing to follow


def test_a_conversation_goes_back_to_its_replica_while_it_has_room() -> None:
    table = PrefixTable()
    table.record(block_keys(A1, 16), "r1")
    table.record(block_keys(B1, 16), "r2")
    assert table.owner(block_keys(A2, 16), {"r1": 0, "r2": 0}) == ("r1", 6)
    assert table.choose(block_keys(A2, 16), {"r1": 1, "r2": 0}, capacity=2) == [["r1"], ["r2"]]
    # B's turn 2 goes to r2, although r1 served the system prompt first
    assert table.choose(block_keys(B1 + [7] * 16, 16), {"r1": 0, "r2": 1}, capacity=2) == [["r2"], ["r1"]]
    # a new conversation follows the longest prefix it has: the system prompt's last server
    assert table.owner(block_keys(SYSTEM + [9] * 32, 16), {"r1": 0, "r2": 0}) == ("r2", 4)


def test_a_full_replica_or_an_unknown_prompt_is_routed_by_load() -> None:
    table = PrefixTable()
    table.record(block_keys(A1, 16), "r1")
    assert table.choose(block_keys(A2, 16), {"r1": 2, "r2": 0}, capacity=2) == [["r2"], ["r1"]]
    assert table.choose(block_keys(A2, 16), {"r1": 2, "r2": 3, "r3": 2}, capacity=2) == [["r1", "r3"], ["r2"]]
    unknown = block_keys(list(range(5000, 5064)), 16)
    assert table.choose(unknown, {"r1": 1, "r2": 0, "r3": 1}, capacity=2) == [["r2"], ["r1", "r3"]]
    assert table.choose((), {"r1": 0}, capacity=1) == [["r1"]]
    # an owner that is no longer a candidate (a replica gone) is not chosen
    assert table.choose(block_keys(A2, 16), {"r2": 0, "r3": 0}, capacity=2) == [["r2", "r3"]]
    # the others after the owner, least loaded first
    assert table.choose(block_keys(A2, 16), {"r1": 1, "r2": 3, "r3": 0}, capacity=2) == [["r1"], ["r3"], ["r2"]]


def test_the_table_forgets_its_oldest_keys_and_a_dead_replica() -> None:
    table = PrefixTable(max_keys=6)
    table.record(block_keys(A1, 16), "r1")
    table.record(block_keys(B1, 16), "r2")    # 6 keys, the 4 shared ones recorded again: A's own 2 go
    assert len(table) == 6
    assert table.owner(block_keys(A1, 16), {"r1": 0, "r2": 0}) == ("r2", 4)
    table.forget("r2")
    assert len(table) == 0
