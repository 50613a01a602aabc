"""Where the LiteRT-LM test bundles are, and the marks for tests that need the runtime or the real bundle
(see conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llamact.backends.litert import runtime_version

DATA = Path(__file__).parent / "data"
TINY = DATA / "smollm2-tiny-random.litertlm"
REAL = Path(os.environ.get("LLAMACT_CACHE", Path.home() / ".cache" / "llamact")) / "litert" / "smollm2-135m.litertlm"

needs_runtime = pytest.mark.skipif(runtime_version() is None,
                                   reason="litert-lm-api (llamact[litert]) is not installed")
needs_real_bundle = pytest.mark.skipif(not REAL.is_file(), reason=f"{REAL} is not built: run "
                                       "python scripts/litert/build_bundles.py --real")
