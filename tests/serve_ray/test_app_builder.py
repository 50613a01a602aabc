"""The Ray Serve application from the server's settings table (llamact/serve_ray/deployments.py,
__init__.py): Ray's options from the ray_* rows, Ray's ``serve run`` builder taking the rows' names
as text, a config file, and --ray refusing router mode. No cluster is started."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ray.serve import Application

from llamact.errors import LlamaRequestException
from llamact.serve_ray import app_builder, ray_init_options, run
from llamact.serve_ray.deployments import ROUTER_PATH, replica_options
from llamact.server.config.settings import load_settings
from llamact.server.models.catalogue import read_catalogue


def test_the_ray_rows_become_rays_options() -> None:
    options = replica_options(load_settings({"parallel": "4", "threads": "2", "ray_replicas": "3"}))
    assert options["num_replicas"] == 3 and "autoscaling_config" not in options
    assert options["max_ongoing_requests"] == 8 and options["ray_actor_options"] == {"num_cpus": 2.0}
    router = options["request_router_config"]
    assert router.request_router_class == ROUTER_PATH and router.request_router_kwargs == {"capacity": 4}
    autoscaling = {"min_replicas": 1, "max_replicas": 5, "target_ongoing_requests": 3}
    options = replica_options(load_settings({"ray_autoscaling": json.dumps(autoscaling), "ray_router": "pow2",
                                             "ray_num_cpus": "0.5", "ray_max_ongoing_requests": "3"}))
    assert options["autoscaling_config"] == autoscaling and "num_replicas" not in options
    assert "request_router_config" not in options   # Ray's own router
    assert options["max_ongoing_requests"] == 3 and options["ray_actor_options"] == {"num_cpus": 0.5}
    with pytest.raises(ValueError, match="--ray-autoscaling must be a JSON object"):
        load_settings({"ray_autoscaling": "{min"})


def test_serve_run_builds_the_application_from_text_and_a_config_file(tmp_path: Path, smollm2_path: Path) -> None:
    config = tmp_path / "llamact.json"
    config.write_text(json.dumps({"parallel": 2, "ray_replicas": 2}))
    assert isinstance(app_builder({"model": str(smollm2_path), "config": str(config)}), Application)
    assert isinstance(app_builder({"model": str(smollm2_path), "ray-router": "pow2"}), Application)


def test_a_local_cluster_listens_on_loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert ray_init_options(load_settings({}))["_node_ip_address"] == "127.0.0.1"
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")   # Ray's own variable: that cluster, nothing local
    assert ray_init_options(load_settings({}))["address"] == "10.0.0.5:6379"
    assert ray_init_options(load_settings({"ray_address": "auto"})) == {
        "include_dashboard": False, "log_to_driver": False, "address": "auto"}


def test_ray_serves_one_model(tmp_path: Path, smollm2_path: Path) -> None:
    (tmp_path / "a.gguf").symlink_to(smollm2_path)
    with pytest.raises(LlamaRequestException, match="--ray serves one model"):
        run(read_catalogue({"models_dir": str(tmp_path), "ray": True}))
