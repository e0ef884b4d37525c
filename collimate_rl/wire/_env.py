"""Transport resolution from explicit arguments and the environment (pure).

The order (first match wins) is the contract's:

1. ``unix_socket`` argument -> daemon over that unix socket
2. ``api_key`` argument -> gateway (``base_url`` is then the gateway origin)
3. ``base_url`` argument -> daemon over TCP
4. ``$COLLIMATE_SERVE_SOCKET`` -> daemon over that unix socket
5. ``$COLLIMATE_API_KEY`` -> gateway
6. ``$COLLIMATE_SERVE_URL`` -> daemon over TCP
7. :data:`DEFAULT_SESSION_SOCKET` exists -> daemon over it
8. otherwise -> daemon at :data:`DEFAULT_SERVE_URL`

>>> resolve_transport(unix_socket="/tmp/x.sock", api_key="col_pro_x_y", environ={})
Resolution(kind='daemon_uds', target='/tmp/x.sock', api_key=None, rule=1)
>>> resolve_transport(environ={}, default_socket="/nonexistent.sock")
Resolution(kind='daemon_tcp', target='http://127.0.0.1:8080', api_key=None, rule=8)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "DEFAULT_SERVE_URL",
    "DEFAULT_SESSION_SOCKET",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_SERVE_SOCKET",
    "ENV_SERVE_URL",
    "Resolution",
    "resolve_transport",
]

#: The in-pod SESSION socket (serves only ``/v1/sessions*`` and ``/v1/exec``).
DEFAULT_SESSION_SOCKET: str = "/run/collimate-session/serve.sock"
#: The daemon's default TCP address.
DEFAULT_SERVE_URL: Final = "http://127.0.0.1:8080"

ENV_SERVE_SOCKET: Final = "COLLIMATE_SERVE_SOCKET"
ENV_API_KEY: Final = "COLLIMATE_API_KEY"
ENV_BASE_URL: Final = "COLLIMATE_BASE_URL"
ENV_SERVE_URL: Final = "COLLIMATE_SERVE_URL"

Kind = Literal["daemon_uds", "daemon_tcp", "gateway"]


@dataclass(frozen=True)
class Resolution:
    """Which client to build.

    Attributes:
        kind: ``daemon_uds``, ``daemon_tcp`` or ``gateway``.
        target: the socket path, the daemon URL, or the gateway origin
            (``None``: the gateway client's own default).
        api_key: the gateway key (gateway only).
        rule: the number (1-8) of the rule that matched.
    """

    kind: Kind
    target: str | None
    api_key: str | None = None
    rule: int = 0


def resolve_transport(
    base_url: str | None = None,
    *,
    api_key: str | None = None,
    unix_socket: str | None = None,
    environ: Mapping[str, str] | None = None,
    default_socket: str | None = None,
    allow_gateway: bool = True,
) -> Resolution:
    """Apply the contract's resolution order; ``allow_gateway=False`` skips the key rules.

    Args:
        base_url: explicit URL (the gateway origin when a key is given).
        api_key: explicit gateway key.
        unix_socket: explicit daemon socket path.
        environ: the environment (default ``os.environ``).
        default_socket: the rule-7 socket path (default :data:`DEFAULT_SESSION_SOCKET`).
        allow_gateway: ``False`` for ``CollimateClient.from_env``.
    """
    env = os.environ if environ is None else environ
    if unix_socket:
        return Resolution("daemon_uds", unix_socket, rule=1)
    if api_key and allow_gateway:
        return Resolution("gateway", base_url, api_key=api_key, rule=2)
    if base_url:
        return Resolution("daemon_tcp", base_url, rule=3)
    if env.get(ENV_SERVE_SOCKET):
        return Resolution("daemon_uds", env[ENV_SERVE_SOCKET], rule=4)
    if env.get(ENV_API_KEY) and allow_gateway:
        return Resolution("gateway", None, api_key=env[ENV_API_KEY], rule=5)
    if env.get(ENV_SERVE_URL):
        return Resolution("daemon_tcp", env[ENV_SERVE_URL], rule=6)
    sock = DEFAULT_SESSION_SOCKET if default_socket is None else default_socket
    if os.path.exists(sock):
        return Resolution("daemon_uds", sock, rule=7)
    return Resolution("daemon_tcp", DEFAULT_SERVE_URL, rule=8)
