"""Error envelopes: every failure leaves the node as ``{error, error_code}``.

Handlers raise :class:`NodeError` with a contract code; the status comes from
:data:`collimate_rl.errors.ERROR_CODES`. Validation errors, malformed JSON,
unknown routes, wrong methods and unexpected exceptions are all translated
here, so a client never sees FastAPI's default 422 shape, an HTML page or a
traceback.

>>> err = NodeError("no_such_session", "no session 'ses_1'")
>>> err.status, envelope(err.code, err.message)
(404, {'error': "no session 'ses_1'", 'error_code': 'no_such_session'})
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from collimate_rl.errors import ERROR_CODES

__all__ = [
    "METHOD_NOT_ALLOWED",
    "CatchAllMiddleware",
    "NodeError",
    "envelope",
    "error_response",
    "install_error_handlers",
    "one_line",
]

logger = logging.getLogger("collimate_rl.node")

#: Not in the shared table (the daemon contract never names it): a known route
#: asked with the wrong method. Sent with status 405 and an ``Allow`` header.
METHOD_NOT_ALLOWED: Final = "method_not_allowed"

_STATUS_CODES: Final[dict[int, str]] = {
    400: "bad_request",
    404: "not_found",
    405: METHOD_NOT_ALLOWED,
    409: "session_busy",
    410: "session_gone",
    413: "payload_too_large",
    503: "at_capacity",
}


class NodeError(Exception):
    """A contract error the handlers raise; rendered as the envelope.

    Args:
        code: a key of :data:`~collimate_rl.errors.ERROR_CODES`.
        message: one short line for humans; never a traceback.
        extra: more top-level keys for the body (e.g. ``deleted``).
    """

    def __init__(self, code: str, message: str, *, extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = ERROR_CODES[code][0] if code in ERROR_CODES else 500
        self.extra = dict(extra or {})


def one_line(exc: BaseException, limit: int = 200) -> str:
    """``"Type: first line of the message"``, for envelopes and logs (never a traceback).

    >>> one_line(ValueError("bad path\\nmore detail"))
    'ValueError: bad path'
    """
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:limit]}" if lines else type(exc).__name__


def envelope(code: str, message: str) -> dict[str, Any]:
    """The contract's error body."""
    return {"error": message, "error_code": code}


def error_response(
    code: str,
    message: str,
    *,
    status: int | None = None,
    extra: dict[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """A JSON error response whose status defaults to the code's table status."""
    if status is None:
        status = ERROR_CODES[code][0] if code in ERROR_CODES else 500
    body = {**(extra or {}), **envelope(code, message)}
    return JSONResponse(body, status_code=status, headers=dict(headers) if headers else None)


def _describe(errors: Sequence[Any]) -> tuple[str, str]:
    """Pick the code and a one-line message for a list of pydantic errors."""
    first: dict[str, Any] = dict(errors[0]) if errors else {}
    for err in errors:
        loc = tuple(err.get("loc", ()))
        if "seed" in loc[-1:]:
            return "invalid_seed", "seed must be exactly 64 hex characters (32 bytes)"
        if loc[-1:] == ("template_id",) and err.get("type") == "missing":
            return "template_id_required", "template_id is required"
    if first.get("type") == "json_invalid":
        return "bad_request", "request body is not valid JSON"
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
    msg = str(first.get("msg", "invalid request"))
    return "bad_request", f"{where}: {msg}" if where else msg


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    code, message = _describe(errors)
    return error_response(code, message)


async def _on_node_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, NodeError):  # pragma: no cover - registered for NodeError only
        raise exc
    if exc.status >= 500 and exc.code not in ("at_capacity", "draining"):
        # an infrastructure error: its line (with the request id) is what an operator looks for
        logger.warning("%s: %s", exc.code, exc.message)
    return error_response(exc.code, exc.message, status=exc.status, extra=exc.extra)


async def _on_http_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, StarletteHTTPException):  # pragma: no cover
        raise exc
    code = _STATUS_CODES.get(exc.status_code, "internal_error")
    if exc.status_code == 404:
        message = f"no route {request.method} {request.url.path}"
    elif exc.status_code == 405:
        message = f"method {request.method} not allowed on {request.url.path}"
    else:
        message = str(exc.detail)
    return error_response(code, message, status=exc.status_code, headers=exc.headers)


def install_error_handlers(app: FastAPI) -> None:
    """Register the envelope handlers on ``app``."""
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(NodeError, _on_node_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)


class CatchAllMiddleware:
    """Turn any exception that escaped the handlers into a 500 envelope.

    Starlette's own catch-all answers with a plain-text page and re-raises;
    this one logs the traceback server-side and answers with the envelope.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            logger.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            response = error_response("internal_error", f"internal error: {type(exc).__name__}")
            await response(scope, receive, send)
