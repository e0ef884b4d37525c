"""One session's door to the network: a unix socket on the node that serves its proxy.

Inside a networked session, a relay listens on the session's own
``127.0.0.1`` (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY`` point at it) and
forwards every connection to ``<sock_dir>/<key>.net.sock`` on the node. An
:class:`EgressGate` listens there: the socket it accepted on says which
session (and so which policy) a connection belongs to, so the session can
neither pick nor change its policy. Each connection is sniffed: a first byte
``0x05`` is SOCKS5, anything else an HTTP proxy request.

>>> import asyncio, os, tempfile
>>> from collimate_rl.node.egress.policy import NONE
>>> async def demo() -> tuple[bool, bool]:
...     with tempfile.TemporaryDirectory() as folder:
...         path = os.path.join(folder, "k.net.sock")
...         gate = EgressGate(path, NONE)
...         await gate.start()
...         listening = os.path.exists(path)
...         await gate.close()
...         return listening, os.path.exists(path)
>>> asyncio.run(demo())
(True, False)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from collimate_rl.node.egress.accounting import EgressStats
from collimate_rl.node.egress.entries import IPAddress
from collimate_rl.node.egress.http_proxy import HEAD_TIMEOUT, serve_http
from collimate_rl.node.egress.node_sockets import listening_here
from collimate_rl.node.egress.policy import EgressPolicy
from collimate_rl.node.egress.settings import EgressSettings
from collimate_rl.node.egress.socks import SOCKS_VERSION, serve_socks5
from collimate_rl.node.egress.upstream import Opener
from collimate_rl.node.stream_servers import close_stream_server

__all__ = ["EgressGate"]

#: Largest request head (or line) a client may send.
_HEAD_LIMIT: Final = 64 * 1024


class EgressGate:
    """The node-side proxy of one session, on a unix socket only that session can reach.

    Args:
        path: where to listen (the session relay's target).
        policy: the session's policy (fixed for the session's life).
        settings: the node's egress settings.
        owner: host uid that must be able to connect (the sandbox uid), when
            the node runs as root.
        is_node: whether an address and port is one of the node's own
            listening sockets (always refused).
        on_decision: told every proxy decision (see :class:`Opener`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        policy: EgressPolicy,
        settings: EgressSettings | None = None,
        *,
        owner: int | None = None,
        is_node: Callable[[IPAddress, int], bool] = listening_here,
        on_decision: Callable[[str, str], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.policy = policy
        self.settings = settings or EgressSettings()
        self.stats = EgressStats()
        self.owner = owner
        self.closed = False
        self._opener = Opener(
            policy, self.settings, self.stats, is_node=is_node, on_decision=on_decision
        )
        self._server: asyncio.AbstractServer | None = None
        self._conns: set[asyncio.Task[None]] = set()

    @property
    def active(self) -> int:
        """Connections being served now."""
        return len(self._conns)

    def info(self) -> dict[str, Any]:
        """``{"policy": {...}, "allowed", "denied", "failed", "bytes_out", "bytes_in", "hosts"}``."""
        return {"policy": self.policy.to_wire(), **self.stats.to_wire()}

    async def start(self) -> None:
        """Listen (replacing a stale socket file a crashed node left at ``path``)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._server = await asyncio.start_unix_server(
            self._on_client, path=str(self.path), limit=_HEAD_LIMIT
        )
        try:
            # The folder is shared with the template's (trusted) supervisor; make
            # sure what we chmod is the socket we just bound, not a planted link.
            if not stat.S_ISSOCK(os.lstat(self.path).st_mode):
                raise OSError(f"{self.path} is not the gate's socket")
            if self.owner is not None and os.geteuid() == 0:
                os.chown(self.path, self.owner, self.owner, follow_symlinks=False)
            os.chmod(self.path, 0o600)
        except OSError:
            await self.close()
            raise

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is None or self.closed or len(self._conns) >= self.settings.max_connections:
            writer.close()
            return
        self._conns.add(task)
        try:
            first = await asyncio.wait_for(reader.read(1), HEAD_TIMEOUT)
            if first == bytes([SOCKS_VERSION]):
                await serve_socks5(reader, writer, self._opener)
            elif first:
                await serve_http(first, reader, writer, self._opener)
            with contextlib.suppress(OSError, RuntimeError):
                await writer.drain()
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
            pass  # the client went away or sent garbage: nothing to answer
        except asyncio.CancelledError:
            pass  # the gate is closing
        finally:
            self._conns.discard(task)
            writer.close()

    async def close(self) -> None:
        """Stop listening, drop every connection and remove the socket file. Idempotent."""
        if self.closed:
            return
        self.closed = True
        await close_stream_server(self._server, self._conns)
        with contextlib.suppress(OSError):
            self.path.unlink()
