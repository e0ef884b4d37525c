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
