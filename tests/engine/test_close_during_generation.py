"""Closing an engine (or its context) while another thread generates: the generation ends
(cancelled, or LlamaStateException), and no native call ever touches freed memory.

A use-after-free is a crash or garbage, so each scenario runs in a child process. Timing is by
events only: the closing thread waits until the generating thread has started the phase under
test (the prompt decode, or the token loop), then closes at once; wherever the close lands, the
outcome must be one of the two allowed ones.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from child_process import lines_of, run_child

pytestmark = pytest.mark.model

CLOSE_WHILE_GENERATING = r"""
import sys, threading
from llamact import GenerationParams, LlamaEngine, LlamaStateException, ModelParams
phase, rounds = sys.argv[2], int(sys.argv[3])
prompt_text = "The quick brown fox jumps over the lazy dog. " * (150 if phase == "prompt" else 1)
for _ in range(rounds):
    engine = LlamaEngine.load(sys.argv[1], ModelParams(n_ctx=2048, n_threads=2))
    prompt = engine.tokenize(prompt_text)
    reached = threading.Event()
    outcome = []

    def consume():
        try:
            stream = engine.generate(prompt, GenerationParams(greedy=True, max_tokens=200))
            if phase == "prompt":
                reached.set()  # the stream's first next() decodes the prompt
            last = None
            for chunk in stream:
                last = chunk
                reached.set()  # in the token loop
            outcome.append(f"END {last.stop_reason.value}")
        except LlamaStateException as exc:
            outcome.append(f"STATE {exc}")
        except BaseException as exc:
            outcome.append(f"OTHER {type(exc).__name__}: {exc}")
        finally:
            reached.set()

    worker = threading.Thread(target=consume)
    worker.start()
    reached.wait()
    engine.close()
    worker.join()
    print("OUTCOME", outcome[0].replace("\n", " "), flush=True)
print("DONE all rounds", flush=True)
"""


@pytest.mark.parametrize("phase", ["prompt", "tokens"])
def test_close_from_another_thread_while_generating(tmp_path: Path, smollm2_path: Path, phase: str) -> None:
    proc = run_child(CLOSE_WHILE_GENERATING, str(smollm2_path), phase, "4", cwd=tmp_path)
    outcomes = lines_of(proc, "OUTCOME")
    assert len(outcomes) == 4 and lines_of(proc, "DONE") == ["all rounds"], proc.stdout
    for outcome in outcomes:
        kind, _, rest = outcome.partition(" ")
        assert kind in ("END", "STATE"), outcome
        if kind == "END":
            assert rest == "cancelled", outcome  # the close stopped it, before its 200 tokens
        else:
            assert "closed" in rest, outcome


CLOSE_CONTEXT_WHILE_DECODING = r"""
import sys, threading
from llamact import LlamaInferenceException, LlamaStateException
from llamact.native.context import Batch, Context, ContextOptions
from llamact.native.model import Model
model = Model(sys.argv[1])
tokens = model.vocab.tokenize("The quick brown fox jumps over the lazy dog. " * 150)
for closing in ("context", "model"):
    if model.closed:
        model = Model(sys.argv[1])
    ctx = Context(model, ContextOptions(n_ctx=2048, n_threads=2))
    batch = Batch(ctx, len(tokens))
    batch.set_sequence(tokens, 0)
    started, outcome = threading.Event(), []

    def decode():
        started.set()
        try:
            ctx.decode(batch)
            outcome.append("DECODED")
        except (LlamaInferenceException, LlamaStateException) as exc:
            outcome.append(f"{type(exc).__name__} {exc}")

    worker = threading.Thread(target=decode)
    worker.start()
    started.wait()
    (ctx if closing == "context" else model).close()
    worker.join()
    print("OUTCOME", closing, outcome[0], flush=True)
    batch.close()
"""


def test_closing_a_context_or_model_during_its_decode(tmp_path: Path, smollm2_path: Path) -> None:
    outcomes = lines_of(run_child(CLOSE_CONTEXT_WHILE_DECODING, str(smollm2_path), cwd=tmp_path), "OUTCOME")
    assert [o.split(" ")[0] for o in outcomes] == ["context", "model"]
    for outcome in outcomes:
        _, kind, *rest = outcome.split(" ", 2)
        # aborted mid-way, refused because the close came first, or (rarely) done before it
        assert kind in ("LlamaInferenceException", "LlamaStateException", "DECODED"), outcome
        if kind == "LlamaInferenceException":
            assert "aborted" in rest[0], outcome
        if kind == "LlamaStateException":
            assert "closed" in rest[0], outcome


def test_logits_are_a_copy_that_outlives_the_next_decode_and_the_context(smollm2_path: Path) -> None:
    from llamact.native.context import Batch, Context, ContextOptions
    from llamact.native.model import Model

    with Model(smollm2_path) as model:
        ctx = Context(model, ContextOptions(n_ctx=64, n_threads=2))
        batch = Batch(ctx, 4)
        batch.set_sequence([1, 2, 3], 0)
        ctx.decode(batch)
        row = ctx.logits()
        seen = list(row)
        assert len(seen) == model.vocab.n_tokens
        batch.set_sequence([4], 3)
        ctx.decode(batch)
        assert list(ctx.logits()) != seen  # the native row changed...
        assert list(row) == seen  # ...the row we were given did not
        ctx.close()
        assert list(row) == seen  # and it is still readable: it is ours, not the context's
        batch.close()
