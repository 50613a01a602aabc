"""engine.embed() equal to llama-server's /v1/embeddings (--embeddings --pooling ...).

Both pool the same float32 hidden states and L2-normalize in float64. llamact decodes all texts
in one batch (a sequence id each), llama-server one request after the other, so the matrix
products see different batch shapes: the vectors agree to float32 rounding of those sums. The
tolerance, 1e-4 absolute per component of a unit vector (cosine > 0.9999), leaves room for that;
a different pooling or a wrong mask differs by 1e-2 and more.
"""

from __future__ import annotations

import numpy as np
import pytest

from llamact.engine import LlamaEngine
from llamact.parity.create_answer import engine_params_for
from llamact.parity.llama_server import LlamaServer, ServerConfig

pytestmark = [pytest.mark.model, pytest.mark.parity]

TOLERANCE = 1e-4
TEXTS = ["The cat sat on the mat.", "Embeddings map text to vectors.", "hello", "Paris is the capital of France."]


@pytest.mark.parametrize("pooling", ["mean"])
def test_embeddings_equal_llama_server(model_path, llama_server_bin, pooling):
    config = ServerConfig(model_path, extra_args=("--embeddings", "--pooling", pooling))
    with LlamaServer(config, llama_server_bin) as server:
        answer = server.post("/v1/embeddings", {"input": TEXTS, "encoding_format": "float"})
    theirs = np.array([item["embedding"] for item in sorted(answer["data"], key=lambda d: d["index"])])
    with LlamaEngine.load(model_path, engine_params_for(config)) as engine:
        ours = engine.embed(TEXTS, pooling=pooling)
        n_tokens = sum(len(engine.tokenize(t)) for t in TEXTS)
    assert answer["usage"]["prompt_tokens"] == n_tokens
    assert ours.shape == theirs.shape and ours.dtype == np.float32
    worst = float(np.abs(ours - theirs).max())
    print(f"{model_path.name} {pooling}: max |difference| = {worst:.2e}")
    assert worst < TOLERANCE
