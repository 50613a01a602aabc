"""llamact's side of the server_e2e row: ``engine.create()`` answering a case as llama-server was asked.

    CreateRunner(models, llama_cpp)        one engine per model, configured as the server was
    runner.answer(case, template_now)      -> ChatAnswer      (raises LlamaException as create() does)
    runner.run(case)                       the scoreboard's runner: a ChatAnswer's JSON, or {"error": ...}

The answer has the two forms server_e2e.ask_server reads from the server, streamed
(``ChatChunk.to_openai`` with the usage chunk, as ``stream_options.include_usage`` asks the server) and
collected (``ChatCompletion.to_openai``), both read by ``answer_from_openai``. The server is asked
twice; one create() gives both (its stream's chunks, then its ``completion()``), so the engine
generates once per case. The prompt is the one create() rendered, its tokens the engine's
tokenization of it (add_special, parse_special: what create() evaluates); the generated token ids
and raw text are the run's, as the server's come from its non-streamed ``__verbose``.

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
from ..json_types import Json
from .chat_answer import ChatAnswer, answer_from_openai
from .corpus import Case
from .llama_server import ServerConfig
from .server_cases import E2ECase


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
        self.upstream_compat = upstream_compat  # create()'s flag: docs/design.md's output deviations off
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
        return self.answers(case, template_now, (self.upstream_compat,))[self.upstream_compat]

    def answers(self, case: E2ECase, template_now: float | None, modes: tuple[bool, ...]) -> dict[bool, ChatAnswer]:
        """The case answered with ``upstream_compat`` set to each of ``modes``. The flag changes how
        the reply is parsed (deviations 2-5 and 17 are output-side: the prompt, grammar and sampler
        are the same), so modes that generate alike share one generation, through ``engine.create()``
        in the first of them, its pieces also parsed in the others. A ``"required"`` tool choice is
        generated once per mode: by default its grammar is deviation 19's, under upstream_compat
        upstream's."""
        from ..chat.request import ChatRequest

        kwargs = case.create_kwargs(self._llama_cpp)
        messages = kwargs.pop("messages")
        kwargs.pop("params")
        alike: dict[bool, list[bool]] = {}
        for mode in modes:
            grammar = ChatRequest(messages, **kwargs, upstream_compat=mode).inputs.required_calls_only
            alike.setdefault(grammar, []).append(mode)
        out: dict[bool, ChatAnswer] = {}
        for group in alike.values():
            out.update(self._generated_once(case, template_now, tuple(group)))
        return {mode: out[mode] for mode in modes}

    def _generated_once(self, case: E2ECase, template_now: float | None,
                        modes: tuple[bool, ...]) -> dict[bool, ChatAnswer]:
        """``answers`` for modes that generate alike: one generation, parsed in each mode."""
        from ..chat.request import ChatRequest
        from ..chat.streaming import ChatStreamParser
        from ..engine import GenerationParams
        from ..engine.chat_completion import ChatStream

        engine = self.engine(case.model)
        kwargs = case.create_kwargs(self._llama_cpp)
        params = GenerationParams(**kwargs.pop("params"))
        request = ChatRequest(kwargs.pop("messages"), **kwargs, template_now=template_now, upstream_compat=modes[0])

        def run() -> dict[bool, ChatStream]:
            """One create() of the request, read as its own iteration reads it (each piece pushed until
            the final one), its pieces also pushed to a stream of each other mode."""
            stream = engine.create(request, params=params)
            n_prompt = len(engine.tokenize(stream.result.prompt, add_special=True, parse_special=True))
            streams = {modes[0]: stream}
            for mode in modes[1:]:
                parser = ChatStreamParser(stream.result, tools=request.inputs.tools, upstream_compat=mode,
                                          is_continuation=request.is_continuation,
                                          tool_choice=request.inputs.tool_choice, named_tool=request.named_tool)
                streams[mode] = ChatStream(stream.generation, stream.result, parser, n_prompt,
                                           stream.generation.n_cached, model=stream.model)
            with stream:
                for piece in stream.generation:
                    for s in streams.values():
                        chunks.setdefault(s, []).extend(s.push(piece))
                    if piece.stop_reason is not None:
                        break
            return streams

        # One generation gives both forms: a second run only asked whether the engine repeats itself,
        # which tests/engine checks (test_prompt_cache, test_real_models) at a fraction of the cost.
        chunks: dict[ChatStream, list[Any]] = {}
        streams = run()
        out: dict[bool, ChatAnswer] = {}
        for mode in modes:
            stream = streams[mode]
            events = [e for c in chunks.get(stream, []) for e in
                      c.to_openai(stream.id, stream.model, stream.created, include_usage=True)]
            completion = stream.completion()
            final = completion.to_openai(stream.id, stream.model, stream.created)
            prompt_tokens = engine.tokenize(completion.prompt, add_special=True, parse_special=True)
            out[mode] = answer_from_openai(events, final, prompt=completion.prompt, prompt_tokens=prompt_tokens,
                                           tokens=list(stream.tokens), text=stream.text)
        return out

    def run_modes(self, case: Case, modes: tuple[bool, ...]) -> dict[bool, Json]:
        """``run`` in each ``upstream_compat`` mode, from the same generations (see ``answers``)."""
        from .server_e2e import case_from_input

        expected = case.expected or {}
        try:
            answers = self.answers(case_from_input(case.input), expected.get("template_now"), modes)
        except LlamaException as exc:
            details = json.loads(json.dumps(exc.details, default=str))
            error = {"error": {"exception": type(exc).__name__, "message": str(exc), "details": details}}
            return {mode: error for mode in modes}
        return {mode: answer.to_json() for mode, answer in answers.items()}

    def run(self, case: Case) -> Json:
        """The scoreboard's runner: the answer's JSON, or what create() raised as ``{"error": ...}``
        (``server_e2e.judge`` compares it with the server's error)."""
        return self.run_modes(case, (self.upstream_compat,))[self.upstream_compat]
