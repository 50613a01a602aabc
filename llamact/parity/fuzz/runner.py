"""The fuzz loop: generate a batch per target, ask the oracle in one exchange, judge each case with
the scoreboard's rules, shrink and save what is new, keep counts; resumable from a state file.

What enters :class:`FuzzRunner`: a context, targets, a seed, where to save findings, a state file
(optional). :meth:`FuzzRunner.run` takes a time box (seconds, checked between batches) and/or a
number of cases per target, and returns the tallies. Outcomes per case: ``equal``, ``different``,
``error`` (llamact raised, upstream answered), ``crash`` (a non-LlamaException escaped llamact),
``known`` (a difference known_differences.py names), ``deviation`` (a documented deliberate one),
``unsent`` (the target would not send it, e.g. it makes upstream loop), ``uncomparable`` (upstream's
answer held invalid UTF-8), ``oracle_failed`` (the oracle process died or hung on it).
"""

from __future__ import annotations

import json
import os
import random
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...json_types import Json
from ..components import Component
from ..corpus import Case
from ..known_differences import known_difference
from ..oracle import OracleError, OracleProcessError
from ..scoreboard import Verdict, judge
from .saved import append_finding
from .shrink import shrink
from .target import FuzzContext, Target, Unsent

__all__ = ["FuzzRunner", "Judged", "Tally", "evaluate"]

BATCH = {"jinja_render": 16, "caps": 4, "chat_parse": 8, "peg_parse": 8, "json_schema": 100, "gbnf": 200}
SHRINK_BUDGET = 400


@dataclass
class Tally:
    cases: int = 0
    units: int = 0
    equal: int = 0
    different: int = 0
    error: int = 0
    crash: int = 0
    known: int = 0
    deviation: int = 0
    unsent: int = 0
    uncomparable: int = 0
    oracle_failed: int = 0
    saved: int = 0
    seconds: float = 0.0
    next_index: int = 0
    known_labels: dict[str, int] = field(default_factory=dict)

    @property
    def findings(self) -> int:
        return self.different + self.error + self.crash


def _component(target: Target) -> Component:
    return Component(target.component, target.name, lambda case: target.run(case.input),
                     is_deviation=lambda case, got: target.is_deviation(case.input, case.expected, got),
                     ordered=target.ordered)


@dataclass(frozen=True)
class Judged:
    """One input judged: ``outcome`` (a Verdict's, or ``unsent`` / ``uncomparable`` /
    ``oracle_failed``), the verdict when there is one, upstream's expected answer, and the label
    of the known difference it is, if any."""

    outcome: str
    verdict: Verdict | None = None
    expected: Json = None
    label: str | None = None


def evaluate(target: Target, inp: Json, answer: Any = None, shrinking: bool = False) -> Judged:
    """Judge one input, asking the oracle unless ``answer`` (its answer) is given. ``shrinking``:
    a candidate the target cannot even build a request from is ``malformed`` (shrinking removes
    parts a generated input always has)."""
    if answer is None:
        try:
            request = target.request(inp)
        except Unsent:
            return Judged("unsent")
        except Exception:  # noqa: BLE001 - only while shrinking; see the docstring
            if not shrinking:
                raise
            return Judged("malformed")
        try:
            answer = target.ctx.oracle.batch([request])[0]
        except OracleProcessError:
            return Judged("oracle_failed")
    if isinstance(answer, OracleError) and answer.kind == "lossy_utf8":
        return Judged("uncomparable")
    expected = target.expected(inp, answer)
    verdict = judge(_component(target), Case(target.component, f"fuzz/{target.name}", target.name, inp, expected))
    label = None
    if verdict.outcome not in ("equal", "deviation"):
        label = known_difference(target.component, expected, verdict.got)
    return Judged("known" if label else verdict.outcome, verdict, expected, label)


class FuzzRunner:
    def __init__(self, ctx: FuzzContext, targets: list[Target], seed: int, corpus_dir: Path | None,
                 state_path: Path | None = None, log: Callable[[str], None] | None = None,
                 shrink_budget: int = SHRINK_BUDGET) -> None:
        self.ctx, self.targets, self.seed = ctx, targets, seed
        self.corpus_dir, self.state_path, self.log = corpus_dir, state_path, log or (lambda _m: None)
        self.shrink_budget = shrink_budget
        self.tallies = {t.name: Tally() for t in targets}
        self.findings: list[Json] = []
        self._others: dict[str, Json] = {}  # other targets' tallies in the state file, kept as they are
        if state_path is not None and state_path.is_file():
            state = json.loads(state_path.read_text())
            if state.get("seed") != seed:
                raise ValueError(f"{state_path} holds a run with seed {state.get('seed')}, not {seed}")
            for name, tally in state.get("targets", {}).items():
                if name in self.tallies:
                    self.tallies[name] = Tally(**tally)
                else:
                    self._others[name] = tally

    # -- the loop ----------------------------------------------------------------------------

    def run(self, seconds: float | None = None, cases: int | None = None) -> dict[str, Tally]:
        deadline = time.monotonic() + seconds if seconds is not None else None
        goal = {t.name: self.tallies[t.name].cases + cases for t in self.targets} if cases is not None else None
        active = list(self.targets)
        while active:
            for target in list(active):
                if deadline is not None and time.monotonic() >= deadline:
                    return self.tallies
                tally = self.tallies[target.name]
                size = BATCH.get(target.name, 16)
                if goal is not None:
                    size = min(size, goal[target.name] - tally.cases)
                    if size <= 0:
                        active.remove(target)
                        continue
                started = time.monotonic()
                self._batch(target, size)
                tally.seconds += time.monotonic() - started
                self._save_state()
        return self.tallies

    def _rng(self, target: Target, index: int) -> random.Random:
        return random.Random(f"{self.seed}:{target.name}:{index}")

    def _batch(self, target: Target, size: int) -> None:
        tally = self.tallies[target.name]
        indices = list(range(tally.next_index, tally.next_index + size))
        inputs = target.generate_batch([self._rng(target, i) for i in indices])
        requests: list[dict[str, Any]] = []
        sendable: list[int] = []
        for k, inp in enumerate(inputs):
            try:
                requests.append(target.request(inp))
                sendable.append(k)
            except Unsent:
                pass
        answers = self._ask(requests)
        answer_of = dict(zip(sendable, answers, strict=True))
        for k, (index, inp) in enumerate(zip(indices, inputs, strict=True)):
            tally.cases += 1
            if k not in answer_of:
                tally.unsent += 1
                continue
            answer = answer_of[k]
            if answer is _FAILED:
                tally.oracle_failed += 1
                self.findings.append({"target": target.name, "outcome": "oracle_failed", "index": index,
                                      "input": inp})
                continue
            judged = evaluate(target, inp, answer)
            if judged.verdict is not None:
                tally.units += target.units(inp, judged.expected)
            self._count(target, tally, index, inp, judged)
        tally.next_index = indices[-1] + 1 if indices else tally.next_index

    def _ask(self, requests: list[dict[str, Any]]) -> list[Any]:
        """The batch's answers; if the oracle dies on the batch, each request alone, so that only the
        one that kills it is lost (marked _FAILED)."""
        try:
            return self.ctx.oracle.batch(requests)
        except OracleProcessError:
            out: list[Any] = []
            for request in requests:
                try:
                    out.append(self.ctx.oracle.batch([request])[0])
                except OracleProcessError:
                    out.append(_FAILED)
            return out

    def _count(self, target: Target, tally: Tally, index: int, inp: Json, judged: Judged) -> None:
        setattr(tally, judged.outcome, getattr(tally, judged.outcome) + 1)
        if judged.label is not None:
            tally.known_labels[judged.label] = tally.known_labels.get(judged.label, 0) + 1
            if tally.known_labels[judged.label] == 1:  # one example of each known difference
                self._save(target, tally, index, inp, judged)
        elif judged.outcome in ("different", "error", "crash"):
            assert judged.verdict is not None
            self.log(f"{target.name} #{index}: {judged.outcome}: {judged.verdict.why[:200]}")
            self._save(target, tally, index, inp, judged)

    def _save(self, target: Target, tally: Tally, index: int, inp: Json, judged: Judged) -> None:
        assert judged.verdict is not None
        signature = failure_signature(judged)

        def same_failure(candidate: Json) -> bool:
            return failure_signature(evaluate(target, candidate, shrinking=True)) == signature

        small, calls = shrink(inp, same_failure, target.fixed_keys, self.shrink_budget)
        final = evaluate(target, small)
        entry: Json = {"target": target.name, "input": small, "outcome": judged.outcome,
                       "why": (final.verdict or judged.verdict).why, "seed": self.seed, "index": index,
                       "shrink_calls": calls}
        if judged.label is not None:
            entry["known"] = judged.label
        self.findings.append(entry)
        if self.corpus_dir is not None and append_finding(self.corpus_dir, entry):
            tally.saved += 1

    def _save_state(self) -> None:
        if self.state_path is None:
            return
        state = {"seed": self.seed, "targets": {**self._others, **{n: asdict(t) for n, t in self.tallies.items()}}}
        fd, tmp = tempfile.mkstemp(dir=self.state_path.parent or Path("."), suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(state, fh, indent=1)
        os.replace(tmp, self.state_path)


_FAILED = object()
_INDEX = re.compile(r"\[\d+\]")


def failure_signature(judged: Judged) -> tuple[str, ...]:
    """What a shrunk input must keep failing with: the outcome, the known label, and the shape of
    the failure -- the exception class llamact raised (a crash's, or an error's against upstream's
    kind), or the path where the values first differ. A candidate that fails otherwise (e.g. a
    syntax error the cut made) is not the same failure."""
    verdict = judged.verdict
    if verdict is None:
        return (judged.outcome,)
    got = verdict.got
    if isinstance(got, dict) and isinstance(got.get("crash"), dict):
        shape = "crash:" + str(got["crash"]["exception"])
    elif isinstance(got, dict) and isinstance(got.get("raised"), dict):
        kind = judged.expected["error"].get("kind", "") if isinstance(judged.expected, dict) and \
            isinstance(judged.expected.get("error"), dict) else "answer"
        shape = f"raised:{got['raised']['exception']}:vs:{kind}"
    else:
        upstream = "error" if isinstance(judged.expected, dict) and set(judged.expected) == {"error"} else "value"
        shape = f"{upstream}:path:" + _INDEX.sub("[]", verdict.why.split(":", 1)[0])
    return judged.outcome, judged.label or "", shape
