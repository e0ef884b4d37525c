"""Serving a collimate env through openenv-core's own server (HTTP and WebSocket sessions)."""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

from openenv.core.env_server.http_server import create_fastapi_app

from collimate_rl._binds import DEFAULT_HOST, exposure_warning
from collimate_rl.openenv._environment import CollimateEnvironment
from collimate_rl.openenv._models import CollimateAction, CollimateObservation

__all__ = ["create_app", "serve"]

logger = logging.getLogger("collimate_rl.openenv")


def create_app(
    env_id: str = "collimate/Code-v0",
    *,
    max_concurrent_envs: int = 16,
    session_timeout: float | None = None,
    **env_kwargs: Any,
) -> Any:
    """An OpenEnv FastAPI app serving ``env_id``: each WebSocket session gets its own env.

    The app is openenv-core's (``/ws`` sessions, ``/reset``, ``/step``,
    ``/state``, ``/health``, ``/schema``, ``/metadata``); only the env is ours.

    Args:
        env_id: a ``collimate/`` Gymnasium id.
        max_concurrent_envs: WebSocket sessions served at once.
        session_timeout: reap sessions idle this long (seconds).
        **env_kwargs: for the env (``unix_socket=``, ``base_url=``, ``template=``, ...).

    >>> app = create_app("collimate/Code-v0", max_concurrent_envs=4)
    >>> sorted(r.path for r in app.routes if r.path in ("/ws", "/reset", "/step", "/health"))
    ['/health', '/reset', '/step', '/ws']
    """
    from openenv.core.env_server.types import ConcurrencyConfig

    factory = functools.partial(CollimateEnvironment, env_id, env_kwargs)
    config = ConcurrencyConfig(
        max_concurrent_envs=max_concurrent_envs, session_timeout=session_timeout
    )
    return create_fastapi_app(
        factory, CollimateAction, CollimateObservation, concurrency_config=config
    )


def serve(
    env_id: str | None = None,
    *,
    host: str = DEFAULT_HOST,
    port: int = 8000,
    max_concurrent_envs: int = 16,
    **env_kwargs: Any,
) -> None:
    """Run the server with uvicorn (port 8000: OpenEnv's container convention); blocks.

    ``env_id`` defaults to ``$COLLIMATE_ENV_ID``, else ``collimate/Code-v0``.
    ``host`` defaults to loopback; any wider address logs a warning (every
    host that reaches the port can run code in the sandboxes).
    """
    import uvicorn

    warning = exposure_warning(
        host,
        "the OpenEnv server",
        hint="it runs their code in sandboxes: expose it only on the trainer's private "
        "network, see docs/security.md",
    )
    if warning is not None:
        logger.warning("%s", warning)

    app = create_app(
        env_id or os.environ.get("COLLIMATE_ENV_ID") or "collimate/Code-v0",
        max_concurrent_envs=max_concurrent_envs,
        **env_kwargs,
    )
    uvicorn.run(app, host=host, port=port)
