"""A caller's bad argument to the engine is a request error (``ErrorKind.REQUEST``, a
``LlamaRequestException``) where it is raised, not an inference failure: one case per raise site
that was a ``LlamaInferenceException`` (or a ``LlamaStateException``) before errors had a kind. Those
that were inference errors still are (``LlamaArgumentException`` derives from both), so code that
caught them keeps working. The sites that need no model are tests/test_errors.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from llamact import ChatSession, GenerationParams, LlamaEngine, ModelParams
from llamact.engine.batched import BatchScheduler
from llamact.engine.chat_sampling import chat_sampler_config
from llamact.errors import ErrorKind, LlamaException, LlamaInferenceException, LlamaRequestException
from llamact.native import sampler as s

pytestmark = [pytest.mark.model]

MESSAGES = [{"role": "user", "content": "Say yes."}]


@pytest.fixture(scope="module")
def engine(smollm2_path: Path) -> Iterator[LlamaEngine]:
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=512, n_threads=1, n_threads_batch=1)) as eng:
        yield eng


def _run(stream: Any) -> None:
    with stream:
        for _ in stream:
            pass


def _generate(engine: LlamaEngine, prompt: Any, **params: Any) -> None:
    _run(engine.generate(prompt, GenerationParams(greedy=True, max_tokens=2, **params)))


def _session_message(engine: LlamaEngine) -> None:
    ChatSession(engine).add_message("hello")  # type: ignore[arg-type]


def _session_continue_with_content(engine: LlamaEngine) -> None:
    session = ChatSession(engine)
    session.add_message({"role": "assistant", "content": "Yes"})
    session.send("more", continue_previous_turn=True)


def _scheduler(engine: LlamaEngine, use: Callable[[BatchScheduler], Any]) -> None:
    scheduler = BatchScheduler(engine)
    try:
        use(scheduler)
    finally:
        scheduler.close()


def _grammar_llama_cpp_rejects(engine: LlamaEngine) -> None:
    # past our front end on purpose: what llama.cpp itself says of a left-recursive grammar
    s.SamplerChain(engine.model, [s.Grammar('root ::= root "a"', front_end_check=False), s.Greedy()])


# (raise site, the call, what the message says, whether it was an inference error before)
CASES: list[tuple[str, Callable[[LlamaEngine], Any], str, bool]] = [
    ("engine.py remove_lora", lambda e: e.remove_lora("/nonexistent/adapter.gguf"), "no LoRA adapter", True),
    ("engine.py embed item", lambda e: e.embed(["a", 3.5]), "texts are strings or lists", True),
    ("engine.py top_logprobs", lambda e: _generate(e, "Hi", top_logprobs=3), "requires logprobs", True),
    ("generator.py empty prompt", lambda e: _generate(e, []), "the prompt is empty", True),
    ("generator.py max_tokens", lambda e: _run(e.generate("Hi", GenerationParams(max_tokens=-2))), "max_tokens", True),
    ("batched.py empty prompt", lambda e: _scheduler(e, lambda b: b.generate([])), "the prompt is empty", True),
    ("batched.py slot", lambda e: _scheduler(e, lambda b: b.erase_slot(99)), "no slot 99", True),
    ("embeddings.py pooling", lambda e: e.embed("a", pooling="bogus"), "pooling must be one of", True),
    ("embeddings.py empty text", lambda e: e.embed([[]]), "no tokens to embed", True),
    ("model.py token id range", lambda e: e.detokenize([10**9]), "outside this vocabulary", True),
    ("model.py token id type", lambda e: e.detokenize(["a"]), "token ids are integers", True),  # type: ignore[list-item]
    ("model.py tokenize surrogate", lambda e: e.tokenize("a\ud800"), "lone surrogate", True),
    ("chat_sampling.py two grammars",
     lambda e: chat_sampler_config(e, e.chat_template(MESSAGES, response_format={"type": "json_object"}),
                                   GenerationParams(grammar='root ::= "yes"')),
     "cannot be combined", True),
    ("sampler.py Grammar rejected", _grammar_llama_cpp_rejects, "llama.cpp rejected the Grammar sampler", True),
    ("session.py message", _session_message, "a message must be a dict", False),
    ("session.py continue with content", _session_continue_with_content, "pass no content", False),
]


@pytest.mark.parametrize(("site", "call", "words", "was_inference"), CASES, ids=[c[0] for c in CASES])
def test_a_callers_bad_argument_is_a_request_error(engine: LlamaEngine, site: str, call: Callable[[LlamaEngine], Any],
                                                   words: str, was_inference: bool) -> None:
    with pytest.raises(LlamaException) as info:
        call(engine)
    assert words in info.value.message, info.value.message
    assert info.value.kind is ErrorKind.REQUEST and isinstance(info.value, LlamaRequestException), site
    assert isinstance(info.value, LlamaInferenceException) is was_inference, site
    # the engine is still usable after refusing
    assert engine.tokenize("Hi", add_special=False)
