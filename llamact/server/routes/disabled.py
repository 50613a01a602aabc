"""Routes llama-server has for features this server does not offer, answered as llama-server answers
them when the feature is off (so a client learns what is missing, not that the path is unknown):

* ``/tools``, ``/cors-proxy`` -- the web UI's server-side tools and MCP proxy (``--tools``,
  ``--ui-mcp-proxy`` upstream): 403 ``feature_disabled``, as llama-server without those flags;
* ``/v1/audio/transcriptions`` -- speech to text needs an audio projector (``--mmproj``): 501
  ``not_supported_error``, as llama-server on a model without one. It answers before reading the
  body (a multipart form upstream), so the JSON body rules do not apply.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from ..protocol import error_response

__all__ = ["router"]

router = APIRouter()


@router.get("/tools")
@router.post("/tools")
@router.get("/cors-proxy")
@router.post("/cors-proxy")
async def feature_disabled() -> Response:
    # llama-server's res_403: an error object without a code
    return JSONResponse({"error": {"message": "this feature is disabled", "type": "feature_disabled"}},
                        status_code=403)


@router.post("/v1/audio/transcriptions")
@router.post("/audio/transcriptions")
async def transcriptions() -> Response:
    return error_response("The current model does not support audio input.", "not_supported_error", 501)
