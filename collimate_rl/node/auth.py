"""The node's optional bearer token: ``collimate serve --token-file F``.

Off by default (the daemon contract has no auth). With a token every request,
``/v1/health`` included, must carry ``Authorization: Bearer <token>``; any
other gets 401 ``unauthorized`` before routing, so nothing is read, created
or run. The comparison is constant-time: both sides are hashed to fixed-size
digests and compared with :func:`hmac.compare_digest`, so neither the
token's content nor its length shows in the timing.

A second, read-only token (``serve --metrics-token-file F``) opens
``GET /metrics`` and nothing else: the credential a Prometheus server holds
cannot run code on the node.

>>> import asyncio
>>> async def app(scope, receive, send):
...     await send({"type": "http.response.start", "status": 200, "headers": []})
...     await send({"type": "http.response.body", "body": b"ran"})
>>> async def call(headers):
...     sent = []
...     async def send(message):
...         sent.append(message)
...     scope = {"type": "http", "method": "GET", "path": "/v1/health", "headers": headers}
...     await BearerTokenMiddleware(app, "t0ken")(scope, None, send)
...     return sent[0]["status"]
>>> asyncio.run(call([(b"authorization", b"Bearer t0ken")])), asyncio.run(call([]))
(200, 401)
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

from starlette.types import ASGIApp, Receive, Scope, Send

from collimate_rl._bearer import check_token
from collimate_rl.node.errors import error_response

__all__ = ["BearerTokenMiddleware"]

_CHALLENGE: Final = {"WWW-Authenticate": 'Bearer realm="collimate-node"'}


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


def _presented(scope: Scope) -> bytes:
    """The token of the request's ``Authorization: Bearer`` header (``b""`` if none)."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = bytes(value).partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" else b""
    return b""


class BearerTokenMiddleware:
    """Answer 401 ``unauthorized`` to any HTTP request without the node's token.

    Args:
        app: the node's app.
        token: the token requests must present.
        metrics_token: a token that opens ``GET /metrics`` only (``None``: none).
    """

    def __init__(self, app: ASGIApp, token: str, metrics_token: str | None = None) -> None:
        self.app = app
        self._expected = _digest(check_token(token).encode("ascii"))
        self._metrics = (
            _digest(check_token(metrics_token).encode("ascii")) if metrics_token else None
        )

    def _allowed(self, scope: Scope) -> bool:
        presented = _digest(_presented(scope))
        if hmac.compare_digest(presented, self._expected):
            return True
        return (
            self._metrics is not None
            and scope.get("method") == "GET"
            and scope.get("path") == "/metrics"
            and hmac.compare_digest(presented, self._metrics)
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        guarded = scope["type"] in ("http", "websocket")
        if guarded and not self._allowed(scope):
            response = error_response(
                "unauthorized",
                "missing or wrong token: this node requires Authorization: Bearer <token> "
                "(clients: token= or $COLLIMATE_SERVE_TOKEN)",
                headers=_CHALLENGE,
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
