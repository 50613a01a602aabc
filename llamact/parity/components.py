"""The components the scoreboard measures, and llamact's implementation of each (where it exists).

A component pairs a corpus (corpus.py) with a runner: ``run(case) -> result`` in the oracle's
result shape. ``runner is None`` means llamact does not implement that component yet: its row
shows "not implemented" and its cases are still counted. A runner raising LlamaException counts
as an error result, compared with the oracle's error answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .corpus import Case

Json = Any
Runner = Callable[[Case], Json]


@dataclass(frozen=True)
class Component:
    name: str
    description: str
    runner: Runner | None = None
    # A deliberate deviation (DESIGN.md "Deviations") is counted apart, never as equal.
    is_deviation: Callable[[Case, Json], bool] | None = None

    @property
    def implemented(self) -> bool:
        return self.runner is not None


class ModelRunners:
    """llamact's runtime components: tokenization and greedy generation on the real models."""

    def __init__(self, models: dict[str, Path]) -> None:
        self._paths = models
        self._engines: dict[tuple[str, int, int, int], Any] = {}
        self._models: dict[str, Any] = {}

    def close(self) -> None:
        for engine in self._engines.values():
            engine.close()
        for model in self._models.values():
            model.close()
        self._engines.clear()
        self._models.clear()

    def _model(self, label: str) -> Any:
        from ..native.model import Model, ModelLoadOptions

        if label not in self._models:
            self._models[label] = Model(self._paths[label], ModelLoadOptions(vocab_only=True))
        return self._models[label]

    def tokenize(self, case: Case) -> Json:
        inp = case.input
        return self._model(inp["model"]).vocab.tokenize(
            inp["text"], add_special=inp["add_special"], parse_special=inp["parse_special"]
        )

    def generate_greedy(self, case: Case) -> Json:
        from ..engine import GenerationParams, LlamaEngine, ModelParams, StopReason

        inp = case.input
        key = (inp["model"], inp["n_ctx"], inp["n_batch"], inp["n_threads"])
        if key not in self._engines:
            self._engines[key] = LlamaEngine.load(
                self._paths[inp["model"]],
                ModelParams(n_ctx=inp["n_ctx"], n_batch=inp["n_batch"], n_threads=inp["n_threads"]),
            )
        engine = self._engines[key]
        prompt = engine.tokenize(inp["prompt"], add_special=True, parse_special=True)
        result = engine.complete(
            prompt, GenerationParams(greedy=True, max_tokens=inp["n_predict"], render_special=True)
        )
        stop = {StopReason.EOG: "eog", StopReason.MAX_TOKENS: "length", StopReason.CONTEXT_FULL: "context"}
        return {
            "prompt_tokens": result.prompt_tokens,
            "tokens": result.tokens,
            "text": result.text,
            "stop": stop.get(result.stop_reason, result.stop_reason.value),
        }


def _peg_grammar_runner(case: Case) -> Json:
    from ..peg import arena_to_gbnf, load_arena

    return arena_to_gbnf(load_arena(case.input["parser"]), lazy=case.input["lazy"])


def _json_schema_runner(case: Case) -> Json:
    from ..grammar import json_schema_to_grammar

    return json_schema_to_grammar(case.input["schema"], case.input.get("force_gbnf", False))


# The oracle's fixed clock (2026-01-15T12:00:00Z): strftime_now and date globals read it.
ORACLE_NOW = 1768478400


def _jinja_runner(case: Case) -> Json:
    from ..jinja import render

    return render(case.input["template"], case.input["context"], now=ORACLE_NOW, source_name=case.id)


def _caps_runner(case: Case) -> Json:
    from ..jinja.caps import template_caps

    return template_caps(case.input["template"]).to_map()


def components(model_runners: ModelRunners | None) -> list[Component]:
    """Every component in pipeline order. Later work plugs its runner in here."""
    return [
        Component("jinja", "upstream's test-jinja vectors: render output or error", _jinja_runner),
        Component("template_jinja", "direct renders of every template x scenario (no apply pipeline)",
                  _jinja_runner),
        Component("caps", "template capability maps, every vendored template", _caps_runner),
        Component("template_render", "prompts: every template x the scenario matrix"),
        Component("chat_apply", "full chat params (format, grammar, triggers, parser JSON, ...)"),
        Component("chat_parse", "parsed messages of synthesised outputs, whole and every UTF-8-safe prefix"),
        Component("msg_diffs", "streaming diffs between consecutive prefix parses"),
        Component("peg_grammar", "GBNF generated from the parser arenas, lazy and not", _peg_grammar_runner),
        Component("json_schema", "upstream's JSON-schema -> GBNF vectors", _json_schema_runner),
        Component("tokenize", "tokenization with the real models",
                  model_runners.tokenize if model_runners else None),
        Component("generate_greedy", "greedy generation with the real models, token for token",
                  model_runners.generate_greedy if model_runners else None),
    ]
