"""The deployment files people copy (deploy/), checked as far as a machine without a container engine
or a cluster can: no image is built and nothing is applied here.

* The Dockerfile, parsed by Docker's own parser (the ``dockerfile`` package wraps BuildKit's) and
  linted by hadolint: every file it copies from the build context exists (the sdist as ``python -m
  build --sdist`` names it, from pyproject's name and version, and ``.dockerignore`` lets it
  through), the CUDA build argument turns on ``-DGGML_CUDA=on`` (the flag pyproject's backend
  passes to CMake), and the command the image runs is one ``llamact serve`` accepts.
* The Kubernetes manifests: YAML that parses; built-in kinds validated against Kubernetes' own
  OpenAPI schemas, strictly (``kubernetes-validate``); the extension's and KServe's kinds against the
  required fields and types of their CRDs (written out below from the CRDs of
  gateway-api-inference-extension and KServe); the references between them (selectors match the
  pods, ports and probes match the container, pools and runtimes are named where they are used);
  every container command parsed by llamact's own argument parser.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import dockerfile
import jsonschema
import kubernetes_validate
import pytest
import yaml

from llamact.cli import _parser

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DOCKERFILE = DEPLOY / "container" / "Dockerfile"
KUBE_VERSION = "1.30.0"


def _project() -> tuple[str, str]:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    name = re.search(r'^name = "([^"]+)"', text, re.M)
    version = re.search(r'^version = "([^"]+)"', text, re.M)
    assert name and version
    return name.group(1), version.group(1)


def _serve_args(argv: list[str]) -> argparse.Namespace:
    """``llamact`` + ``argv`` as the CLI reads it (an unknown flag or a bad value: SystemExit)."""
    args = _parser().parse_args(argv)
    assert args.command == "serve"
    return args


# -- the container recipe ----------------------------------------------------------------------------

def _instructions() -> list[Any]:
    return list(dockerfile.parse_file(str(DOCKERFILE)))


def _arg_defaults(commands: list[Any]) -> dict[str, str]:
    out = {}
    for command in commands:
        if command.cmd == "ARG":
            for value in command.value:
                name, _, default = value.partition("=")
                out[name] = default
    return out


def test_the_dockerfile_copies_only_what_exists_and_builds_from_the_sdist() -> None:
    commands = _instructions()
    defaults = _arg_defaults(commands)
    name, version = _project()
    assert defaults["SDIST"] == f"dist/{name}-{version}.tar.gz"   # what `python -m build --sdist` writes
    stages = [c for c in commands if c.cmd == "FROM"]
    assert [c.value[0] for c in stages] == ["${BUILD_IMAGE}", "${RUN_IMAGE}"]
    assert defaults["BUILD_IMAGE"].startswith("python:3.") and defaults["RUN_IMAGE"] == defaults["BUILD_IMAGE"]
    copies = [c for c in commands if c.cmd == "COPY"]
    assert copies, "nothing copied"
    for copy in copies:
        if any(flag.startswith("--from=") for flag in copy.flags):
            assert copy.flags == ("--from=build",)
            continue
        *sources, _dest = copy.value
        for source in sources:
            resolved = re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)], source)
            if resolved.startswith("dist/"):   # a build output: the sdist's name, let through the context
                ignore = (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
                assert "*" in ignore and "!dist/*.tar.gz" in ignore and resolved.endswith(".tar.gz")
            else:
                assert (REPO / resolved).exists(), resolved
    runs = " ".join(" ".join(c.value) for c in commands if c.cmd == "RUN")
    assert "[server]" in runs and "server" in (REPO / "pyproject.toml").read_text()   # the extra exists
    assert '"${BACKEND}" = "cuda"' in runs and 'CMAKE_ARGS="-DGGML_CUDA=on"' in runs
    assert "-DGGML_CUDA=on" in (REPO / "pyproject.toml").read_text()   # the flag the build backend passes on


def test_the_image_runs_llamact_serve_with_flags_it_accepts() -> None:
    commands = _instructions()
    (entrypoint,) = [c for c in commands if c.cmd == "ENTRYPOINT"]
    (cmd,) = [c for c in commands if c.cmd == "CMD"]
    assert entrypoint.json and cmd.json and list(entrypoint.value) == ["llamact"]
    args = _serve_args(list(cmd.value))
    (expose,) = [c for c in commands if c.cmd == "EXPOSE"]
    assert (args.host, args.port, expose.value) == ("0.0.0.0", "8080", ("8080",))
    (health,) = [c for c in commands if c.cmd == "HEALTHCHECK"]
    assert "http://127.0.0.1:8080/health" in " ".join(health.value)
    (user,) = [c for c in commands if c.cmd == "USER"]
    assert user.value != ("root",)


def test_hadolint_finds_nothing() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    proc = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# -- the Kubernetes manifests -----------------------------------------------------------------------

def _documents() -> dict[str, list[dict[str, Any]]]:
    out = {}
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
        out[path.name] = docs
    return out


DOCS = _documents()
ALL = [doc for docs in DOCS.values() for doc in docs]


def _one(kind: str, api_version: str) -> dict[str, Any]:
    (doc,) = [d for d in ALL if d["kind"] == kind and d["apiVersion"] == api_version]
    return doc


def _required(fields: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": fields, "required": required if required is not None else list(fields)}


STRING, INT = {"type": "string", "minLength": 1}, {"type": "integer", "minimum": 1, "maximum": 65535}
NAME_REF = _required({"name": STRING})
# Required fields and types of the custom resources, from their CRDs' openAPIV3Schema
CRD_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("inference.networking.k8s.io/v1", "InferencePool"): _required({"spec": _required({
        "selector": _required({"matchLabels": {"type": "object", "minProperties": 1}}),
        "targetPorts": {"type": "array", "minItems": 1, "maxItems": 1, "items": _required({"number": INT})},
        "endpointPickerRef": _required({"name": STRING, "port": _required({"number": INT})}, ["name"]),
    })}),
    ("inference.networking.x-k8s.io/v1alpha2", "InferenceObjective"): _required({"spec": _required({
        "priority": {"type": "integer"}, "poolRef": NAME_REF}, ["poolRef"])}),
    ("inference.networking.x-k8s.io/v1alpha2", "InferencePool"): _required({"spec": _required({
        "targetPortNumber": INT, "selector": {"type": "object", "minProperties": 1},
        "extensionRef": NAME_REF})}),
    ("inference.networking.x-k8s.io/v1alpha2", "InferenceModel"): _required({"spec": _required({
        "modelName": STRING, "criticality": {"enum": ["Critical", "Standard", "Sheddable"]}, "poolRef": NAME_REF},
        ["modelName", "poolRef"])}),
    ("serving.kserve.io/v1alpha1", "ServingRuntime"): _required({"spec": _required({
        "supportedModelFormats": {"type": "array", "minItems": 1, "items": _required(
            {"name": STRING, "autoSelect": {"type": "boolean"}}, ["name"])},
        "containers": {"type": "array", "minItems": 1, "items": _required({"name": STRING, "image": STRING},
                                                                           ["name"])},
    }, ["containers"])}),
    ("serving.kserve.io/v1beta1", "InferenceService"): _required({"spec": _required({"predictor": _required({
        "model": _required({"modelFormat": _required({"name": STRING}), "runtime": STRING,
                            "storageUri": STRING}, ["modelFormat"])})})}),
}


@pytest.mark.parametrize("doc", ALL, ids=[f"{d['kind']}/{d['metadata']['name']}" for d in ALL])
def test_each_manifest_is_valid_for_its_kind(doc: dict[str, Any]) -> None:
    assert doc["metadata"]["name"] and doc["apiVersion"] and doc["kind"]
    schema = CRD_SCHEMAS.get((doc["apiVersion"], doc["kind"]))
    if schema is not None:
        jsonschema.validate(doc, schema)
    else:   # a built-in kind: Kubernetes' own schema, no unknown field allowed
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def test_every_kind_is_checked_and_each_file_holds_what_it_says() -> None:
    kinds = {(d["apiVersion"], d["kind"]) for d in ALL}
    assert kinds - set(CRD_SCHEMAS) == {("apps/v1", "Deployment"), ("v1", "Service")}
    assert {name: [d["kind"] for d in docs] for name, docs in DOCS.items()} == {
        "gateway-v0.yaml": ["InferencePool", "InferenceModel"], "gateway.yaml": ["InferencePool", "InferenceObjective"],
        "kserve.yaml": ["ServingRuntime", "InferenceService"], "llamact.yaml": ["Deployment", "Service"]}


def test_a_broken_manifest_is_refused() -> None:
    """The checks can fail: a Deployment with a misspelt field, a pool without its selector."""
    deployment = yaml.safe_load(yaml.safe_dump(_one("Deployment", "apps/v1")))
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBE_VERSION, strict=True)
    pool = yaml.safe_load(yaml.safe_dump(_one("InferencePool", "inference.networking.k8s.io/v1")))
    del pool["spec"]["selector"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(pool, CRD_SCHEMAS[("inference.networking.k8s.io/v1", "InferencePool")])
    with pytest.raises(SystemExit):
        _serve_args(["serve", "--no-such-flag"])


def test_the_pods_serve_what_the_service_the_pools_and_the_probes_expect() -> None:
    deployment, service = _one("Deployment", "apps/v1"), _one("Service", "v1")
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()
    (container,) = pod["spec"]["containers"]
    (port,) = container["ports"]
    assert container["command"] == ["llamact"]
    args = _serve_args(container["args"])
    assert (args.host, int(args.port)) == ("0.0.0.0", port["containerPort"])
    assert service["spec"]["ports"][0]["targetPort"] == port["name"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": port["name"]}, probe
    assert pod["metadata"]["annotations"]["prometheus.io/path"] == "/metrics"
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(port["containerPort"])
    (mount,) = container["volumeMounts"]
    assert args.model.startswith(mount["mountPath"] + "/")
    assert pod["spec"]["securityContext"]["runAsUser"] == 10001   # the image's user (Dockerfile USER)

    pool = _one("InferencePool", "inference.networking.k8s.io/v1")
    assert pool["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pool["spec"]["targetPorts"] == [{"number": port["containerPort"]}]
    assert _one("InferenceObjective", "inference.networking.x-k8s.io/v1alpha2")["spec"]["poolRef"]["name"] == \
        pool["metadata"]["name"]
    old_pool = _one("InferencePool", "inference.networking.x-k8s.io/v1alpha2")
    assert old_pool["spec"]["selector"].items() <= labels.items()
    assert old_pool["spec"]["targetPortNumber"] == port["containerPort"]
    model = _one("InferenceModel", "inference.networking.x-k8s.io/v1alpha2")
    assert model["spec"]["poolRef"]["name"] == old_pool["metadata"]["name"]
    assert model["spec"]["modelName"] == args.alias[0]   # the name the pods answer to


def test_the_kserve_runtime_serves_what_kserve_mounts() -> None:
    runtime = _one("ServingRuntime", "serving.kserve.io/v1alpha1")
    service = _one("InferenceService", "serving.kserve.io/v1beta1")
    (container,) = runtime["spec"]["containers"]
    assert container["name"] == "kserve-container" and container["command"] == ["llamact"]
    args = _serve_args(container["args"])
    assert args.model.startswith("/mnt/models/") and args.alias == ["{{.Name}}"]
    assert (args.host, int(args.port)) == ("0.0.0.0", container["ports"][0]["containerPort"])
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    model = service["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime["metadata"]["name"]
    assert model["modelFormat"]["name"] in {f["name"] for f in runtime["spec"]["supportedModelFormats"]}
    images = {c["image"] for d in ALL if d["kind"] in ("Deployment", "ServingRuntime")
              for c in (d["spec"]["template"]["spec"]["containers"] if d["kind"] == "Deployment"
                        else d["spec"]["containers"])}
    assert images == {"llamact:cpu"}   # the tag the Dockerfile's instructions build
    assert "-t llamact:cpu" in DOCKERFILE.read_text(encoding="utf-8")
