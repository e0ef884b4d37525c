"""A scripted HTTP/1.1 server in a thread, over TCP or a unix socket.

Per route (method + path) it serves queued :class:`Reply` objects in order;
when a route's queue is empty it asks ``fallback`` (a callable), else answers
404 ``not_found``. Every request is recorded.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import socketserver
import tempfile
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Reply:
    """One scripted answer. ``drop`` closes the connection without answering."""

    status: int = 200
    body: Any = None
    raw: bytes | None = None
    delay: float = 0.0
    drop: bool = False


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    raw: bytes
    body: Any = field(default=None)
    connection: int = 0  # which of the server's connections carried it (1, 2, ...)


Fallback = Callable[[Recorded], Reply]


_CONNECTIONS = itertools.count(1)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def setup(self) -> None:
        super().setup()
        self.connection_number = next(_CONNECTIONS)  # one handler per connection

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def address_string(self) -> str:
        return "test-client"

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        rec = Recorded(
            method=self.command,
            path=parts.path,
            query=parse_qs(parts.query),
            headers={k.lower(): v for k, v in self.headers.items()},
            raw=raw,
            body=body,
            connection=self.connection_number,
        )
        reply = self.server.scripted.dispatch(rec)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.drop:
            self.close_connection = True
            return
        payload = reply.raw if reply.raw is not None else b""
        if reply.raw is None and reply.body is not None:
            payload = json.dumps(reply.body).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        # One write for head and body: two small writes stall on Nagle + delayed ACK.
        self._headers_buffer.append(b"\r\n" + payload)  # type: ignore[attr-defined]
        self.flush_headers()

    do_GET = do_POST = do_DELETE = do_PUT = _handle


class _Quiet:
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up early (read-timeout tests) is expected


class _TCPServer(_Quiet, socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


class _UnixServer(_Quiet, socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class ScriptedServer:
    """Start with :meth:`start`; ``client_kwargs`` points a client at it."""

    def __init__(self, kind: str = "tcp", socket_path: str | None = None) -> None:
        self.kind = kind
        self._tmpdir: str | None = None
        if kind == "uds" and socket_path is None:
            self._tmpdir = tempfile.mkdtemp(prefix="cw", dir="/tmp")
            socket_path = os.path.join(self._tmpdir, "s.sock")
        self.socket_path = socket_path
        self.requests: list[Recorded] = []
        self.fallback: Fallback | None = None
        self._queues: dict[tuple[str, str], deque[Reply]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._srv: socketserver.BaseServer | None = None
        self.url = ""

    # -- scripting
    def script(self, method: str, path: str, *replies: Reply) -> None:
        with self._lock:
            self._queues[(method, path)].extend(replies)

    def dispatch(self, rec: Recorded) -> Reply:
        with self._lock:
            self.requests.append(rec)
            queue = self._queues.get((rec.method, rec.path))
            if queue:
                return queue.popleft()
        if self.fallback is not None:
            return self.fallback(rec)
        return Reply(404, {"error": f"no route {rec.path}", "error_code": "not_found"})

    def calls(self, method: str | None = None, path: str | None = None) -> list[Recorded]:
        with self._lock:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method) and (path is None or r.path == path)
            ]

    # -- lifecycle
    @property
    def client_kwargs(self) -> dict[str, Any]:
        if self.kind == "uds":
            return {"unix_socket": self.socket_path}
        return {"base_url": self.url}

    def start(self) -> ScriptedServer:
        srv: socketserver.BaseServer
        if self.kind == "uds":
            assert self.socket_path is not None
            srv = _UnixServer(self.socket_path, _Handler)
        else:
            srv = _TCPServer(("127.0.0.1", 0), _Handler)
            self.url = f"http://127.0.0.1:{srv.server_address[1]}"
        setattr(srv, "scripted", self)  # noqa: B010 - the handler reads it
        self._srv = srv
        threading.Thread(
            target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._srv is not None:
            self._srv.shutdown()
            self._srv.server_close()
            self._srv = None
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
