"""Fuzz targets: what one target generates, how it asks upstream and llamact, and the registry.

A :class:`Target` turns a random generator into JSON inputs, an input into one oracle request and
an input into llamact's answer (in the oracle's shape, raising as llamact raises). The runner does
the rest: batching the requests, judging with the scoreboard's rules (``component`` names the
scoreboard component whose error table and key order apply), shrinking and saving findings.

The built-in targets (``targets_*.py``) are listed by name in ``registry.py``; a new target is one
more class there.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...json_types import Json
from ..oracle import OracleClient, OracleError

__all__ = ["FuzzContext", "Target", "Unsent"]


@dataclass
class FuzzContext:
    """What targets share: the oracle (cached requests for set-up answers that repeat, batches for
    the cases themselves), the pinned tree, and an optional model for vocabulary-based inputs."""

    oracle: OracleClient
    llama_cpp: Path
    vocab_model: Path | None = None
    _templates: dict[str, str] = field(default_factory=dict)

    def template_names(self) -> list[str]:
        return sorted(p.stem for p in (self.llama_cpp / "models" / "templates").glob("*.jinja"))

    def template(self, name: str) -> str:
        if name not in self._templates:
            path = self.llama_cpp / "models" / "templates" / f"{name}.jinja"
            self._templates[name] = path.read_text(encoding="utf-8")
        return self._templates[name]


class Unsent(Exception):
    """Raised by :meth:`Target.request` for an input that must not reach the oracle (e.g. one that
    makes upstream loop for ever); the case is counted as unsent, with this reason."""


class Target:
    """One fuzz target. Subclasses set the class attributes and implement the three methods."""

    name: str = ""
    component: str = ""       # the scoreboard component whose rules judge this target
    unit: str = "case"        # what one case counts as ("render", "parse", "schema", "grammar")
    #: input keys the shrinker must keep (they name things, e.g. a template)
    fixed_keys: frozenset[str] = frozenset()
    ordered: bool = False     # object key order is upstream's in this target's answers

    def __init__(self, ctx: FuzzContext) -> None:
        self.ctx = ctx

    def generate(self, rng: random.Random) -> Json:
        """One random input (JSON)."""
        raise NotImplementedError

    def generate_batch(self, rngs: list[random.Random]) -> list[Json]:
        """Inputs for several cases at once (a target that needs the oracle to build its inputs
        overrides this to batch those requests too)."""
        return [self.generate(rng) for rng in rngs]

    def request(self, inp: Json) -> dict[str, Any]:
        """The oracle request (``{"op": ..., **fields}``) for ``inp``; raises :class:`Unsent`."""
        raise NotImplementedError

    def expected(self, inp: Json, answer: Any) -> Json:
        """Upstream's answer in the scoreboard's case shape: the result, or ``{"error": {...}}``."""
        if isinstance(answer, OracleError):
            return {"error": {"kind": answer.kind, "message": answer.message}}
        return answer

    def run(self, inp: Json) -> Json:
        """llamact's answer for ``inp`` in the oracle's result shape (raising as llamact raises)."""
        raise NotImplementedError

    def is_deviation(self, inp: Json, expected: Json, got: Json) -> bool:
        """Whether ``got`` differs from ``expected`` by a deliberate, documented deviation."""
        return False

    def units(self, inp: Json, expected: Json) -> int:
        """How many units (renders, parses, ...) the case holds."""
        return 1

