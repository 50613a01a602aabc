"""The reasoning-budget sampler (src/shim/reasoning_budget.cpp) on upstream's own unit cases.

Re-expressed from upstream's tests/test-reasoning-budget.cpp: token sequences are fed one by one,
and before each the sampler is applied to a candidate array to see whether it forces a token (all
logits -inf but one). Like upstream's, these run without a vocabulary (every token counts as a
whole UTF-8 character); the UTF-8 wait is tested with a real model below.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from llamact.errors import LlamaInferenceException, LlamaStateException
from llamact.native.reasoning_budget import BudgetState, ReasoningBudget, ReasoningBudgetSpec

IDLE, COUNTING, FORCING, DONE = BudgetState.IDLE, BudgetState.COUNTING, BudgetState.FORCING, BudgetState.DONE
NEVER = None


def budget(start: Sequence[Sequence[int]], end: Sequence[Sequence[int]], forced: Sequence[int], n: int,
           state: BudgetState = IDLE) -> ReasoningBudget:
    return ReasoningBudget(ReasoningBudgetSpec(tuple(map(tuple, start)), tuple(map(tuple, end)), tuple(forced), n,
                                               state))


def forcing_span(sampler: ReasoningBudget, sequence: Sequence[int]) -> tuple[int | None, int | None]:
    """upstream's test_reasoning_budget loop: (first, last) index at which exactly one token was
    left finite before accepting the sequence's token there; the loop stops once forcing stops."""
    n_vocab = max(sequence) + 1
    n_vocab = max(n_vocab, *(t + 1 for t in sampler.spec.forced), *(t + 1 for s in sampler.spec.start for t in s),
                  *(t + 1 for s in sampler.spec.end for t in s))
    first = last = None
    for i, token in enumerate(sequence):
        logits = sampler.apply([math.log(j + 1) for j in range(n_vocab)])
        finite = sum(1 for x in logits if math.isfinite(x))
        sampler.accept(token)
        if finite == 1:
            first = i if first is None else first
            last = i
        elif first is not None:
            break
    return first, last


# (name, sequence, start seqs, end seqs, forced, budget, initial state, force start, force end at least)
UPSTREAM_CASES = [
    ("natural end before budget exhausted", [100, 50, 51, 101, 52], [[100]], [[101]], [102], 5, IDLE, NEVER, NEVER),
    ("budget exhausted forcing", [100, 50, 51, 52, 53], [[100]], [[101]], [102, 101], 2, IDLE, 3, 4),
    ("activate immediately budget=0", [100, 50, 51, 52], [[100]], [[101]], [102, 101], 0, COUNTING, 0, 1),
    ("no start/end configured", [50, 51, 52, 53], [[]], [[]], [102], 2, IDLE, NEVER, NEVER),
    ("activate immediately with budget", [50, 51, 52, 53], [[100]], [[101]], [102, 101], 2, COUNTING, 2, 3),
    ("multi-block re-arms budget after DONE", [100, 50, 101, 100, 60, 61, 62, 63], [[100]], [[101]], [102, 101], 2,
     IDLE, 6, 7),
    ("multiple start sequences", [110, 111, 50, 51, 52, 53], [[100], [110, 111]], [[101]], [102, 101], 2, IDLE, 4, 5),
    ("multiple end sequences", [100, 50, 103, 104, 52], [[100]], [[101], [103, 104]], [102, 101], 5, IDLE,
     NEVER, NEVER),
]


@pytest.mark.parametrize(("name", "sequence", "start", "end", "forced", "n", "state", "force_start", "force_end"),
                         UPSTREAM_CASES, ids=[c[0] for c in UPSTREAM_CASES])
def test_upstream_forcing_cases(name: str, sequence: list[int], start: list[list[int]], end: list[list[int]],
                                forced: list[int], n: int, state: BudgetState, force_start: int | None,
                                force_end: int | None) -> None:
    with budget(start, end, forced, n, state) as sampler:
        first, last = forcing_span(sampler, sequence)
    assert first == force_start
    if force_end is not None:
        assert last is not None and last >= force_end


def test_forced_tokens_in_order_then_done() -> None:
    # the forced sequence comes out token by token (upstream's test 2, looking at which token)
    with budget([[100]], [[101]], [102, 101], 2) as sampler:
        for token in (100, 50, 51):
            assert sampler.forced_token(103) is None
            sampler.accept(token)
        assert sampler.state == FORCING
        assert sampler.forced_token(103) == 102
        sampler.accept(102)
        assert sampler.forced_token(103) == 101
        sampler.accept(101)
        assert sampler.state == DONE and sampler.forced_token(103) is None


def test_clone_mid_counting() -> None:
    with budget([[100]], [[101]], [102, 101], 2) as sampler:
        sampler.accept(100)
        sampler.accept(50)
        with sampler.clone() as clone:
            clone.accept(51)  # uses up the clone's remaining budget
            assert clone.forced_token(103) == 102
        assert sampler.forced_token(103) is None  # the original still has one token left


def test_clone_mid_forcing() -> None:
    with budget([[100]], [[101]], [102, 101], 0, FORCING) as sampler:
        assert sampler.forced_token(103) == 102
        sampler.accept(102)
        with sampler.clone() as clone:
            assert clone.forced_token(103) == 101


def test_force_manual() -> None:
    with budget([[100]], [[101]], [102, 101], 5) as sampler:  # COUNTING: force() begins the forced sequence
        sampler.accept(100)
        sampler.accept(50)
        assert sampler.state == COUNTING
        assert sampler.force()
        assert sampler.state == FORCING
        assert sampler.forced_token(103) == 102
        sampler.accept(102)
        assert sampler.forced_token(103) == 101
        sampler.accept(101)
        assert sampler.state == DONE
    with budget([[100]], [[101]], [102, 101], 5) as sampler:  # IDLE: no-op
        assert not sampler.force()
        assert sampler.state == IDLE
    with budget([[100]], [[101]], [102, 101], 5) as sampler:  # DONE: no-op
        sampler.accept(100)
        sampler.accept(101)
        assert sampler.state == DONE
        assert not sampler.force()
        assert sampler.state == DONE
    with budget([[100]], [[101]], [102, 101], 0, FORCING) as sampler:  # FORCING: no-op, position kept
        sampler.accept(102)
        assert not sampler.force()
        assert sampler.state == FORCING
        assert sampler.forced_token(103) == 101


def test_end_match() -> None:
    with budget([[100]], [[101], [103, 104]], [102, 101], 5) as sampler:  # natural end; re-arming clears it
        assert sampler.end_match is None
        for token in (100, 50, 103, 104):
            sampler.accept(token)
        assert sampler.end_match == (103, 104)
        sampler.accept(100)
        assert sampler.end_match is None
    with budget([[100]], [[104], [103, 104]], [102, 104], 5) as sampler:  # the longest sequence ending here wins
        for token in (100, 103, 104):
            sampler.accept(token)
        assert sampler.end_match == (103, 104)
    with budget([[100]], [[101], [103, 104]], [102, 103, 104], 0, FORCING) as sampler:  # found in forced tokens
        sampler.accept(102)
        sampler.accept(103)
        assert sampler.end_match is None
        sampler.accept(104)
        assert sampler.end_match == (103, 104)
    with budget([[100]], [[101], [103, 104]], [102], 0, FORCING) as sampler:  # forced tokens without an end tag
        sampler.accept(102)
        assert sampler.state == DONE
        assert sampler.end_match is None


def test_matching_restarts_after_a_match() -> None:
    # after the start sequence is recognised, its tokens do not count towards an end sequence that
    # overlaps it (upstream's matcher returns to its root after a match)
    with budget([[7, 8]], [[8, 9]], [1], 5) as sampler:
        for token in (7, 8, 9):
            sampler.accept(token)
        assert sampler.state == COUNTING  # 8 opened the thought; "8 9" did not close it
        sampler.accept(8)
        sampler.accept(9)
        assert sampler.state == DONE


def test_bad_specs_and_use_after_close() -> None:
    with pytest.raises(LlamaInferenceException, match="budget"):
        budget([[1]], [[2]], [3], -5)
    with pytest.raises(LlamaInferenceException, match="forced"):
        budget([[1]], [[2]], [-3], 5)
    sampler = budget([[1]], [[2]], [3], 5)
    sampler.close()
    with pytest.raises(LlamaStateException):
        sampler.accept(1)
