"""Host side of a session's service ports: TCP on the node's loopback -> the session's relay.

A session of a template that declares a service (see ``_sandbox/service.py``)
has no network interface but loopback, so nothing outside can connect to its
server. Its keeper relays a unix socket per declared port, in the host-shared
socket directory, to ``127.0.0.1:<port>`` inside the session. A
:class:`Bridge` listens on ``127.0.0.1:<ephemeral>`` on the node and pumps
every accepted connection to that unix socket: the session's ``endpoints``
entry (``{"8000": "127.0.0.1:41234"}``, the daemon contract's shape).

The port is private to the node's user: before relaying anything, the bridge
looks up who owns the connecting socket (:mod:`collimate_rl._peer`) and drops
the connection unless it is the node's uid or root. Any other local user gets
a closed connection and the service never sees it.

>>> import asyncio, tempfile, os
>>> async def demo() -> tuple[bool, bool]:
...     bridge = Bridge(os.path.join(tempfile.gettempdir(), "no-such-relay.sock"))
...     await bridge.start()
...     listening = bridge.port > 0
...     await bridge.close()
...     return listening, bridge.closed
>>> asyncio.run(demo())
(True, True)
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from collimate_rl._peer import connection_is_allowed, default_allowed_uids
from collimate_rl.node.stream_servers import close_stream_server

__all__ = ["Bridge", "ServiceFailed", "pump", "read_bounded", "wait_http"]

log = logging.getLogger("collimate_rl.node.runtime")

_CHUNK = 65536


class ServiceFailed(Exception):
    """The session's service exited or never answered its readiness probe."""


class Bridge:
    """Forward TCP connections on ``host:<ephemeral>`` to the unix socket ``target``.

    Args:
        target: the session's relay socket (``<key>.p<port>.sock``).
        host: where to listen (the node's loopback by default).
        allowed_uids: whose connections are relayed (default: the node's uid and root).
    """

    def __init__(
        self,
        target: str | Path,
        host: str = "127.0.0.1",
        allowed_uids: frozenset[int] | None = None,
    ) -> None:
        self.target = str(target)
        self.host = host
        self.allowed_uids = default_allowed_uids() if allowed_uids is None else allowed_uids
        self.port = 0
        self.closed = False
        #: connections dropped because their socket belonged to another uid
        self.refused = 0
        self._server: asyncio.AbstractServer | None = None
        self._conns: set[asyncio.Task[None]] = set()
        #: ``time.monotonic()`` of the last connection opened or closed
        self.last_used = time.monotonic()

    @property
    def active(self) -> int:
        """Connections being forwarded now."""
        return len(self._conns)

    @property
    def address(self) -> str:
        """``"<host>:<port>"`` (no scheme), the contract's ``endpoints`` value."""
        return f"{self.host}:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._on_client, self.host, 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        inner_writer: asyncio.StreamWriter | None = None
        try:
            if not await connection_is_allowed(writer, self.allowed_uids):
                self.refused += 1
                log.log(  # once per port at warning level: a flood must not flood the log
                    logging.WARNING if self.refused == 1 else logging.DEBUG,
                    "service port %s: refused a connection from %s (its socket belongs to "
                    "another user)",
                    self.address,
                    writer.get_extra_info("peername"),
                )
                return
            self.last_used = time.monotonic()
            inner_reader, inner_writer = await asyncio.open_unix_connection(self.target)
            await asyncio.gather(
                pump(reader, inner_writer), pump(inner_reader, writer), return_exceptions=True
            )
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            self._conns.discard(task)
            if inner_writer is not None:
                self.last_used = time.monotonic()
            for w in (writer, inner_writer):
                if w is not None:
                    w.close()

    async def close(self) -> None:
        """Stop listening and drop every forwarded connection. Idempotent."""
        if self.closed:
            return
        self.closed = True
        await close_stream_server(self._server, self._conns)


async def pump(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    on_bytes: Callable[[int], None] | None = None,
) -> None:
    """Copy ``reader`` to ``writer`` until EOF, then pass the EOF on (half-close).

    ``on_bytes(n)`` is called for every chunk copied (the egress proxy counts
    bytes with it). A failed write closes ``writer``.
    """
    try:
        while True:
            data = await reader.read(_CHUNK)
            if not data:
                break
            if on_bytes is not None:
                on_bytes(len(data))
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (OSError, RuntimeError):
        writer.close()


def read_bounded(path: Path, limit: int = 16384) -> str | None:
    """Up to ``limit`` trailing bytes of ``path`` (never following a symlink), or ``None``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, limit, max(0, size - limit))
    except OSError:
        return None
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")


async def wait_http(
    target: str | Path,
    http_path: str,
    timeout: float,
    failure: Callable[[], str | None],
) -> None:
    """Poll ``GET http_path`` through the relay ``target`` until it answers below 400.

    ``failure()`` returns why the service can no longer become ready (its
    command exited with an error), or ``None``. Raises :class:`ServiceFailed`.
    """
    path = http_path if http_path.startswith("/") else "/" + http_path
    request = f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while True:
        why = failure()
        if why is not None:
            raise ServiceFailed(why)
        writer: asyncio.StreamWriter | None = None
        try:
            reader, conn = await asyncio.wait_for(asyncio.open_unix_connection(str(target)), 2.0)
            writer = conn
            conn.write(request)
            await conn.drain()
            line = await asyncio.wait_for(reader.readline(), 2.0)
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                status = int(parts[1])
                if status < 400:
                    return
                last = f"HTTP {status}"
            else:
                last = "connection closed (nothing listening on the port yet?)"
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        finally:
            if writer is not None:
                writer.close()
        if time.monotonic() >= deadline:
            raise ServiceFailed(f"GET {path} did not answer within {timeout:g}s (last: {last})")
        await asyncio.sleep(0.05)
