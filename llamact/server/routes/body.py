"""A request's JSON body, or the request error llama-server answers for one that is not JSON."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from ..protocol import RequestError

__all__ = ["json_body"]


async def json_body(request: Request) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise RequestError(f"the request body is not valid JSON: {exc}") from None
