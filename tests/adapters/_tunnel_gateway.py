"""A contract-faithful fake of the gateway's sandbox and ingress routes, over a real node.

Sandboxes are sessions of a real local node (the gateway fronts nodes).
Implements ``POST /v1/sandboxes``, ``DELETE /v1/sandboxes/{id}``,
``POST /v1/sandboxes/{id}/connect-url {port, ttl_seconds}`` (409
``port_not_exposed`` for a port the template does not expose; a TTL clamped
to 1..3600) and the tunnel it mints: ``GET /connect?port=<p>&t=<token>``
upgraded to a WebSocket whose binary messages are the raw bytes of one TCP
connection to the guest port. Errors use the gateway envelope ``{code,
message}``. The create response carries ``endpoints`` as the real gateway's
node-internal DNAT addresses (unreachable from a client: it must tunnel).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
import threading
import time
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from collimate_rl.errors import CollimateError


class TunnelGateway:
    """Serves the routes above on ``127.0.0.1:<free port>`` (:attr:`base_url`)."""

    def __init__(self, node_client: Any, api_key: str = "col_pro_test") -> None:
        self.node = node_client
        self.api_key = api_key
        self.sandboxes: dict[str, dict[str, str]] = {}  # id -> node endpoints
        self.tokens: dict[str, tuple[str, int, float]] = {}  # token -> (id, port, expiry)
        self.minted = 0
        self.tunnels_open = 0
        app = Starlette(
            routes=[
                Route("/v1/sandboxes", self.create, methods=["POST"]),
                Route("/v1/sandboxes/{id}", self.delete, methods=["DELETE"]),
                Route("/v1/sandboxes/{id}/connect-url", self.connect_url, methods=["POST"]),
                WebSocketRoute("/connect", self.tunnel),
            ]
        )
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", lifespan="off", ws="websockets-sansio")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        while not self._server.started:
            time.sleep(0.01)

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    # -- routes -------------------------------------------------------------

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {self.api_key}"

    @staticmethod
    def _error(status: int, code: str, message: str) -> JSONResponse:
        return JSONResponse({"code": code, "message": message}, status_code=status)

    async def create(self, request: Request) -> JSONResponse:
        if not self._authorized(request):
            return self._error(401, "unauthorized", "bad key")
        body = await request.json()
        try:
            resp = await asyncio.to_thread(self.node.create_session, body["template"])
        except CollimateError as exc:
            status = exc.status or 502
            return self._error(status, "not_found" if status == 404 else "upstream_error", str(exc))
        self.sandboxes[resp.session_id] = dict(resp.endpoints)
        internal = {port: f"10.200.0.2:{port}" for port in resp.endpoints}
        return JSONResponse(
            {
                "id": resp.session_id,
                "fork_time_ms": resp.fork_time_ms,
                "create_time_ms": resp.create_time_ms,
                "endpoints": internal,
            }
        )

    async def delete(self, request: Request) -> JSONResponse:
        sandbox_id = request.path_params["id"]
        if self.sandboxes.pop(sandbox_id, None) is None:
            return self._error(404, "not_found", "no such sandbox")
        for token, (sid, _, _) in list(self.tokens.items()):
            if sid == sandbox_id:
                del self.tokens[token]
        await asyncio.to_thread(self.node.delete_session, sandbox_id)
        return JSONResponse({"deleted": True, "id": sandbox_id})

    async def connect_url(self, request: Request) -> JSONResponse:
        sandbox_id = request.path_params["id"]
        if sandbox_id not in self.sandboxes:
            return self._error(404, "not_found", "no such sandbox")
        body = await request.json()
        port, ttl = int(body["port"]), max(1, min(3600, int(body["ttl_seconds"])))
        if str(port) not in self.sandboxes[sandbox_id]:
            return self._error(409, "port_not_exposed", f"port {port} is not exposed")
        token = secrets.token_urlsafe(16)
        self.tokens[token] = (sandbox_id, port, time.monotonic() + ttl)
        self.minted += 1
        url = f"ws://127.0.0.1:{self.port}/connect?port={port}&t={token}"
        return JSONResponse({"url": url, "expires_at": "2099-01-01T00:00:00Z"})

    async def tunnel(self, ws: WebSocket) -> None:
        grant = self.tokens.get(ws.query_params.get("t", ""))
        if grant is None or grant[2] < time.monotonic():
            await ws.close(code=4403)
            return
        sandbox_id, port, _ = grant
        if str(port) != ws.query_params.get("port"):
            await ws.close(code=4400)
            return
        host, guest_port = self.sandboxes[sandbox_id][str(port)].rsplit(":", 1)
        try:
            reader, writer = await asyncio.open_connection(host, int(guest_port))
        except OSError:
            await ws.close(code=1011)
            return
        await ws.accept()
        self.tunnels_open += 1

        async def upstream() -> None:
            with contextlib.suppress(WebSocketDisconnect):
                while True:
                    data = await ws.receive_bytes()
                    writer.write(data)
                    await writer.drain()
            with contextlib.suppress(OSError):
                writer.write_eof()

        task = asyncio.create_task(upstream())
        try:
            while data := await reader.read(65536):
                await ws.send_bytes(data)
        except OSError:
            pass
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            writer.close()
            self.tunnels_open -= 1
            with contextlib.suppress(Exception):
                await ws.close()
