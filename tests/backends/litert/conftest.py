"""The LiteRT-LM backend's fixtures: the committed tiny bundle, the cached real one, an engine.

``data/smollm2-tiny-random.litertlm`` is made by ``scripts/litert/build_bundles.py --tiny`` (a
2-layer random-weight model with SmolLM2-135M-Instruct's tokenizer and template, 5.9 MB): its
answers are nonsense but seeded, so the conversation path and the rendered path can be compared
token for token. Tests that need the runtime skip where ``litert-lm-api`` (the ``llamact[litert]``
extra) is not installed -- the package and the rest of its tests do not need it; ``scripts/_env.sh``
installs it for the test suite. The real SmolLM2 bundle (146 MB) is built by the same script into
``LLAMACT_CACHE``/litert; its ``slow`` tests skip where it is not cached.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from litert_bundles import TINY

from llamact.backends.litert import runtime_version


@pytest.fixture(scope="session")
def tiny_bundle() -> Path:
    return TINY


@pytest.fixture(scope="module")
def tiny_engine() -> Iterator[object]:
    if runtime_version() is None:
        pytest.skip("litert-lm-api (llamact[litert]) is not installed")
    from llamact import LlamaEngine

    with LlamaEngine.load(TINY, n_ctx=512, n_threads=1) as engine:
        yield engine
