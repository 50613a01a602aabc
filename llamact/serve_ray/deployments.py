"""The two Ray Serve deployments: the replicas (``llamact serve``'s own app over one model on its slots)
and the ingress that routes each HTTP request to one of them.

    app = build_app(settings)          # a ray.serve Application: the ingress, bound to the replicas
    serve.run(app, route_prefix="/")

``LlamactReplica`` builds the app ``llamact serve`` builds (``server.create_app``, from the same
settings), runs its lifespan (the model loads before the replica reports ready; a model that fails
to load fails the replica), and answers ``handle(parts, prefix=...)`` by running the request through
the app in process (``asgi.call_app``): every route, status, header and byte is the server's.
``LlamactIngress`` receives the HTTP requests from Ray's proxy, reads the body (at most
``--max-body-size`` + 1 bytes: the replica answers 413 beyond), tokenizes the prompt a chat or raw
completion will run (``prompts``: the model's vocabulary and template, without the weights), keys its
whole blocks (``prefix.block_keys``) and calls the replicas through a handle with ``prefix=keys``:
the replicas' request router (``router.PrefixAwareRouter``, or Ray's default with ``--ray-router
pow2``) picks the replica. Settings travel as a plain dump of ``ServerSettings`` (no environment is
read again in the replicas' processes).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from ray import serve
from ray.serve.config import RequestRouterConfig
from ray.serve.handle import DeploymentHandle
from starlette.requests import Request
from starlette.responses import Response

from ..engine import Tokenizer
from ..server import create_app
from ..server.config.settings import ServerSettings, read_text_file
from .asgi import ForwardedResponse, Message, RequestParts, call_app
from .prefix import block_keys
from .prompts import prompt_tokens
from .router import PREFIX_KEYWORD

__all__ = ["INGRESS_MAX_ONGOING", "LlamactIngress", "LlamactReplica", "build_app", "replica_options"]

INGRESS_MAX_ONGOING = 1000   # the ingress only forwards: the replicas' own limit is what queues
ROUTER_PATH = "llamact.serve_ray.router.PrefixAwareRouter"


def _settings(dump: dict[str, Any]) -> ServerSettings:
    return ServerSettings.model_validate(dump)


class LlamactReplica:
    """One ``llamact serve`` app over one model (see the module docstring)."""

    # Ray awaits an async __init__ (a type checker wants None back)
    async def __init__(self, dump: dict[str, Any]) -> None:  # type: ignore[misc]
        self.app = create_app(_settings(dump), load_in_background=False)
        self._lifespan = self.app.router.lifespan_context(self.app)
        await self._lifespan.__aenter__()
        error = self.app.state.llamact.only.error
        if error is not None:
            await self._lifespan.__aexit__(None, None, None)
            raise RuntimeError(f"the model did not load: {error}")

    async def handle(self, parts: RequestParts, **_routing: Any) -> AsyncIterator[list[Message]]:
        """The app's answer to ``parts``, as batches of ASGI messages (``prefix=``: the router's)."""
        async for batch in call_app(self.app, parts):
            yield batch

    def check_health(self) -> None:
        if self.app.state.llamact.only.state is None:
            raise RuntimeError("the model is not loaded")

    async def __del__(self) -> None:
        await self._lifespan.__aexit__(None, None, None)


class LlamactIngress:
    """Ray's HTTP entry: forwards each request to a replica chosen by its prompt's prefix."""

    def __init__(self, replicas: DeploymentHandle, dump: dict[str, Any]) -> None:
        settings = _settings(dump)
        template = (read_text_file(settings.chat_template_file, "chat template")
                    if settings.chat_template_file is not None else None)
        self.tokenizer = Tokenizer.load(settings.model_path(), chat_template=template)
        self.block = settings.ray_prefix_block
        self.max_body = settings.max_body_size
        self.api_prefix = settings.api_prefix
        self.replicas = replicas.options(stream=True)

    async def __call__(self, request: Request) -> Response:
        parts = await RequestParts.read(request, self.max_body + 1)
        path = parts.path.removeprefix(self.api_prefix) if self.api_prefix else parts.path
        tokens = await asyncio.to_thread(prompt_tokens, self.tokenizer, path, parts.body)
        keys = block_keys(tokens, self.block) if tokens else ()
        return ForwardedResponse(self.replicas.handle.remote(parts, **{PREFIX_KEYWORD: keys}))


def replica_options(settings: ServerSettings) -> dict[str, Any]:
    """The replicas' Ray Serve options from the settings (README "Scaling out")."""
    options: dict[str, Any] = {
        "name": "LlamactReplica",
        "ray_actor_options": {"num_cpus": settings.ray_num_cpus if settings.ray_num_cpus is not None
                              else float(settings.threads or 1)},
        "max_ongoing_requests": settings.ray_max_ongoing_requests or 2 * settings.parallel,
    }
    if settings.ray_autoscaling is not None:
        options["autoscaling_config"] = dict(settings.ray_autoscaling)
    else:
        options["num_replicas"] = settings.ray_replicas
    if settings.ray_router == "prefix":
        options["request_router_config"] = RequestRouterConfig(
            # a class or its import path (Ray's stubs say otherwise)
            request_router_class=ROUTER_PATH,  # type: ignore[arg-type]
            request_router_kwargs={"capacity": settings.parallel})
    return options


def build_app(settings: ServerSettings) -> Any:
    """The Ray Serve application: the ingress bound to the replicas."""
    dump = settings.model_dump()
    replicas = serve.deployment(**replica_options(settings))(LlamactReplica).bind(dump)
    ingress = serve.deployment(name="LlamactIngress", ray_actor_options={"num_cpus": 0},
                               max_ongoing_requests=INGRESS_MAX_ONGOING)(LlamactIngress)
    return ingress.bind(replicas, dump)
