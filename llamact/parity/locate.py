"""Where parity finds what it measures with: the pinned llama.cpp tree (its templates and test
vectors) and the two test models. The oracle and llama-server are found by ``oracle.py`` and
``llama_server.py``.

``find_llama_cpp`` ends the command (``SystemExit`` naming what it tried) when no tree is found;
``available_models`` leaves out, with a line on stderr, a model that cannot be had.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["available_models", "find_llama_cpp"]


def find_llama_cpp(explicit: str | None) -> Path:
    candidates: list[Path] = []
    if explicit:
        candidates.append(Path(explicit))
    package = Path(__file__).resolve().parent.parent
    candidates.append(package.parent / "vendor" / "llama.cpp")
    try:
        from .._build import build_info

        commit = build_info()["llama_cpp"]["commit"]
        cache = Path(os.environ.get("LLAMACT_CACHE", Path.home() / ".cache" / "llamact"))
        candidates.append(cache / "src" / f"llama.cpp-{commit[:12]}")
    except Exception:  # noqa: BLE001 - an uninstalled tree has no build info; other candidates remain
        pass
    for path in candidates:
        if (path / "models" / "templates").is_dir():
            return path
    tried = ", ".join(str(p) for p in candidates)
    raise SystemExit(f"llamact.parity: the pinned llama.cpp tree was not found (tried {tried}); "
                     "pass --llama-cpp DIR or run scripts/vendor_llama_cpp.py")


def available_models(wanted: bool) -> dict[str, Path]:
    if not wanted:
        return {}
    from ..errors import LlamaException
    from ..models import gemma3_path, smollm2_path

    models: dict[str, Path] = {}
    for label, locate in (("smollm2", smollm2_path), ("gemma3", gemma3_path)):
        try:
            models[label] = locate()
        except LlamaException as exc:
            print(f"llamact.parity: {label} unavailable ({exc}); its runtime cases are left out", file=sys.stderr)
    return models
