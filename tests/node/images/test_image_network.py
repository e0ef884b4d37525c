"""``-net`` egress on an image template: a networked image template's sessions (session
servers with the egress relay) reach the stand-in internet through the node's proxy as
their policy allows, with the image's own python3 and nothing direct; forks stay networked.

The stand-in internet is an HTTP server on ``127.0.0.2`` (``origin.test``), as in
``tests/node/egress``.
"""

from __future__ import annotations

import http.server
import json
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collimate_rl.node import LocalNode

from ._rootfs import rootfs_layout

pytestmark = [pytest.mark.bwrap]

PROBE = r"""
import json, os, socket, sys, urllib.request
out = {"python": sys.version.split()[0], "proxy": os.environ.get("HTTP_PROXY")}
try:
    out["body"] = urllib.request.urlopen(URL, timeout=20).read().decode()
except Exception as e:
    out["error"] = str(e)
try:
    socket.create_connection(("127.0.0.2", PORT), timeout=5).close()
    out["direct"] = "connected"
except OSError as e:
    out["direct"] = type(e).__name__
print(json.dumps(out))
"""


class _Origin(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture(scope="module")
def origin() -> Iterator[int]:
    server = _Server(("127.0.0.2", 0), _Origin)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def client(require_bwrap: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    flags = ("--egress-resolve-only", "--egress-resolve", "origin.test=127.0.0.2")
    flags += ("--egress-internet", "127.0.0.2/32")
    store = tmp_path_factory.mktemp("net-store")
    with LocalNode(image_store=store, pool_size=0, extra_args=flags) as node:
        c = node.client()
        layout: Path = rootfs_layout("trixie-py", tmp_path_factory.mktemp("net") / "trixie")
        c.bake_template("trixie-net", [], image=f"oci:{layout}:v1", network=True)
        yield c
        c.close()


def _probe(client: Any, sid: str, port: int) -> dict[str, Any]:
    code = f"URL = 'http://origin.test:{port}/from-image'\nPORT = {port}\n" + PROBE
    result = client.session_exec(sid, code=code, timeout_seconds=60)
    assert result.exit_code == 0, result.stdout
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def test_an_image_session_reaches_out_as_its_policy_allows(client: Any, origin: int) -> None:
    allowed = str(client.create_session("trixie-net", egress={"allow": ["origin.test"]}).session_id)
    denied = str(client.create_session("trixie-net", egress={"mode": "none"}).session_id)
    try:
        got = _probe(client, allowed, origin)
        assert got["python"].startswith("3.13") and got["proxy"] == "http://127.0.0.1:3128"
        assert got["body"] == "hello /from-image" and got["direct"] != "connected", got
        got = _probe(client, denied, origin)
        assert "body" not in got and "403" in got["error"], got
        info = client.get_session(allowed)
        assert info["egress"]["hosts"]["origin.test"]["allowed"] == 1
        # a fork of a networked image session is networked under its parent's policy
        client.session_exec(allowed, command="echo parent > /state")
        (child,) = client.fork_session(allowed, 1).children
        child_id = str(child["id"] if isinstance(child, dict) else child.id)
        try:
            out = client.session_exec(child_id, command="cat /state")
            assert out.stdout == "parent\n"
            assert _probe(client, child_id, origin)["body"] == "hello /from-image"
        finally:
            client.delete_session(child_id)
    finally:
        client.delete_session(allowed)
        client.delete_session(denied)
