"""A contract-faithful fake of the managed gateway (the real one is unreachable here).

It checks the Bearer key on every request, answers the ``{code, message}``
envelope, enforces the tier's per-call fork cap (400 ``bad_request`` above
it) and keeps sandboxes in memory. Knobs let a test short a fork chunk or
fail an exec.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any

from ._server import Recorded, Reply

FORK_CAPS = {"demo": 4, "pro": 32, "ent": 64}


def envelope(status: int, code: str, message: str) -> Reply:
    return Reply(status, {"code": code, "message": message})


class FakeGateway:
    """Use as a :class:`ScriptedServer` fallback: ``srv.fallback = FakeGateway(key)``."""

    def __init__(self, api_key: str, prefix: str = "") -> None:
        self.api_key = api_key
        self.prefix = prefix
        tier = api_key.split("_")[1] if api_key.count("_") >= 2 else ""
        self.fork_cap = FORK_CAPS.get(tier, 32)
        self.sandboxes: dict[str, dict[str, Any]] = {}
        self.deleted: list[str] = []
        self.short_fork_chunk: int | None = None  # 0-based index of the chunk to short
        self.exec_reply: Reply | None = None
        self.create_without_id = False
        self._ids = itertools.count(1)
        self._fork_calls = 0
        self._routes: list[tuple[str, str, Callable[..., Reply]]] = [
            ("GET", r"/v1/health", self.health),
            ("GET", r"/v1/images", self.images),
            ("POST", r"/v1/templates", self.create_template),
            ("GET", r"/v1/templates", self.list_templates),
            ("GET", r"/v1/templates/(?P<id>[^/]+)", self.get_template),
            ("DELETE", r"/v1/templates/(?P<id>[^/]+)", self.delete_template),
            ("POST", r"/v1/templates/(?P<id>[^/]+)/expect", self.expect),
            ("POST", r"/v1/templates/(?P<id>[^/]+)/release", self.release),
            ("POST", r"/v1/sandboxes", self.create_sandbox),
            ("GET", r"/v1/sandboxes", self.list_sandboxes),
            ("GET", r"/v1/sandboxes/(?P<id>[^/]+)", self.get_sandbox),
            ("DELETE", r"/v1/sandboxes/(?P<id>[^/]+)", self.delete_sandbox),
            ("POST", r"/v1/sandboxes/(?P<id>[^/]+)/exec", self.exec),
            ("POST", r"/v1/sandboxes/(?P<id>[^/]+)/fork", self.fork),
            ("POST", r"/v1/sandboxes/(?P<id>[^/]+)/(?P<verb>suspend|resume)", self.state),
            ("POST", r"/v1/sandboxes/(?P<id>[^/]+)/connect-url", self.connect_url),
            ("GET", r"/v1/usage", self.usage),
        ]

    def __call__(self, rec: Recorded) -> Reply:
        if rec.headers.get("authorization") != f"Bearer {self.api_key}":
            return envelope(401, "unauthorized", "missing or invalid API key")
        if not rec.path.startswith(self.prefix):
            return envelope(404, "not_found", "no such route")
        path = rec.path[len(self.prefix) :]
        for method, pattern, handler in self._routes:
            match = re.fullmatch(pattern, path)
            if match and method == rec.method:
                return handler(rec, **match.groupdict())
        return envelope(404, "not_found", "no such route")

    # -- handlers
    def health(self, rec: Recorded) -> Reply:
        return Reply(200, {"status": "ok", "version": "gw-test"})

    def images(self, rec: Recorded) -> Reply:
        row = {"id": "python311", "name": "python", "image": "python:3.11", "visibility": "public"}
        return Reply(200, {"images": [row]})

    def create_template(self, rec: Recorded) -> Reply:
        body = rec.body or {}
        if self.api_key.startswith("col_demo_") and (body.get("ready") or {}).get("network"):
            return envelope(403, "network_requires_pro", "networked templates need Pro")
        return Reply(200, {"id": f"tpl-{body['name']}", "name": body["name"], "phase": "Pending"})

    def list_templates(self, rec: Recorded) -> Reply:
        return Reply(200, {"templates": [{"id": "python311", "visibility": "public"}]})

    def get_template(self, rec: Recorded, id: str) -> Reply:
        if id != "tpl-mine":
            return envelope(404, "not_found", "template not found")
        return Reply(200, {"id": id, "phase": "Live", "declared": 8, "warm": 8})

    def delete_template(self, rec: Recorded, id: str) -> Reply:
        if id == "python311":
            return envelope(403, "forbidden", "forbidden")
        return Reply(200, {"deleted": True, "id": id})

    def expect(self, rec: Recorded, id: str) -> Reply:
        return Reply(200, {"id": id, "expected_width": min(64, rec.body["width"])})

    def release(self, rec: Recorded, id: str) -> Reply:
        return Reply(200, {"id": id, "released": True, "released_at": "2026-01-01T00:00:00Z"})

    def _new_sandbox(self, template: str) -> dict[str, Any]:
        sid = f"sb-{next(self._ids)}"
        row = {"id": sid, "template": template, "state": "running"}
        self.sandboxes[sid] = row
        return row

    def create_sandbox(self, rec: Recorded) -> Reply:
        row = self._new_sandbox(rec.body["template"])
        if self.create_without_id:
            return Reply(201, {"fork_time_ms": 0.5})
        return Reply(201, {"id": row["id"], "fork_time_ms": 0.5, "create_time_ms": 2.0})

    def list_sandboxes(self, rec: Recorded) -> Reply:
        return Reply(200, {"sandboxes": list(self.sandboxes.values())})

    def get_sandbox(self, rec: Recorded, id: str) -> Reply:
        if id not in self.sandboxes:
            return envelope(404, "not_found", "sandbox not found")
        return Reply(200, self.sandboxes[id])

    def delete_sandbox(self, rec: Recorded, id: str) -> Reply:
        self.deleted.append(id)
        if self.sandboxes.pop(id, None) is None:
            return envelope(404, "not_found", "sandbox not found")
        return Reply(200, {"deleted": True, "id": id})

    def exec(self, rec: Recorded, id: str) -> Reply:
        if self.exec_reply is not None:
            return self.exec_reply
        if id not in self.sandboxes:
            return envelope(404, "not_found", "sandbox not found")
        return Reply(200, {"stdout": "ok\n", "stderr": "", "exit_code": 0, "seed": "0" * 64})

    def fork(self, rec: Recorded, id: str) -> Reply:
        count = int(rec.body["count"])
        if count > self.fork_cap:
            return envelope(
                400, "bad_request", f"count {count} exceeds fan-out cap {self.fork_cap}"
            )
        chunk = self._fork_calls
        self._fork_calls += 1
        if chunk == self.short_fork_chunk:
            count -= 1
        children = [{"id": self._new_sandbox("child")["id"]} for _ in range(count)]
        return Reply(200, {"parent": id, "children": children})

    def state(self, rec: Recorded, id: str, verb: str) -> Reply:
        return Reply(200, {"id": id, "state": "suspended" if verb == "suspend" else "running"})

    def connect_url(self, rec: Recorded, id: str) -> Reply:
        body = rec.body
        if self.api_key.startswith("col_demo_"):
            return envelope(403, "forbidden", "forbidden")
        if body["port"] == 5555:
            return envelope(409, "port_not_exposed", "port not exposed")
        url = f"wss://gw/connect?port={body['port']}&t=tok"
        if body.get("protocol"):
            url += f"&protocol={body['protocol']}"
        return Reply(200, {"url": url, "expires_at": "2026-01-01T00:10:00Z"})

    def usage(self, rec: Recorded) -> Reply:
        q = {k: v[0] for k, v in rec.query.items()}
        return Reply(
            200,
            {"from": q.get("from", "30d-ago"), "to": q.get("to", "now"), "totals": {"cpu_s": 1}},
        )
