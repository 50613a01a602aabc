"""The admin family's wire format. ``GET /props`` as llama-server writes it (``get_res_props``): the
same fields, and the values a request gets when it leaves a field out (the server's sampling defaults:
``--temp``, ``--top-k``, ...: ``wire.task_params``).
llamact adds ``chat_template_family`` (the detected family) and ``llamact``: what the engine was loaded
with (its ``ModelParams``, as the engine holds them, and the context llama.cpp made), the thread
count, whether the template carries tools -- how an operator reads back that a flag reached the engine.
A router without a model named answers ``router_props``, llama-server's router shape."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ...chat.media import MEDIA_MARKER
from ...engine import GenerationParams, LitertEngine, LlamaEngine
from ...engine.chat_types import system_fingerprint
from ..wire.task_params import task_params_json

__all__ = ["props_body", "router_props"]


def _loaded_with(engine: LlamaEngine | LitertEngine, tools_supported: bool) -> dict[str, Any]:
    """llamact's own /props block: the engine's ModelParams (the template's text left out: /props has it)
    and the context llama.cpp made from them."""
    params = {f.name: getattr(engine.params, f.name) for f in dataclasses.fields(engine.params)
              if f.name != "chat_template"}
    params["chat_template"] = "custom" if engine.params.chat_template is not None else "model"
    params["loras"] = [[str(path), scale] for path, scale in engine.params.loras]
    return {"model_params": _jsonable(params), "n_ctx": engine.n_ctx, "n_batch": engine.n_batch,
            "n_seq_max": engine.n_seq_max, "tools_supported": tools_supported}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def router_props(models_max: int, autoload: bool) -> dict[str, Any]:
    """``GET /props`` of a router asked about no model (llama-server's ``get_router_props``)."""
    return {"role": "router", "max_instances": models_max, "models_autoload": autoload,
            "model_alias": "llama-server", "model_path": "none",
            "default_generation_settings": {"params": None, "n_ctx": 0}, "ui_settings": {},
            "build_info": system_fingerprint(), "cors_proxy_enabled": False}


def props_body(engine: LlamaEngine | LitertEngine, *, model_alias: str, model_path: str, n_slots: int,
               n_predict: int, endpoint_slots: bool = True, endpoint_props: bool = False,
               sampling: Mapping[str, Any] | None = None, tools_supported: bool = True,
               template_family: str | None = None) -> dict[str, Any]:
    """The /props object for a loaded engine serving ``n_slots`` slots; ``sampling``: the server's
    GenerationParams defaults; ``template_family``: asked at load (nothing here renders the template)."""
    templates = engine.templates()
    body: dict[str, Any] = {
        "default_generation_settings": {"params": task_params_json(GenerationParams(**(sampling or {})),
                                                                   n_predict=n_predict),
                                        "n_ctx": engine.n_ctx // max(1, n_slots)},
        "total_slots": n_slots,
        "model_alias": model_alias,
        "model_ftype": engine.model_ftype,
        "model_path": model_path,
        # what the projector (--mmproj) takes; video never (mtmd is built without it)
        "modalities": {"vision": engine.supports_vision, "video": False, "audio": engine.supports_audio},
        # what marks a medium in a raw prompt (/completion's prompt_string with multimodal_data)
        "media_marker": MEDIA_MARKER if engine.supports_vision or engine.supports_audio else "",
        "endpoint_slots": endpoint_slots,   # GET /slots (--no-slots turns it off)
        "endpoint_props": endpoint_props,   # POST /props (--props turns it on)
        "endpoint_metrics": True,
        "ui": True,           # the page at /
        "ui_settings": {},
        "chat_template": templates.default.source,
        "chat_template_caps": templates.default.caps.to_map(),
        "bos_token": engine.bos_token,
        "eos_token": engine.eos_token,
        "build_info": system_fingerprint(),
        "is_sleeping": False,
        "cors_proxy_enabled": False,
        "chat_template_family": template_family,
        "llamact": _loaded_with(engine, tools_supported),
    }
    if templates.tool_use is not None:
        body["chat_template_tool_use"] = templates.tool_use.source
    return body
