"""llamact's side of the server_e2e row: ``engine.create()`` answering a case as llama-server was asked.

    CreateRunner(models, llama_cpp)        one engine per model, configured as the server was
    runner.answer(case, template_now)      -> ChatAnswer      (raises LlamaException as create() does)
    runner.run(case)                       the scoreboard's runner: a ChatAnswer's JSON, or {"error": ...}

The answer is made as server_e2e.ask_server makes the server's: the same request run twice, streamed
(``ChatChunk.to_openai`` with the usage chunk, as ``stream_options.include_usage`` asks the server) and
collected (``ChatCompletion.to_openai``), both read by ``answer_from_openai``. The prompt is the one
create() rendered, its tokens the engine's tokenization of it (add_special, parse_special: what
create() evaluates); the generated token ids and raw text are the collected run's, as the server's
come from its non-streamed ``__verbose``.

The engine matches the server's context (``ServerConfig``: n_ctx, n_batch, n_ubatch, threads): the CPU
backend's numbers depend on how a prompt is batched and, through the thread count, on how each
matrix product is split, so a greedy answer is only comparable under the same configuration.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import LlamaException
from .chat_answer import ChatAnswer, answer_from_openai
from .corpus import Case
from .llama_server import ServerConfig
from .server_cases import E2ECase

Json = Any


def engine_params_for(config: ServerConfig) -> Any:
    """The ModelParams that load a model as llama-server loads it with ``config``."""
    from ..engine import ModelParams

    return ModelParams(n_ctx=config.n_ctx, n_batch=config.n_batch, n_ubatch=config.n_ubatch,
                       n_threads=config.n_threads, n_threads_batch=config.n_threads)


class CreateRunner:
    """engine.create() on the server_e2e cases, one engine per model (loaded on first use)."""

    def __init__(self, models: dict[str, Path], llama_cpp: Path, n_threads: int | None = None, *,
                 upstream_compat: bool = False) -> None:
        self._paths = models
        self.upstream_compat = upstream_compat  # create()'s flag: docs/design.md's output deviations 2-5 off
        self._llama_cpp = llama_cpp
        self._n_threads = n_threads
        self._engines: dict[str, Any] = {}

    def close(self) -> None:
        for engine in self._engines.values():
            engine.close()
        self._engines.clear()

    def __enter__(self) -> CreateRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def engine(self, model: str) -> Any:
        from ..engine import LlamaEngine

        if model not in self._engines:
            # the server's configuration, as run_server_cases makes it
            config = ServerConfig(self._paths[model])
            if self._n_threads:
                config = replace(config, n_threads=self._n_threads)
            self._engines[model] = LlamaEngine.load(self._paths[model], engine_params_for(config))
        return self._engines[model]

    def answer(self, case: E2ECase, template_now: float | None) -> ChatAnswer:
        from ..engine import GenerationParams

        engine = self.engine(case.model)
        kwargs = case.create_kwargs(self._llama_cpp)
        params = GenerationParams(**kwargs.pop("params"))
        kwargs.update(params=params, template_now=template_now, upstream_compat=self.upstream_compat)

        chunks: list[Json] = []
        with engine.create(**kwargs) as stream:
            for chunk in stream:
                chunks += chunk.to_openai(stream.id, stream.model, stream.created, include_usage=True)
            streamed_tokens = list(stream.tokens)
        with engine.create(**kwargs) as collected:
            completion = collected.completion()
            tokens, text = list(collected.tokens), collected.text
            final = completion.to_openai(collected.id, collected.model, collected.created)
        prompt_tokens = engine.tokenize(completion.prompt, add_special=True, parse_special=True)
        answer = answer_from_openai(chunks, final, prompt=completion.prompt, prompt_tokens=prompt_tokens,
                                    tokens=tokens, text=text)
        # the two runs of one request must agree (as the server's, checked by its determinism test)
        if streamed_tokens != tokens:
            answer.problems.append(f"the streamed run generated {streamed_tokens}, the collected run {tokens}")
        return answer

    def run(self, case: Case) -> Json:
        """The scoreboard's runner: the answer's JSON, or what create() raised as ``{"error": ...}``
        (``server_e2e.judge`` compares it with the server's error)."""
        from .server_e2e import case_from_input

        expected = case.expected or {}
        try:
            return self.answer(case_from_input(case.input), expected.get("template_now")).to_json()
        except LlamaException as exc:
            details = json.loads(json.dumps(exc.details, default=str))
            return {"error": {"exception": type(exc).__name__, "message": str(exc), "details": details}}
