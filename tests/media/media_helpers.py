"""Small helpers of the media tests (importable: the fixtures are in conftest.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from llamact import ModelParams
from llamact.chat.media import image_part


def noise_image(seed: int, height: int = 40, width: int = 48) -> dict[str, object]:
    """An image_url content part: a PNG of random pixels."""
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    return image_part(pixels)


def engine_params(mmproj: Path, **fields: object) -> ModelParams:
    base: dict[str, object] = {"n_ctx": 4096, "n_threads": 1, "adaptive_threads": False, "mmproj": mmproj}
    return ModelParams(**{**base, **fields})   # type: ignore[arg-type]
