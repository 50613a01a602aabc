"""llama-server's lifecycle in the harness: found, started on 127.0.0.1, waited for, always stopped.

The lifecycle tests use a stand-in executable (a small Python HTTP server) so that they need neither
the model nor the real server and can misbehave on purpose; the last tests use the real one.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from llamact.parity.llama_server import HOST, LlamaServer, LlamaServerError, ServerConfig, find_llama_server

FAKE_SERVER = '''
import http.server, json, os, signal, sys
args = sys.argv[1:]
with open(os.environ["FAKE_ARGV"], "w") as f:
    json.dump(args, f)
if os.environ.get("FAKE_MODE") == "exit":
    print("fake server: cannot load the model", flush=True)
    sys.exit(1)
if os.environ.get("FAKE_MODE") == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'{"status":"ok"}')
    def log_message(self, *a):
        pass
port = int(args[args.index("--port") + 1])
http.server.HTTPServer((args[args.index("--host") + 1], port), Handler).serve_forever()
'''


@pytest.fixture
def fake_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], tuple[LlamaServer, Path]]:
    script = tmp_path / "llama-server"
    script.write_text(f"#!{sys.executable}\n{FAKE_SERVER}")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    argv_file = tmp_path / "argv.json"
    monkeypatch.setenv("FAKE_ARGV", str(argv_file))
    monkeypatch.setenv("LLAMA_ARG_HOST", "0.0.0.0")   # must not reach the server
    servers: list[LlamaServer] = []

    def make(mode: str) -> tuple[LlamaServer, Path]:
        monkeypatch.setenv("FAKE_MODE", mode)
        template = tmp_path / "t.jinja"
        template.write_text("{{ messages }}")
        server = LlamaServer(ServerConfig(model, template), script, start_timeout=30)
        servers.append(server)
        return server, argv_file

    yield make
    for server in servers:
        server.stop(timeout=1)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_started_on_loopback_with_the_configured_flags_and_stopped(fake_server) -> None:
    server, argv_file = fake_server("ok")
    with server:
        assert server.running and server.port > 0
        args = json.loads(argv_file.read_text())
        assert args[args.index("--host") + 1] == HOST == "127.0.0.1"
        for flag in ("--jinja", "--parallel", "--temp", "--reasoning-format", "--offline"):
            assert flag in args
        # without --jinja first, --chat-template-file accepts only built-in template names
        assert args.index("--jinja") < args.index("--chat-template-file")
        pid = server.pid
        assert pid is not None
    assert not server.running and _gone(pid)
    assert "LLAMA_ARG_HOST" in os.environ   # the caller's environment is left alone


def test_a_server_that_ignores_sigterm_is_killed(fake_server) -> None:
    server, _ = fake_server("ignore-term")
    server.start()
    pid = server.pid
    assert pid is not None
    server.stop(timeout=0.5)
    assert not server.running and _gone(pid)


def test_a_server_that_exits_reports_its_log(fake_server) -> None:
    server, _ = fake_server("exit")
    with pytest.raises(LlamaServerError, match="cannot load the model"):
        server.start()
    assert not server.running


def test_missing_server_and_files_are_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(LlamaServerError, match="-DLLAMACT_BUILD_UPSTREAM_TOOLS=ON"):
        find_llama_server(tmp_path / "llama-server")
    with pytest.raises(LlamaServerError, match="model file not found"):
        LlamaServer(ServerConfig(tmp_path / "missing.gguf"), tmp_path / "x").start()


def _listening_addresses(port: int) -> set[str]:
    """Local addresses with a listening TCP socket on ``port``, from /proc/net/tcp{,6} (hex, as there)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, port_hex = fields[1].rsplit(":", 1)
            if int(port_hex, 16) == port and fields[3] == "0A":   # 0A: LISTEN
                found.add(address)
    return found


@pytest.mark.model
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's socket table")
def test_real_server_listens_on_loopback_only(start_llama_server, smollm2_path: Path) -> None:
    server = start_llama_server(smollm2_path)
    assert _listening_addresses(server.port) == {"0100007F"}   # 127.0.0.1, nothing on any other address
    health = server.post("/tokenize", {"content": "hi"})
    assert health["tokens"]
