"""create()'s token accounting is llama-server's: the generated token ids (``ChatStream.tokens``, the
server's ``return_tokens``) end with the end-of-generation token when the model ended the reply, and
``usage.completion_tokens`` and ``timings.predicted_n`` count it (the server's ``n_decoded``: every
sampled token). The comparison with llama-server itself is tests/parity/test_server_e2e.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from llamact import GenerationParams, LlamaEngine, ModelParams

pytestmark = [pytest.mark.model]

MESSAGES = [{"role": "user", "content": "Name three colors."}]


@pytest.fixture(scope="module")
def engine(smollm2_path: Path) -> Iterator[LlamaEngine]:
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=1024, n_threads=1, n_threads_batch=1)) as eng:
        yield eng


def test_an_ended_reply_counts_its_end_token(engine: LlamaEngine) -> None:
    with engine.create(MESSAGES, params=GenerationParams(greedy=True, max_tokens=64)) as stream:
        completion = stream.completion()
        tokens = list(stream.tokens)
    assert completion.finish_reason == "stop"
    assert tokens and engine.model.vocab.is_eog(tokens[-1])
    assert not any(engine.model.vocab.is_eog(t) for t in tokens[:-1])
    assert completion.usage.completion_tokens == len(tokens)
    assert completion.timings.predicted_n == len(tokens)
    # the end token's text is not in the reply (it is not rendered as text)
    assert completion.text == engine.detokenize(tokens[:-1], render_special=False)


def test_a_cut_reply_has_no_end_token(engine: LlamaEngine) -> None:
    with engine.create(MESSAGES, params=GenerationParams(greedy=True, max_tokens=3)) as stream:
        completion = stream.completion()
        tokens = list(stream.tokens)
    assert completion.finish_reason == "length"
    assert len(tokens) == 3 and not any(engine.model.vocab.is_eog(t) for t in tokens)
    assert completion.usage.completion_tokens == completion.timings.predicted_n == 3
