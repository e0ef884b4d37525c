"""The local sandbox node: an HTTP server speaking the Collimate daemon contract.

Start one for tests and notebooks with :class:`LocalNode` (a subprocess, only
``httpx`` needed in the caller) or in the foreground with :func:`serve` /
``collimate serve`` (needs the ``node`` extra: fastapi, uvicorn, pydantic,
prometheus-client).

>>> from collimate_rl.node import LocalNode
>>> LocalNode(isolation="none").socket_path is None  # not started yet
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from collimate_rl.node.local import LocalNode

if TYPE_CHECKING:
    from collimate_rl.node.server import serve

__all__ = ["LocalNode", "serve"]


def __getattr__(name: str) -> Any:
    # ``serve`` pulls in fastapi/uvicorn; load it only when asked for.
    if name == "serve":
        try:
            from collimate_rl.node.server import serve
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError(
                f"collimate_rl.node.serve needs the `node` extra: pip install 'collimate-rl[node]' ({exc})"
            ) from exc
        return serve
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
