"""A small contract-faithful fake of the managed gateway, served over real HTTP.

Sandboxes are :class:`ShellClient` sessions (so exec, upload and download
really run), forks copy them, and the tier's per-call fork cap answers 400
``bad_request`` above it. Templates advance one phase per status read
(``Pending`` → ``Converting`` → ``Distributing`` → ``Live``/converged) unless a
test scripts them. Errors use the gateway envelope ``{code, message}``.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from collimate_rl.errors import CollimateNotFoundError
from collimate_rl.sandbox._shell import ShellClient

FORK_CAPS = {"demo": 4, "pro": 32, "ent": 64}
PHASES = ["Pending", "Converting", "Distributing", "Live"]

Reply = tuple[int, Any]


class GatewayError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.reply: Reply = (status, {"code": code, "message": message})


class FakeGateway:
    """State and routes; :meth:`serve` starts the HTTP server."""

    def __init__(self, api_key: str) -> None:
        self.api_key = api_key
        self.fork_cap = FORK_CAPS.get(api_key.split("_")[1], 32)
        self.shell = ShellClient(templates=["python3", "py-data"])
        self.images = [
            {"id": "python3", "name": "python", "image": "python:3.12", "visibility": "public"},
            {"id": "py-data", "name": "py-data", "image": "py-data:1", "visibility": "public"},
            {"id": "tpl-own", "name": "mine", "image": "mine:1", "visibility": "private"},
        ]
        self.templates: dict[str, dict[str, Any]] = {}
        # template id -> list of statuses to hand out, in order (the last one repeats)
        self.scripts: dict[str, list[dict[str, Any]]] = {}
        self.calls: list[tuple[str, str, Any]] = []
        self.fork_counts: list[int] = []
        self.fail_fork_call: int | None = None
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._routes: list[tuple[str, re.Pattern[str], Callable[..., Reply]]] = [
            ("GET", re.compile(r"/v1/images"), self.list_images),
            ("POST", re.compile(r"/v1/templates"), self.create_template),
            ("GET", re.compile(r"/v1/templates/(?P<id>[^/]+)"), self.get_template),
            ("POST", re.compile(r"/v1/templates/(?P<id>[^/]+)/expect"), self.expect),
            ("POST", re.compile(r"/v1/templates/(?P<id>[^/]+)/release"), self.release),
            ("POST", re.compile(r"/v1/sandboxes"), self.create_sandbox),
            ("GET", re.compile(r"/v1/sandboxes"), self.list_sandboxes),
            ("GET", re.compile(r"/v1/sandboxes/(?P<id>[^/]+)"), self.get_sandbox),
            ("DELETE", re.compile(r"/v1/sandboxes/(?P<id>[^/]+)"), self.delete_sandbox),
            ("POST", re.compile(r"/v1/sandboxes/(?P<id>[^/]+)/exec"), self.exec),
            ("POST", re.compile(r"/v1/sandboxes/(?P<id>[^/]+)/fork"), self.fork),
        ]

    # -- plumbing ------------------------------------------------------------

    def handle(self, method: str, path: str, headers: Any, body: Any) -> Reply:
        if headers.get("Authorization") != f"Bearer {self.api_key}":
            return 401, {"code": "unauthorized", "message": "bad key"}
        with self._lock:
            self.calls.append((method, path, body))
        for verb, pattern, handler in self._routes:
            match = pattern.fullmatch(path)
            if verb == method and match:
                try:
                    return handler(body, **match.groupdict())
                except GatewayError as exc:
                    return exc.reply
                except CollimateNotFoundError:
                    return 404, {"code": "not_found", "message": "no such sandbox"}
        return 404, {"code": "not_found", "message": "no such route"}

    def serve(self) -> tuple[ThreadingHTTPServer, str]:
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args: Any) -> None:
                pass

            def _do(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                status, payload = gateway.handle(
                    self.command, self.path.split("?")[0], self.headers, body
                )
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _do

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
        return server, f"http://127.0.0.1:{server.server_address[1]}"

    def close(self) -> None:
        self.shell.close()

    # -- templates -----------------------------------------------------------

    def list_images(self, body: Any) -> Reply:
        return 200, {"images": self.images}

    def create_template(self, body: Any) -> Reply:
        tid = f"tpl-{next(self._ids)}"
        self.templates[tid] = {
            "id": tid,
            "name": body["name"],
            "image": body["image"],
            "declared": body["pool"]["width"],
            "reads": 0,
            "released": False,
        }
        return 200, {"id": tid, "name": body["name"], "image": body["image"], "phase": "Pending"}

    def get_template(self, body: Any, id: str) -> Reply:
        tpl = self.templates.get(id)
        if id in self.scripts:
            script = self.scripts[id]
            status = script.pop(0) if len(script) > 1 else script[0]
            return 200, {"id": id, **status}
        if tpl is None:
            raise GatewayError(404, "not_found", f"template {id} not found")
        phase = PHASES[min(tpl["reads"], 3)]
        tpl["reads"] += 1
        return 200, {
            "id": id,
            "name": tpl["name"],
            "image": tpl["image"],
            "phase": phase,
            "declared": 0,  # the handle backfills it
            "warm": tpl["declared"] if phase == "Live" else 0,
            "frozen": 0,
            "per_node": [{"node": "n1", "warm": 1, "frozen": 0}],
            "converge_state": "converged" if phase == "Live" else "converging",
        }

    def expect(self, body: Any, id: str) -> Reply:
        if id == "python3":
            raise GatewayError(403, "forbidden", "shared catalog image")
        return 200, {"id": id, "expected_width": body["width"]}

    def release(self, body: Any, id: str) -> Reply:
        return 200, {"id": id, "released": True, "released_at": "2026-01-01T00:00:00Z"}

    # -- sandboxes -----------------------------------------------------------

    def create_sandbox(self, body: Any) -> Reply:
        template = body["template"]
        if template.startswith("tpl-"):
            template = "python3"
        try:
            resp = self.shell.create_session(template)
        except CollimateNotFoundError:
            raise GatewayError(404, "not_found", f"template {body['template']} not found") from None
        return 200, {
            "id": resp["session_id"],
            "fork_time_ms": 0.4,
            "create_time_ms": 3.0,
            "label": body.get("label"),
            "secret_refs": body.get("secret_refs"),
        }

    def list_sandboxes(self, body: Any) -> Reply:
        rows = self.shell.list_sessions()
        return 200, {
            "sandboxes": [{"id": r["session_id"], "template": r["template_id"]} for r in rows]
        }

    def get_sandbox(self, body: Any, id: str) -> Reply:
        info = self.shell.get_session(id)
        return 200, {"id": id, "template": info["template_id"]}

    def delete_sandbox(self, body: Any, id: str) -> Reply:
        resp = self.shell.delete_session(id)
        if not resp["deleted"]:
            raise GatewayError(404, "not_found", "no such sandbox")
        return 200, {"deleted": True, "id": id}

    def exec(self, body: Any, id: str) -> Reply:
        kwargs = {k: body[k] for k in ("command", "code", "commands", "files", "seed") if k in body}
        return 200, self.shell.session_exec(id, timeout_seconds=body["timeout_seconds"], **kwargs)

    def fork(self, body: Any, id: str) -> Reply:
        count = int(body.get("count", 1))
        if count > self.fork_cap:
            raise GatewayError(400, "bad_request", f"count {count} exceeds the fan-out cap")
        with self._lock:
            self.fork_counts.append(count)
            call_index = len(self.fork_counts) - 1
        if call_index == self.fail_fork_call:
            raise GatewayError(502, "upstream_error", "fork failed upstream")
        resp = self.shell.fork_session(id, count)
        return 200, {"parent": id, "children": [{"id": c["session_id"]} for c in resp["children"]]}
