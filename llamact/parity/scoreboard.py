"""The scoreboard: llamact against the oracle, component by component.

Equality is DESIGN.md's: prompts byte-identical, params identical with the parser compared as
parsed JSON, parsed messages identical, diff sequences identical, grammars byte-identical; an
oracle error is matched by a llamact error (raised, or answered as the same error data). Results are
JSON values compared structurally.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import LlamaException
from .components import Component
from .corpus import Case, Corpus

Json = Any


@dataclass
class Row:
    component: str
    description: str
    cases: int = 0
    equal: int = 0
    different: int = 0
    error: int = 0
    deviation: int = 0
    not_implemented: bool = False
    seconds: float = 0.0
    differences: list[dict[str, Json]] = field(default_factory=list)

    def summary(self) -> dict[str, Json]:
        return {k: v for k, v in asdict(self).items() if k not in ("differences", "description", "component")}


def _same(expected: Json, got: Json) -> bool:
    return bool(expected == got)


def score_component(component: Component, cases: list[Case], max_differences: int | None = None) -> Row:
    row = Row(component.name, component.description, cases=len(cases))
    if component.runner is None:
        row.not_implemented = True
        return row
    started = time.perf_counter()
    for case in cases:
        try:
            got: Json = component.runner(case)
            raised = None
        except LlamaException as exc:
            got, raised = {"error": {"message": str(exc)}}, exc
        if component.is_deviation is not None and component.is_deviation(case, got):
            row.deviation += 1
            continue
        if component.judge is not None:   # it judges an error answer too
            verdict = component.judge(case, got)
            if verdict == "equal":
                row.equal += 1
            elif verdict == "deviation":
                row.deviation += 1
            else:
                row.different += 1
                _record(row, case, got, max_differences)
            continue
        if case.oracle_error:
            # a runner may answer an error as data, to have its message compared too
            if raised is not None or _same(case.expected, got):
                row.equal += 1
            else:
                row.different += 1
                _record(row, case, got, max_differences)
            continue
        if raised is not None:
            row.error += 1
            _record(row, case, got, max_differences)
        elif _same(case.expected, got):
            row.equal += 1
        else:
            row.different += 1
            _record(row, case, got, max_differences)
    row.seconds = time.perf_counter() - started
    return row


def _record(row: Row, case: Case, got: Json, limit: int | None) -> None:
    if limit is None or len(row.differences) < limit:
        row.differences.append({"id": case.id, "input": case.input, "expected": case.expected, "got": got})


def score(corpus: Corpus, components: list[Component]) -> list[Row]:
    return [score_component(c, corpus.cases.get(c.name, [])) for c in components]


def render_table(rows: list[Row]) -> str:
    header = f"{'component':<21}{'cases':>8}{'equal':>8}{'diff':>8}{'error':>8}{'deviation':>11}  status"
    lines = [header, "-" * len(header)]
    for r in rows:
        if r.not_implemented:
            status = "not implemented"
            counts = f"{r.cases:>8}{'-':>8}{'-':>8}{'-':>8}{'-':>11}"
        else:
            measured = r.cases - r.deviation
            pct = 100.0 * r.equal / measured if measured else 100.0
            status = f"{pct:.1f}% equal"
            counts = f"{r.cases:>8}{r.equal:>8}{r.different:>8}{r.error:>8}{r.deviation:>11}"
        lines.append(f"{r.component:<21}{counts}  {status}")
    return "\n".join(lines)


def summary_json(rows: list[Row]) -> dict[str, Json]:
    return {"components": {r.component: r.summary() for r in rows}}


def report_json(rows: list[Row], corpus: Corpus, extra: dict[str, Json]) -> str:
    return json.dumps({
        **summary_json(rows),
        **extra,
        "notes": corpus.notes,
        "differences": {r.component: r.differences for r in rows if r.differences},
    }, ensure_ascii=False, indent=1)
