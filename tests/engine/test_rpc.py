"""Scale-out on llama.cpp's RPC backend: a model split across two ggml-rpc-servers on 127.0.0.1
generates the same greedy tokens as a local run; an endpoint that cannot be reached is a
LlamaModelException (ggml itself would abort the process)."""

from __future__ import annotations

import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import llamact
from llamact import GenerationParams, LlamaEngine, LlamaModelException, ModelParams
from llamact.engine.backends import rpc_server_command

pytestmark = pytest.mark.model

PROMPT = "<|im_start|>user\nName three rivers in Europe.<|im_end|>\n<|im_start|>assistant\n"
GREEDY = GenerationParams(max_tokens=24, greedy=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_serving(proc: subprocess.Popen[bytes], endpoint: str) -> None:
    """Poll until the server answers the RPC HELLO (or has died); no wall-time assertion."""
    from llamact.native import rpc

    for _ in range(600):
        if proc.poll() is not None:
            pytest.fail(f"ggml-rpc-server for {endpoint} exited with {proc.returncode}")
        try:
            rpc.probe(endpoint, timeout=2.0)
            return
        except LlamaModelException:
            try:
                proc.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                pass
    pytest.fail(f"ggml-rpc-server for {endpoint} never answered")


@pytest.fixture(scope="module")
def rpc_servers() -> Iterator[list[str]]:
    try:
        command = rpc_server_command  # the installed binary, or a clear failure
        argv0 = command()[0]
    except llamact.LlamaUnsupportedException as exc:
        pytest.fail(str(exc))
    procs: list[subprocess.Popen[bytes]] = []
    endpoints = []
    try:
        for _ in range(2):
            port = _free_port()
            argv = rpc_server_command("127.0.0.1", port, threads=1)
            assert argv[0] == argv0
            procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            endpoints.append(f"127.0.0.1:{port}")
            _wait_until_serving(procs[-1], endpoints[-1])
        yield endpoints
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_unreachable_rpc_server_is_a_model_error(smollm2_path: Path) -> None:
    port = _free_port()  # bound then released: nothing listens there
    with pytest.raises(LlamaModelException, match=f"cannot reach RPC server 127.0.0.1:{port}"):
        LlamaEngine.load(smollm2_path, ModelParams(n_ctx=256, rpc_servers=[f"127.0.0.1:{port}"]))


def test_a_listener_that_is_not_an_rpc_server_is_a_model_error(smollm2_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        endpoint = f"127.0.0.1:{listener.getsockname()[1]}"
        from llamact.native import rpc

        # It accepts but never answers the HELLO: reported, not waited on forever.
        with pytest.raises(LlamaModelException, match="did not answer"):
            rpc.probe(endpoint, timeout=0.5)


def test_model_split_across_two_rpc_servers_matches_local(smollm2_path: Path, rpc_servers: list[str]) -> None:
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=256)) as local:
        expected = local.complete(PROMPT, GREEDY).tokens

    params = ModelParams(n_ctx=256, rpc_servers=rpc_servers, n_gpu_layers=-1)
    with LlamaEngine.load(smollm2_path, params) as remote:
        got = remote.complete(PROMPT, GREEDY).tokens
        remote_devices = [d for d in llamact.devices() if d.backend == "RPC"]
    assert got == expected
    # Both servers were registered (once each) and offered their devices.
    assert sorted(d.description for d in remote_devices) == sorted(rpc_servers)
    assert all(d.memory_total > 0 for d in remote_devices)

    # Registered once per process: a second load reuses the registrations.
    with LlamaEngine.load(smollm2_path, params) as again:
        assert again.complete(PROMPT, GREEDY).tokens == expected
    assert len([d for d in llamact.devices() if d.backend == "RPC"]) == len(remote_devices)

    # A later load that does not ask for RPC stays local.
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=256)) as plain:
        assert plain.complete(PROMPT, GREEDY).tokens == expected


def test_rpc_server_command_and_a_server_that_went_away(smollm2_path: Path) -> None:
    """`llamact rpc-server` serves; once its server has gone, a registered endpoint neither aborts
    the process when devices are listed nor when a model asks for it again."""
    import sys

    from llamact.native import rpc

    port = _free_port()
    endpoint = f"127.0.0.1:{port}"
    # cwd away from the source tree: `python -m` would import the checkout's llamact (no compiled part)
    proc = subprocess.Popen([sys.executable, "-m", "llamact", "rpc-server", "--port", str(port), "--threads", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir())
    try:
        _wait_until_serving(proc, endpoint)
        assert rpc.rpc_devices([endpoint])  # registered with ggml, as a model load would
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    gone = [d for d in llamact.devices() if d.backend == "RPC" and d.description == endpoint]
    assert gone and all(d.memory_total == 0 for d in gone)
    with pytest.raises(LlamaModelException, match=f"cannot reach RPC server {endpoint}"):
        LlamaEngine.load(smollm2_path, ModelParams(n_ctx=256, rpc_servers=[endpoint]))
