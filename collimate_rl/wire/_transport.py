"""The transports: pooled keep-alive clients over TCP or a unix socket, and the two I/O
functions the drivers call. Nothing here knows the contract.

A daemon on a plain connection (a unix socket or ``http://``) gets the small HTTP/1.1
client of :mod:`collimate_rl.wire._http11`; TLS, a gateway and a caller's own ``httpx``
transport (tests, proxies) get httpx.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import httpx

from collimate_rl._bearer import bearer_headers
from collimate_rl.errors import CollimateUsageError
from collimate_rl.wire._core import RawResponse, Request
from collimate_rl.wire._http11 import AsyncNodeHTTP, NodeHTTP

__all__ = [
    "UDS_BASE",
    "async_send",
    "make_async_http",
    "make_async_node_http",
    "make_node_http",
    "make_sync_http",
    "node_auth_headers",
    "sync_send",
]

#: With a unix socket the host is irrelevant; every request dials the socket.
UDS_BASE = "http://localhost"

_HEADERS = {"Content-Type": "application/json"}
_LIMITS = httpx.Limits(max_connections=256, max_keepalive_connections=64, keepalive_expiry=30.0)


def node_auth_headers(token: str | None) -> dict[str, str]:
    """A node's ``Authorization`` header: ``token``, else ``$COLLIMATE_SERVE_TOKEN``, else none.

    >>> node_auth_headers("t0k")
    {'Authorization': 'Bearer t0k'}
    """
    try:
        return bearer_headers(token)
    except ValueError as exc:
        raise CollimateUsageError(str(exc)) from None


def make_sync_http(
    *,
    unix_socket: str | None = None,
    transport: httpx.BaseTransport | None = None,
    headers: Mapping[str, str] | None = None,
    trust_env: bool = False,
    tls: bool = True,
) -> httpx.Client:
    """A pooled keep-alive client; ``unix_socket`` dials that socket for every request.

    ``tls=False`` (plain ``http://`` or a unix socket) skips loading CA certificates.
    """
    if transport is None:
        transport = httpx.HTTPTransport(
            uds=unix_socket, limits=_LIMITS, trust_env=trust_env, verify=tls
        )
    return httpx.Client(
        transport=transport, headers={**_HEADERS, **(headers or {})}, trust_env=trust_env
    )


def make_async_http(
    *,
    unix_socket: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    headers: Mapping[str, str] | None = None,
    trust_env: bool = False,
    tls: bool = True,
) -> httpx.AsyncClient:
    """The async twin of :func:`make_sync_http`."""
    if transport is None:
        transport = httpx.AsyncHTTPTransport(
            uds=unix_socket, limits=_LIMITS, trust_env=trust_env, verify=tls
        )
    return httpx.AsyncClient(
        transport=transport, headers={**_HEADERS, **(headers or {})}, trust_env=trust_env
    )


def make_node_http(
    base: str,
    *,
    unix_socket: str | None = None,
    transport: httpx.BaseTransport | None = None,
    headers: Mapping[str, str] | None = None,
) -> httpx.Client | NodeHTTP:
    """A daemon client's pool: :class:`NodeHTTP` on a plain connection, else httpx.

    >>> type(make_node_http("http://127.0.0.1:8080")).__name__
    'NodeHTTP'
    >>> type(make_node_http("https://node.example")).__name__
    'Client'
    """
    if transport is None and base.startswith("http:"):
        return NodeHTTP(base, unix_socket=unix_socket, headers={**_HEADERS, **(headers or {})})
    return make_sync_http(
        unix_socket=unix_socket, transport=transport, headers=headers, tls=base.startswith("https:")
    )


def make_async_node_http(
    base: str,
    *,
    unix_socket: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    headers: Mapping[str, str] | None = None,
) -> httpx.AsyncClient | AsyncNodeHTTP:
    """The async twin of :func:`make_node_http`."""
    if transport is None and base.startswith("http:"):
        return AsyncNodeHTTP(base, unix_socket=unix_socket, headers={**_HEADERS, **(headers or {})})
    return make_async_http(
        unix_socket=unix_socket, transport=transport, headers=headers, tls=base.startswith("https:")
    )


def _content(req: Request) -> bytes | None:
    return None if req.body is None else json.dumps(req.body).encode("utf-8")


def sync_send(http: httpx.Client | NodeHTTP, base: str, req: Request) -> RawResponse:
    """Perform one attempt; httpx errors propagate to the driver."""
    if isinstance(http, NodeHTTP):
        return http.request(
            req.method, req.path, content=_content(req), params=req.params, timeout=req.timeout
        )
    resp = http.request(
        req.method,
        base + req.path,
        content=_content(req),
        params=dict(req.params) if req.params else None,
        timeout=req.timeout,
    )
    return RawResponse(
        resp.status_code, resp.reason_phrase, resp.content, resp.headers.get("x-request-id")
    )


async def async_send(
    http: httpx.AsyncClient | AsyncNodeHTTP, base: str, req: Request
) -> RawResponse:
    """The async twin of :func:`sync_send`."""
    if isinstance(http, AsyncNodeHTTP):
        return await http.request(
            req.method, req.path, content=_content(req), params=req.params, timeout=req.timeout
        )
    resp = await http.request(
        req.method,
        base + req.path,
        content=_content(req),
        params=dict(req.params) if req.params else None,
        timeout=req.timeout,
    )
    return RawResponse(
        resp.status_code, resp.reason_phrase, resp.content, resp.headers.get("x-request-id")
    )
