"""The node's optional bearer token: ``collimate serve --token-file F``.

Off by default (the daemon contract has no auth). With a token every request,
``/v1/health`` included, must carry ``Authorization: Bearer <token>``; any
other gets 401 ``unauthorized`` before routing, so nothing is read, created
or run. The comparison is constant-time: both sides are hashed to fixed-size
digests and compared with :func:`hmac.compare_digest`, so neither the
token's content nor its length shows in the timing.

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
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = _digest(check_token(token).encode("ascii"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        guarded = scope["type"] in ("http", "websocket")
        if guarded and not hmac.compare_digest(_digest(_presented(scope)), self._expected):
            response = error_response(
                "unauthorized",
                "missing or wrong token: this node requires Authorization: Bearer <token> "
                "(clients: token= or $COLLIMATE_SERVE_TOKEN)",
                headers=_CHALLENGE,
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
