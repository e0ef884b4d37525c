"""Stand-in internet servers on other loopback addresses of the host (no test leaves the machine)."""

from __future__ import annotations

import http.server
import socketserver
import threading
from collections.abc import Iterator
from typing import Any

import pytest


class _Origin(http.server.BaseHTTPRequestHandler):
    """``GET`` answers with the path and Host it saw; ``POST`` echoes its body."""

    def do_GET(self) -> None:
        body = f"hello {self.path} host={self.headers.get('Host')}".encode()
        self._send(body)

    def do_POST(self) -> None:
        self._send(self.rfile.read(int(self.headers.get("Content-Length", 0))))

    def _send(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def _serve(server: socketserver.BaseServer) -> Iterator[tuple[str, int]]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        address: Any = server.server_address
        yield str(address[0]), int(address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="session")
def origin() -> Iterator[tuple[str, int]]:
    """An HTTP server on ``127.0.0.2`` (the stand-in for a public web server)."""
    yield from _serve(_Server(("127.0.0.2", 0), _Origin))


@pytest.fixture(scope="session")
def echo() -> Iterator[tuple[str, int]]:
    """A TCP echo server on ``127.0.0.3``."""
    yield from _serve(_Server(("127.0.0.3", 0), _Echo))


@pytest.fixture(scope="session")
def private_echo() -> Iterator[tuple[str, int]]:
    """A TCP echo server on ``127.0.0.4``: loopback that is NOT part of the stand-in internet."""
    yield from _serve(_Server(("127.0.0.4", 0), _Echo))


def _wheel(name: str, version: str) -> tuple[str, bytes]:
    """A minimal pure-Python wheel (enough for ``pip download`` to accept it)."""
    import base64
    import hashlib
    import io
    import zipfile

    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": b"VALUE = 42\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return f"{name}-{version}-py3-none-any.whl", buf.getvalue()


@pytest.fixture(scope="session")
def pypi_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A PEP 503 index with one tiny wheel (``tinypkg``), served on ``127.0.0.2``."""
    import functools
    import hashlib

    root = tmp_path_factory.mktemp("pypi")
    filename, data = _wheel("tinypkg", "0.1")
    (root / "packages").mkdir()
    (root / "packages" / filename).write_bytes(data)
    project = root / "simple" / "tinypkg"
    project.mkdir(parents=True)
    sha = hashlib.sha256(data).hexdigest()
    (project / "index.html").write_text(
        f'<html><body><a href="../../packages/{filename}#sha256={sha}">{filename}</a></body></html>'
    )

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(root))
    yield from _serve(_Server(("127.0.0.2", 0), handler))
