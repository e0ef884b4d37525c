"""Request ids: every response carries ``X-Request-Id``, and the node's log lines name it.

A client may send its own ``X-Request-Id`` (1-128 characters of ``A-Z a-z 0-9 . _ : -``);
the node uses it as it is. Otherwise the node makes one, ``req_<16 hex>``. While a
request is served, :data:`REQUEST_ID` holds its id, so every log line written on
its behalf (an unhandled error's traceback, an infrastructure error) carries it
(:mod:`collimate_rl.node.logs` puts it in the line). When the response has gone,
one access line is logged: at DEBUG for a success, INFO for a 4xx, WARNING for a
5xx; and the request is counted in ``collimate_http_requests_total``.

The SDK reads the header back: a :class:`~collimate_rl.errors.CollimateError`
raised for a node's error response has it as ``err.request_id``, the key to that
request's lines in the node's log. A real daemon sends no such header; the id is
then ``None``.

>>> accepted_id([(b"x-request-id", b"trainer-7.step-12")])
'trainer-7.step-12'
>>> accepted_id([(b"x-request-id", b"bad id\\r\\nSet-Cookie: x")]) is None
True
"""

from __future__ import annotations

import contextvars
import logging
import re
import secrets
import time
from collections.abc import Iterable
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from collimate_rl.node.metrics import NodeMetrics

__all__ = [
    "HEADER",
    "REQUEST_ID",
    "RequestIdMiddleware",
    "accepted_id",
    "new_request_id",
    "route_label",
]

#: The header, both ways (lower case, as ASGI spells headers).
HEADER: Final = b"x-request-id"
#: The id of the request being served in this task (``None`` outside a request).
REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "collimate_request_id", default=None
)

_VALID: Final = re.compile(rb"[A-Za-z0-9._:\-]{1,128}")

access_logger = logging.getLogger("collimate_rl.node.access")


def new_request_id() -> str:
    """A fresh id, ``req_<16 hex>``."""
    return f"req_{secrets.token_hex(8)}"


def accepted_id(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The client's ``X-Request-Id`` when it is well formed (else ``None``: the node makes one)."""
    for name, value in headers:
        if name == HEADER:
            return value.decode("ascii") if _VALID.fullmatch(value) else None
    return None


#: Paths that are their own route label; any other path outside the
#: ``/v1/sessions/{id}`` family is ``other`` (a client picks paths: no label per path).
_STATIC_ROUTES: Final = frozenset(
    {
        "/v1/health",
        "/health",
        "/metrics",
        "/v1/sessions",
        "/v1/exec",
        "/exec",
        "/v1/exec/batch",
        "/v1/templates",
        "/v1/sessions/delete",
    }
)


def route_label(method: str, path: str) -> str:
    """A request's ``route`` label: the method and the route's template, never an id.

    >>> route_label("POST", "/v1/sessions/ses_abc/exec")
    'POST /v1/sessions/{id}/exec'
    >>> route_label("GET", "/v1/sessions/ses_abc"), route_label("GET", "/etc/passwd")
    ('GET /v1/sessions/{id}', 'GET other')
    """
    if method not in ("GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"):
        method = "OTHER"
    if path in _STATIC_ROUTES:
        return f"{method} {path}"
    parts = path.split("/")
    if len(parts) >= 4 and parts[1] == "v1" and parts[2] == "sessions" and parts[3]:
        if len(parts) == 4:
            return f"{method} /v1/sessions/{{id}}"
        if len(parts) == 5 and parts[4] in ("exec", "fork"):
            return f"{method} /v1/sessions/{{id}}/{parts[4]}"
    return f"{method} other"


class RequestIdMiddleware:
    """Give every HTTP request an id, answer it in ``X-Request-Id``, count and log it.

    Outermost, so even a 401 or a 413 carries its id.

    Args:
        app: the node's app.
        metrics: the node's metrics (``collimate_http_requests_total``).
    """

    def __init__(self, app: ASGIApp, metrics: NodeMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = accepted_id(scope.get("headers", ())) or new_request_id()
        raw_id = request_id.encode("ascii")
        status = 500
        start = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = list(message.get("headers", ()))
                headers.append((HEADER, raw_id))
                message = {**message, "headers": headers}
            await send(message)

        token = REQUEST_ID.set(request_id)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)
            method, path = str(scope.get("method", "")), str(scope.get("path", ""))
            self.metrics.request(route_label(method, path), status)
            level = (
                logging.WARNING
                if status >= 500
                else logging.INFO
                if status >= 400
                else logging.DEBUG
            )
            if access_logger.isEnabledFor(level):
                ms = (time.perf_counter() - start) * 1e3
                access_logger.log(
                    level,
                    "%s %s %d %.1fms",
                    method,
                    path,
                    status,
                    ms,
                    extra={
                        "request_id": request_id,
                        "method": method,
                        "path": path,
                        "status": status,
                        "duration_ms": round(ms, 3),
                    },
                )
