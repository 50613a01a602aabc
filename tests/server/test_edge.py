"""The network edge of ``llamact serve`` (issue 27), on one server: HTTPS with a self-signed
certificate made here, several API keys (repeated, comma-separated, from a file), the public routes,
``--api-prefix``, CORS for the origins named, ``--port 0`` with the real port in the start line, the
JSON log (start, access with ``--log-prompts``, shutdown). Everything on 127.0.0.1."""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_live import HOST, LiveServer

pytestmark = [pytest.mark.model]

PREFIX = "/llama"
KEYS = ("key-one", "key-two", "key-three", "key-from-file")
APP = "https://app.example"
HELLO = {"messages": [{"role": "user", "content": "Say hello from the edge."}], "max_tokens": 4, "temperature": 0}


def _certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (the ``cryptography`` package)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "llamact test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(HOST))]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


class EdgeServer(LiveServer):
    """``llamact serve --port 0`` over HTTPS: the port is read from its JSON start line."""

    def __init__(self, *args: str, cert: Path) -> None:
        super().__init__(*args)
        self.context = ssl.create_default_context(cafile=str(cert))

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMACT_") or k in (
            "LLAMACT_LIB_DIR", "LLAMACT_BIN_DIR", "LLAMACT_CACHE")}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "llamact", "serve", "--host", HOST, "--port", "0", *self.args],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, env=env,
            cwd=tempfile.gettempdir())
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.process.poll() is None:
            listening = [line for line in self.lines() if line.get("event") == "listening"]
            if listening:
                self.port = int(listening[0]["url"].rsplit(":", 1)[1].split("/")[0])
                if self._wait_healthy():
                    return
            time.sleep(0.05)
        raise RuntimeError(f"the server did not start:\n{self.log_tail()}")

    def lines(self) -> list[Any]:
        out = []
        for line in self.log_tail(200_000).splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def request(self, method: str, path: str, body: bytes | None = None, *, headers: dict[str, str] | None = None,
                timeout: float = 300.0) -> tuple[int, bytes]:
        status, raw, _ = self.call(method, path, body, headers=headers or {}, timeout=timeout)
        return status, raw

    def call(self, method: str, path: str, body: bytes | None = None, *, headers: dict[str, str],
             timeout: float = 300.0) -> tuple[int, bytes, dict[str, str]]:
        conn = http.client.HTTPSConnection(HOST, self.port, timeout=timeout, context=self.context)
        try:
            conn.request(method, path if path.startswith(PREFIX) else PREFIX + path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.read(), {k.lower(): v for k, v in response.getheaders()}
        finally:
            conn.close()


@pytest.fixture(scope="module")
def edge(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeServer]:
    directory = tmp_path_factory.mktemp("edge")
    cert, key = _certificate(directory)
    key_file = directory / "keys.txt"
    key_file.write_text(f"# one key a line\n{KEYS[3]}\n")
    with EdgeServer("--model", str(smollm2_path), "--threads", "1", "--ctx-size", "512",
                    "--ssl-cert-file", str(cert), "--ssl-key-file", str(key),
                    "--api-key", KEYS[0], "--api-key", f"{KEYS[1]},{KEYS[2]}", "--api-key-file", str(key_file),
                    "--cors-origins", f"{APP},localhost", "--api-prefix", PREFIX,
                    "--log-format", "json", "--log-prompts", cert=cert) as live:
        yield live


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}


def test_https_on_the_port_the_start_line_names(edge: EdgeServer) -> None:
    listening = [line for line in edge.lines() if line.get("event") == "listening"]
    assert listening[0]["url"] == f"https://{HOST}:{edge.port}{PREFIX}" and edge.port > 0
    assert edge.call("GET", "/health", headers={})[:2] == (200, b'{"status":"ok"}')
    plain = http.client.HTTPConnection(HOST, edge.port, timeout=10)   # no TLS: no HTTP answer
    with pytest.raises((http.client.HTTPException, OSError)):
        plain.request("GET", PREFIX + "/health")
        plain.getresponse().read()
    plain.close()
    stranger = http.client.HTTPSConnection(HOST, edge.port, timeout=10, context=ssl.create_default_context())
    with pytest.raises(ssl.SSLError):   # a client that does not trust the certificate refuses it
        stranger.request("GET", PREFIX + "/health")
    stranger.close()


def test_every_key_opens_the_api_and_the_public_routes_need_none(edge: EdgeServer) -> None:
    for key in KEYS:
        assert edge.call("GET", "/v1/models", headers=bearer(key))[0] == 200, key
    assert edge.call("GET", "/v1/models", headers={"X-Api-Key": KEYS[2]})[0] == 200
    for headers in ({}, bearer("key-on"), bearer(KEYS[0] + "x"), {"Authorization": "Basic key-one"}):
        status, raw, _ = edge.call("GET", "/v1/models", headers=headers)
        assert (status, json.loads(raw)["error"]["type"]) == (401, "authentication_error"), headers
    for path in ("/props", "/metrics", "/slots"):   # llama-server's policy: not public
        assert edge.call("GET", path, headers={})[0] == 401, path
    assert edge.call("GET", "/health", headers={})[0] == 200
    status, page, _ = edge.call("GET", "/", headers={})
    assert status == 200 and b"<title>llamact</title>" in page
    # HEAD is GET without the body, as llama-server's HTTP library answers it (it was a 404)
    for path in ("/", "/health"):
        status, body, headers = edge.call("HEAD", path, headers={})
        assert (status, body) == (200, b""), path
        assert headers["content-length"] == edge.call("GET", path, headers={})[2]["content-length"], path


def test_routes_live_under_the_prefix(edge: EdgeServer) -> None:
    conn = http.client.HTTPSConnection(HOST, edge.port, timeout=10, context=edge.context)
    try:
        conn.request("GET", "/v1/models", headers=bearer(KEYS[0]))
        response = conn.getresponse()
        assert response.status == 404 and json.loads(response.read())["error"]["type"] == "not_found_error"
        conn.request("GET", PREFIX, headers={})
        response = conn.getresponse()
        response.read()
        assert response.status == 307 and response.getheader("location", "").endswith(PREFIX + "/")
    finally:
        conn.close()


def test_cors_for_the_origins_named_and_no_other(edge: EdgeServer) -> None:
    preflight = {"Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization,content-type"}
    for origin in (APP, "http://localhost:5173", "http://127.0.0.1:3000"):
        status, _, headers = edge.call("OPTIONS", "/v1/chat/completions", headers={"Origin": origin, **preflight})
        assert status == 200 and headers["access-control-allow-origin"] == origin, origin
        assert "authorization" in headers["access-control-allow-headers"].lower()
        assert "access-control-allow-credentials" not in headers
    status, _, headers = edge.call("OPTIONS", "/v1/chat/completions",
                                   headers={"Origin": "https://evil.example", **preflight})
    assert status == 400 and "access-control-allow-origin" not in headers
    _, _, headers = edge.call("GET", "/v1/models", headers={"Origin": APP, **bearer(KEYS[0])})
    assert headers["access-control-allow-origin"] == APP
    _, _, headers = edge.call("GET", "/v1/models", headers={"Origin": "https://evil.example", **bearer(KEYS[0])})
    assert "access-control-allow-origin" not in headers


def test_the_access_line_in_json_with_the_prompt_when_asked(edge: EdgeServer) -> None:
    status, raw, _ = edge.call("POST", "/v1/chat/completions", json.dumps(HELLO).encode(), headers=bearer(KEYS[1]))
    assert status == 200, raw
    usage = json.loads(raw)["usage"]
    time.sleep(0.2)
    (line,) = [e for e in edge.lines() if e.get("event") == "request" and e["path"] == PREFIX + "/v1/chat/completions"]
    assert (line["method"], line["status"], line["level"]) == ("POST", 200, "info")
    assert (line["prompt_tokens"], line["completion_tokens"]) == (usage["prompt_tokens"], usage["completion_tokens"])
    assert line["cached_tokens"] == 0 and line["seconds"] > 0 and line["client"].startswith(f"{HOST}:")
    assert line["prompt"] == {"messages": HELLO["messages"]}          # --log-prompts
    starts = {e["event"] for e in edge.lines()}
    assert {"model_loading", "listening", "model_loaded", "model_context", "model_template", "model_backends"} <= starts


def test_shutdown_lines(edge: EdgeServer) -> None:
    edge.process.send_signal(signal.SIGTERM)
    assert edge.process.wait(timeout=60) == 0
    events = [e["event"] for e in edge.lines()]
    assert events[-3:] == ["stopping", "closed", "stopped"], events[-5:]
