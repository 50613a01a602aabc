"""The one name for a JSON value, shared by every module that passes JSON through.

``Json`` is what ``json.loads`` returns or ``json.dumps`` takes: a request body, a tool's
arguments, an oracle's answer. Its shape is checked where it is read (at run time, with typed
errors), not by the type checker, so the alias is ``Any``. ``JsonObject`` is a decoded JSON object.
"""

from __future__ import annotations

from typing import Any, TypeAlias

__all__ = ["Json", "JsonObject"]

Json: TypeAlias = Any
JsonObject: TypeAlias = dict[str, Any]
