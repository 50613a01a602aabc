"""Replicas of ``llamact serve`` on a Ray cluster, behind a prefix-aware router (``pip install llamact[ray]``).

    llamact serve -m model.gguf --parallel 4 --ray --ray-replicas 2          # a local cluster, or --ray-address
    serve run llamact.serve_ray:app_builder model=model.gguf parallel=4 ray_replicas=2   # Ray's own CLI

What enters: the server's settings table (``server.config.settings``: flags, ``LLAMACT_*``, a config
file), its ``ray_*`` rows included: replicas or Ray's ``autoscaling_config`` passed as is, the CPUs
each replica reserves, the requests Ray sends one replica at once, the router. What leaves: the same
HTTP answers as ``llamact serve`` (each replica runs the server's own app: ``deployments``), on
``--host`` / ``--port`` through Ray's proxy. Raised: ``LlamaException`` for settings ``--ray`` cannot
serve (router mode: several models); Ray's own errors for a cluster it cannot reach.

Modules, lowest first: ``prefix`` (block keys, the table of owners, the choice; no Ray),
``prompts`` (a request's prompt as token ids), ``asgi`` (a request carried to a replica and run
through the app), ``router`` (Ray's request-router interface over ``prefix``), ``deployments`` (the
replica and the ingress, the application).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path
from typing import Any

from ..errors import LlamaRequestException
from ..server.config.settings import ServerSettings, load_settings
from ..server.models.catalogue import Catalogue

__all__ = ["app_builder", "ray_init_options", "run"]


def app_builder(args: dict[str, str]) -> Any:
    """``serve run llamact.serve_ray:app_builder key=value ...``: the settings' field names as keys
    (``model``, ``parallel``, ``threads``, ``ray_replicas``, ``ray_autoscaling``, ...), ``config=`` a
    JSON config file, as ``llamact serve --config`` reads it."""
    from .deployments import build_app

    flags = {key.replace("-", "_"): value for key, value in args.items() if key != "config"}
    return build_app(load_settings(flags, Path(args["config"]) if "config" in args else None))


def ray_init_options(settings: ServerSettings) -> dict[str, Any]:
    """``ray.init``'s keywords: the cluster at ``--ray-address`` (else Ray's ``RAY_ADDRESS``); without
    one a new local cluster on 127.0.0.1 only (Ray's ports are the cluster's control plane: a
    cluster of several machines is started with ``ray start`` by whoever runs it, on a network they
    trust, and joined with --ray-address)."""
    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
    address = settings.ray_address or os.environ.get("RAY_ADDRESS")
    if address:
        return {**options, "address": address}
    return {**options, "_node_ip_address": "127.0.0.1", "object_store_memory": 128 << 20}


def run(catalogue: Catalogue | ServerSettings) -> int:
    """``llamact serve --ray``: start (or join) a Ray cluster, serve the application on --host/--port
    until SIGINT / SIGTERM, then take it down."""
    if isinstance(catalogue, Catalogue):
        if catalogue.router:
            raise LlamaRequestException("--ray serves one model (-m): router mode (--models-dir, --models-preset, "
                                        "a config file's models) is not served by Ray")
        settings = catalogue.models[0].settings
    else:
        settings = catalogue
    import ray
    from ray import serve

    from .deployments import build_app

    ray.init(**ray_init_options(settings))
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):   # after ray.init: Ray's driver installs handlers that exit at once
        signal.signal(sig, lambda *_: stop.set())
    try:
        serve.start(http_options={"host": settings.host, "port": settings.port})
        serve.run(build_app(settings), name="llamact", route_prefix="/")
        print(f"llamact: serving on http://{settings.host}:{settings.port} through Ray "
              f"({settings.ray_router} router)", flush=True)
        stop.wait()
    finally:
        started = _descendants(os.getpid()) if "address" not in ray_init_options(settings) else []
        serve.shutdown()
        ray.shutdown()
        _end(started)
    return 0


def _descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (Linux: /proc; elsewhere none)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _end(pids: list[int]) -> None:
    """The local cluster's processes that outlived ``ray.shutdown`` (its per-node agents wait minutes
    to notice their raylet is gone): asked to stop now."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
