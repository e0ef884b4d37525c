"""The wire layer: clients of the node-local daemon and of the managed gateway.

>>> from collimate_rl.wire import CollimateClient, connect
>>> isinstance(connect("http://127.0.0.1:9"), CollimateClient)
True
"""

from collimate_rl.wire._connect import AsyncSessionClient, SessionClient, connect, connect_async
from collimate_rl.wire._env import (
    DEFAULT_SERVE_URL,
    DEFAULT_SESSION_SOCKET,
    Resolution,
    resolve_transport,
)
from collimate_rl.wire._gateway_flows import (
    CDP_PORT,
    CONNECT_URL_MAX_TTL,
    DEFAULT_GATEWAY_URL,
    FORK_CAPS,
)
from collimate_rl.wire.daemon import AsyncCollimateClient, CollimateClient
from collimate_rl.wire.gateway import AsyncGatewayClient, GatewayClient
from collimate_rl.wire.models import (
    ConnectURL,
    CreateSessionResponse,
    DeleteResponse,
    ExecResponse,
    ForkChild,
    ForkResponse,
    Health,
    ImageInfo,
    SessionInfo,
    StateResponse,
    TemplateInfo,
    Usage,
    WireModel,
)

__all__ = [
    "CDP_PORT",
    "CONNECT_URL_MAX_TTL",
    "DEFAULT_GATEWAY_URL",
    "DEFAULT_SERVE_URL",
    "DEFAULT_SESSION_SOCKET",
    "FORK_CAPS",
    "AsyncCollimateClient",
    "AsyncGatewayClient",
    "AsyncSessionClient",
    "CollimateClient",
    "ConnectURL",
    "CreateSessionResponse",
    "DeleteResponse",
    "ExecResponse",
    "ForkChild",
    "ForkResponse",
    "GatewayClient",
    "Health",
    "ImageInfo",
    "Resolution",
    "SessionClient",
    "SessionInfo",
    "StateResponse",
    "TemplateInfo",
    "Usage",
    "WireModel",
    "connect",
    "connect_async",
    "resolve_transport",
]
