"""A SmolLM2 engine shared by the session tests of one module."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamact import LlamaEngine, ModelParams


@pytest.fixture(scope="module")
def engine(smollm2_path: Path):
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=1024, n_threads=1)) as eng:
        yield eng
