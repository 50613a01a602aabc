"""A stand-in for the Hugging Face Hub on 127.0.0.1: enough of ``/{repo}/resolve/{rev}/{file}``
for huggingface_hub's downloads (HEAD for metadata, GET with optional Range), nothing else.

The headers are the ones huggingface_hub's file_download.py reads: X-Repo-Commit (required),
X-Linked-Etag / ETag (required, an LFS file's sha256), X-Linked-Size / Content-Length, and
X-Error-Code (EntryNotFound, RepoNotFound) on a 404. Each request is logged, so a test can tell
whether the cache answered instead. Serves from a daemon thread that the fixture shuts down.
"""

from __future__ import annotations

import hashlib
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

COMMIT = "8b1d5a4c0e6f2a9b3c7d1e5f0a4b8c2d6e0f1a3b"


class FakeHub:
    def __init__(self, files: dict[tuple[str, str], Path]) -> None:
        self.files = files
        self.etags = {key: hashlib.sha256(path.read_bytes()).hexdigest() for key, path in files.items()}
        self.requests: list[tuple[str, str]] = []
        self.endpoint = ""

    def lookup(self, url_path: str) -> tuple[int, tuple[str, str] | None]:
        # /{org}/{repo}/resolve/{revision}/{filename...}
        parts = unquote(url_path.split("?", 1)[0]).lstrip("/").split("/")
        if len(parts) < 5 or parts[2] != "resolve":
            return 404, None
        repo_id, revision, filename = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
        if not any(repo == repo_id for repo, _ in self.files):
            return 401, None  # what the Hub answers for a repository it does not show you
        if revision not in ("main", COMMIT) or (repo_id, filename) not in self.files:
            return 404, None
        return 200, (repo_id, filename)


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet test output
            pass

        def _answer(self, with_body: bool) -> None:
            hub.requests.append((self.command, self.path))
            status, key = hub.lookup(self.path)
            if key is None:
                self.send_response(status)
                self.send_header("X-Error-Code", "RepoNotFound" if status == 401 else "EntryNotFound")
                self.send_header("X-Error-Message", "not here")
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path = hub.files[key]
            size = path.stat().st_size
            start = 0
            range_header = self.headers.get("Range")
            if range_header and range_header.startswith("bytes="):
                start = int(range_header[len("bytes="):].split("-", 1)[0] or 0)
            self.send_response(206 if start else 200)
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("ETag", f'"{hub.etags[key]}"')
            self.send_header("X-Linked-Etag", f'"{hub.etags[key]}"')
            self.send_header("X-Linked-Size", str(size))
            self.send_header("Content-Length", str(size - start))
            self.send_header("Accept-Ranges", "bytes")
            if start:
                self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
            self.end_headers()
            if with_body:
                with path.open("rb") as fh:
                    fh.seek(start)
                    shutil.copyfileobj(fh, self.wfile, 1 << 20)

        def do_HEAD(self) -> None:  # noqa: N802
            self._answer(with_body=False)

        def do_GET(self) -> None:  # noqa: N802
            self._answer(with_body=True)

    return Handler


@contextmanager
def serve(files: dict[tuple[str, str], Path]) -> Iterator[FakeHub]:
    hub = FakeHub(files)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    server.daemon_threads = True
    hub.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
