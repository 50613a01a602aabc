"""engine.embed() equal to llama-server's /v1/embeddings (--embeddings --pooling ...).

Both pool the same float32 hidden states and L2-normalize in float64. llama-server decodes the texts
of one request one after the other; so does this comparison (one text per embed() call), and the
vectors agree to float32 rounding: the tolerance, 1e-4 absolute per component of a unit vector
(cosine > 0.9999), leaves room for that; a different pooling or a wrong mask differs by 1e-2 and
more. embed() given several texts decodes them in one batch (a sequence id each): the matrix
products then see another batch shape, and on some CPUs another kernel (measured on an AVX-512
machine: Gemma 3's two-token "hello" as the batch's first text moved by 1.4e-2 in one component,
cosine 0.99873 to itself alone, whatever followed it; as a later text, or any other text, it stayed
within 3e-8). That is the batch-shape caveat of docs/design.md ("Caveats"), checked here with a
cosine bound (a mask letting texts see each other gives far less), not parity.
"""

from __future__ import annotations

import numpy as np
import pytest

from llamact.engine import LlamaEngine
from llamact.parity.create_answer import engine_params_for
from llamact.parity.llama_server import LlamaServer, ServerConfig

pytestmark = [pytest.mark.model, pytest.mark.parity]

TOLERANCE = 1e-4
BATCHED_COSINE = 0.99   # several texts in one decode against each on its own (see above)
TEXTS = ["The cat sat on the mat.", "Embeddings map text to vectors.", "hello", "Paris is the capital of France."]


@pytest.mark.parametrize("pooling", ["mean"])
def test_embeddings_equal_llama_server(model_path, llama_server_bin, pooling):
    config = ServerConfig(model_path, extra_args=("--embeddings", "--pooling", pooling))
    with LlamaServer(config, llama_server_bin) as server:
        answer = server.post("/v1/embeddings", {"input": TEXTS, "encoding_format": "float"})
    theirs = np.array([item["embedding"] for item in sorted(answer["data"], key=lambda d: d["index"])])
    with LlamaEngine.load(model_path, engine_params_for(config)) as engine:
        ours = np.vstack([engine.embed([text], pooling=pooling) for text in TEXTS])
        batched = engine.embed(TEXTS, pooling=pooling)
        n_tokens = sum(len(engine.tokenize(t)) for t in TEXTS)
    assert answer["usage"]["prompt_tokens"] == n_tokens
    assert ours.shape == theirs.shape == batched.shape and ours.dtype == batched.dtype == np.float32
    worst = float(np.abs(ours - theirs).max())
    cosines = np.sum(batched.astype(np.float64) * ours, axis=1)
    print(f"{model_path.name} {pooling}: max |difference| = {worst:.2e}; batched cosines {cosines}")
    assert worst < TOLERANCE
    assert float(cosines.min()) > BATCHED_COSINE
