"""Where the envs run their sandboxes: a shared embedded local node, or the caller's client.

The default backend is one :class:`~collimate_rl.node.LocalNode` per process,
started lazily by the first env that needs it and stopped at interpreter exit.
Pass ``client=`` (any client with the daemon session surface) or ``connect``
arguments (``base_url=``, ``api_key=``, ``unix_socket=``) to use a real daemon
or the gateway instead; nothing else changes.

>>> backend = Backend.from_kwargs(client=None, connect_kwargs={})
>>> backend.owns_node
True
"""

from __future__ import annotations

import atexit
import threading
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Backend", "shared_local_client"]

_lock = threading.Lock()
_node: Any = None
_client: Any = None


def shared_local_client() -> Any:
    """The process-wide client of the embedded local node, starting it on first use."""
    global _node, _client
    with _lock:
        if _client is None:
            from collimate_rl.node import LocalNode

            node = LocalNode()
            node.start()
            _node, _client = node, node.client()
            atexit.register(_stop_shared_node)
        return _client


def _stop_shared_node() -> None:
    global _node, _client
    with _lock:
        node, client = _node, _client
        _node = _client = None
    if client is not None:
        client.close()
    if node is not None:
        node.stop()


@dataclass
class Backend:
    """How an env reaches its sandboxes; resolves the client lazily."""

    client_arg: Any = None
    connect_kwargs: dict[str, Any] = field(default_factory=dict)
    _client: Any = None

    @classmethod
    def from_kwargs(cls, client: Any, connect_kwargs: dict[str, Any]) -> Backend:
        kwargs = {k: v for k, v in connect_kwargs.items() if v is not None}
        return cls(client_arg=client, connect_kwargs=kwargs)

    @property
    def owns_node(self) -> bool:
        """True when the envs use the shared embedded local node."""
        return self.client_arg is None and not self.connect_kwargs

    @property
    def client(self) -> Any:
        if self._client is None:
            if self.client_arg is not None:
                self._client = self.client_arg
            elif self.connect_kwargs:
                from collimate_rl import connect

                self._client = connect(**self.connect_kwargs)
            else:
                self._client = shared_local_client()
        return self._client
