"""The scoreboard: llamact against the oracle, component by component, scored so that it cannot flatter.

Equality is docs/design.md's (prompts byte-identical, params identical with the parser compared as
JSON, parsed messages identical, diff sequences identical, grammars byte-identical), under these
rules, each held by a test of its own (tests/parity/test_scoring_rules.py):

* Values are compared strictly (:mod:`.compare`): ``True``, ``1`` and ``1.0`` differ; object key
  order counts where the component says its values are ordered upstream (``Component.ordered``,
  less ``Component.unordered``).
* An upstream error is matched only by a llamact error of the same kind, with upstream's text where
  that text is what a user sees (:mod:`.error_kinds`, the one table). A runner may also answer an
  error as data (``{"error": {"kind", "message"}}``), compared like any value.
* A non-LlamaException escaping a runner (``IndexError``, ``KeyError``, ``RecursionError``, ...) is a
  bug: counted in its own ``crash`` column with a traceback summary, never equal, and never ends the
  run.
* A component that is measured with zero cases is an error (``problem``), not 100 %.
* A round-trip check (``Component.check == "round-trip"``, e.g. peg_arena: upstream's arena JSON
  loaded and saved back) is listed apart from the parity rows, in the table and in the JSON.
"""

from __future__ import annotations

import json
import time
import traceback
from dataclasses import asdict, dataclass, field

from ..errors import LlamaException
from ..json_types import Json
from .compare import first_difference
from .components import Component
from .corpus import Case, Corpus
from .error_kinds import error_text, match_error


@dataclass
class Row:
    component: str
    description: str
    check: str = "parity"
    cases: int = 0
    equal: int = 0
    different: int = 0
    error: int = 0          # llamact raised where upstream answered
    crash: int = 0          # a non-LlamaException escaped llamact: a bug
    deviation: int = 0
    not_implemented: bool = False
    excluded: str = ""      # not measured on purpose in this run (why)
    problem: str = ""       # the row could not be measured (e.g. no cases): the run fails
    seconds: float = 0.0
    differences: list[dict[str, Json]] = field(default_factory=list)

    def summary(self) -> dict[str, Json]:
        return {k: v for k, v in asdict(self).items() if k not in ("differences", "description", "component")}

    @property
    def failing(self) -> bool:
        return bool(self.problem) or (not self.not_implemented and not self.excluded
                                      and bool(self.different or self.error or self.crash))


def _crash_summary(exc: BaseException) -> dict[str, Json]:
    frames = traceback.extract_tb(exc.__traceback__)[-4:]
    return {"exception": type(exc).__name__, "message": str(exc)[:500],
            "traceback": [f"{f.filename.rsplit('/llamact/', 1)[-1]}:{f.lineno} in {f.name}" for f in frames]}


@dataclass(frozen=True)
class Verdict:
    """One case judged: ``outcome`` is ``equal``, ``different``, ``error`` (llamact raised where
    upstream answered), ``crash`` (a non-LlamaException escaped) or ``deviation``; ``why`` says how
    it differs ("" when equal); ``got`` is llamact's answer (or what it raised, as data)."""

    outcome: str
    why: str
    got: Json


def judge(component: Component, case: Case) -> Verdict:
    """Run ``component``'s runner on ``case`` and judge the answer by the rules above."""
    assert component.runner is not None
    raised: BaseException | None = None
    try:
        got: Json = component.runner(case)
    except LlamaException as exc:
        raised, got = exc, {"raised": {"exception": type(exc).__name__, "message": error_text(exc)}}
    except Exception as exc:  # noqa: BLE001 - a bug in llamact is a result to report, not the end of the run
        raised, got = exc, {"crash": _crash_summary(exc)}
    if raised is None and component.is_deviation is not None and component.is_deviation(case, got):
        return Verdict("deviation", "", got)
    if component.judge is not None and (raised is None or isinstance(raised, LlamaException)):
        # a component with its own notion of equality (server_e2e) judges errors too
        judged = component.judge(case, got)
        outcome = judged if isinstance(judged, str) else judged.kind
        reason = "different (judged)" if isinstance(judged, str) else str(judged)
        return Verdict(outcome, "" if outcome in ("equal", "deviation") else reason, got)
    if raised is not None and not isinstance(raised, LlamaException):
        return Verdict("crash", "crash: " + str(got["crash"]["exception"]), got)
    if raised is not None:
        if not case.oracle_error:
            return Verdict("error", "llamact raised, upstream answered", got)
        why = match_error(component.name, case.expected["error"], raised)
        return Verdict("equal", "", got) if why is None else Verdict("different", why, got)
    why = first_difference(case.expected, got, component.ordered, component.unordered)
    return Verdict("equal", "", got) if why is None else Verdict("different", why, got)


def score_component(component: Component, cases: list[Case], max_differences: int | None = None) -> Row:
    row = Row(component.name, component.description, check=component.check, cases=len(cases))
    if component.runner is None:
        row.not_implemented = True
        return row
    if not cases:
        row.problem = "no cases: nothing was measured (the corpus for this component is empty)"
        return row
    started = time.perf_counter()
    for case in cases:
        verdict = judge(component, case)
        setattr(row, verdict.outcome, getattr(row, verdict.outcome) + 1)
        if verdict.outcome not in ("equal", "deviation"):
            _record(row, case, verdict.got, verdict.why, max_differences)
    row.seconds = time.perf_counter() - started
    return row


def _record(row: Row, case: Case, got: Json, why: str, limit: int | None) -> None:
    if limit is None or len(row.differences) < limit:
        row.differences.append({"id": case.id, "why": why, "input": case.input, "expected": case.expected,
                                "got": got})


def score(corpus: Corpus, components: list[Component], excluded: dict[str, str] | None = None) -> list[Row]:
    """Every component's row; ``excluded`` names components left out of this run on purpose
    (with why), which are listed but not measured."""
    rows = []
    for c in components:
        if excluded and c.name in excluded:
            rows.append(Row(c.name, c.description, check=c.check, excluded=excluded[c.name]))
        else:
            rows.append(score_component(c, corpus.cases.get(c.name, [])))
    return rows


_HEADER = f"{'component':<21}{'cases':>8}{'equal':>8}{'diff':>8}{'error':>8}{'crash':>8}{'deviation':>11}  status"


def _line(r: Row) -> str:
    if r.excluded:
        return f"{r.component:<21}{'-':>8}{'-':>8}{'-':>8}{'-':>8}{'-':>8}{'-':>11}  excluded ({r.excluded})"
    if r.not_implemented:
        return f"{r.component:<21}{r.cases:>8}{'-':>8}{'-':>8}{'-':>8}{'-':>8}{'-':>11}  not implemented"
    counts = f"{r.cases:>8}{r.equal:>8}{r.different:>8}{r.error:>8}{r.crash:>8}{r.deviation:>11}"
    if r.problem:
        return f"{r.component:<21}{counts}  ERROR: {r.problem}"
    measured = r.cases - r.deviation
    status = f"{100.0 * r.equal / measured:.1f}% equal" if measured else "all deviations"
    return f"{r.component:<21}{counts}  {status}"


def render_table(rows: list[Row]) -> str:
    lines = [_HEADER, "-" * len(_HEADER)] + [_line(r) for r in rows if r.check == "parity"]
    trips = [r for r in rows if r.check != "parity"]
    if trips:
        lines += ["", "round-trip checks (llamact reads upstream's output and writes it back; not parity):"]
        lines += [_line(r) for r in trips]
    return "\n".join(lines)


def summary_json(rows: list[Row]) -> dict[str, Json]:
    return {"components": {r.component: r.summary() for r in rows if r.check == "parity"},
            "round_trips": {r.component: r.summary() for r in rows if r.check != "parity"}}


def report_json(rows: list[Row], corpus: Corpus, extra: dict[str, Json]) -> str:
    return json.dumps({
        **summary_json(rows),
        **extra,
        "notes": corpus.notes,
        "differences": {r.component: r.differences for r in rows if r.differences},
    }, ensure_ascii=False, indent=1)
