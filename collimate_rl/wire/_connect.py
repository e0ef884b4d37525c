"""``connect()``: one entry point that picks the daemon or the gateway."""

from __future__ import annotations

from typing import Any, TypeAlias

from collimate_rl.errors import CollimateUsageError
from collimate_rl.wire._env import Resolution, resolve_transport
from collimate_rl.wire.daemon import AsyncCollimateClient, CollimateClient
from collimate_rl.wire.gateway import AsyncGatewayClient, GatewayClient

__all__ = ["AsyncSessionClient", "SessionClient", "connect", "connect_async"]

#: Either client; both offer the session surface (create/exec/get/list/delete/fork).
SessionClient: TypeAlias = CollimateClient | GatewayClient
#: Either async client.
AsyncSessionClient: TypeAlias = AsyncCollimateClient | AsyncGatewayClient


def connect(
    base_url: str | None = None,
    *,
    api_key: str | None = None,
    unix_socket: str | None = None,
    **kwargs: Any,
) -> SessionClient:
    """A daemon or gateway client, chosen by the contract's order (first match wins).

    1. ``unix_socket`` -> daemon over it; 2. ``api_key`` -> gateway (``base_url``
    is then the gateway origin); 3. ``base_url`` -> daemon over TCP;
    4. ``$COLLIMATE_SERVE_SOCKET``; 5. ``$COLLIMATE_API_KEY``;
    6. ``$COLLIMATE_SERVE_URL``; 7. ``/run/collimate-session/serve.sock`` if it
    exists; 8. ``http://127.0.0.1:8080``.

    Args:
        base_url: daemon URL, or the gateway origin together with ``api_key``.
        api_key: a ``col_*`` gateway key.
        unix_socket: a daemon unix socket path.
        **kwargs: ``timeout``, ``retries``, ``backoff``, ``retry_budget``, ...
            forwarded to the client; ``token=`` (a node's bearer token, default
            ``$COLLIMATE_SERVE_TOKEN``) only to a daemon client.

    >>> connect("http://10.1.2.3:8080", retries=1)
    CollimateClient(base='http://10.1.2.3:8080')
    >>> connect("https://gw.example", api_key="col_pro_abcd1234_" + "s" * 32)
    GatewayClient(base='https://gw.example', tier='pro')
    """
    found = resolve_transport(base_url, api_key=api_key, unix_socket=unix_socket)
    return _build(found, CollimateClient, GatewayClient, kwargs)  # type: ignore[no-any-return]


def connect_async(
    base_url: str | None = None,
    *,
    api_key: str | None = None,
    unix_socket: str | None = None,
    **kwargs: Any,
) -> AsyncSessionClient:
    """The async twin of :func:`connect` (same order); returns an async client.

    >>> connect_async(unix_socket="/run/x.sock")
    AsyncCollimateClient(base='http://localhost')
    """
    found = resolve_transport(base_url, api_key=api_key, unix_socket=unix_socket)
    return _build(found, AsyncCollimateClient, AsyncGatewayClient, kwargs)  # type: ignore[no-any-return]


def _build(found: Resolution, daemon: type[Any], gateway: type[Any], kwargs: dict[str, Any]) -> Any:
    if found.kind == "gateway":
        if kwargs.get("token") is not None:
            raise CollimateUsageError(
                "token= is a node's bearer token; the gateway authenticates with api_key"
            )
        kwargs = {k: v for k, v in kwargs.items() if k != "token"}
        return gateway(found.api_key, found.target, **kwargs)
    if found.kind == "daemon_uds":
        return daemon(unix_socket=found.target, **kwargs)
    return daemon(found.target, **kwargs)
