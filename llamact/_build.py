"""What was compiled: the llama.cpp pin and the ggml backends (from the build's _build_info.json)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from .errors import LlamaUnsupportedException

_INFO = Path(__file__).resolve().parent / "_build_info.json"


@lru_cache(maxsize=1)
def build_info() -> dict[str, Any]:
    """``{"llama_cpp": {"tag", "commit", "build"}, "backends": [...], "build_type", "compiler", ...}``."""
    try:
        info = json.loads(_INFO.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise LlamaUnsupportedException(
            "llamact was not built (no _build_info.json): install it with pip so CMake builds llama.cpp"
        ) from exc
    except (OSError, ValueError) as exc:  # unreadable, not UTF-8, not JSON
        raise _broken(f"cannot read it ({exc})") from exc
    pin = info.get("llama_cpp") if isinstance(info, dict) else None
    if not (
        isinstance(pin, dict)
        and all(isinstance(pin.get(key), str) for key in ("tag", "commit"))
        and isinstance(info.get("backends"), list)
    ):
        raise _broken("it lacks the llama.cpp pin (llama_cpp.tag, llama_cpp.commit) or the backends list")
    return info


def _broken(why: str) -> LlamaUnsupportedException:
    return LlamaUnsupportedException(
        f"llamact's build record {_INFO} is damaged: {why}; reinstall llamact (pip install --force-reinstall)",
        {"path": str(_INFO)},
    )
