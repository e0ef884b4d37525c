"""A local TCP port forwarded to a sandbox port through the gateway's connect URL.

The gateway reaches a sandbox's exposed port over a WebSocket:
``POST /v1/sandboxes/{id}/connect-url {port, ttl_seconds}`` mints
``wss://.../connect?port=<p>&t=<token>``, and each WebSocket opened on it is
one TCP connection to the guest port, raw bytes in binary messages. A
:class:`PortForward` listens on ``127.0.0.1:<free port>`` and opens one such
WebSocket per accepted connection, so plain HTTP and WebSocket clients (such
as OpenEnv's) can use ``http://127.0.0.1:<port>``. Like the node's service
bridges, it relays only connections whose socket belongs to this process's
uid or root (:mod:`collimate_rl._peer`): another local user cannot ride the
tunnel. It runs its own asyncio loop in a daemon thread;
:meth:`PortForward.close` stops it and every connection. The URL is minted
again when it is about to expire.

>>> fwd = PortForward(lambda: "ws://127.0.0.1:9/connect?port=8000&t=x")
>>> fwd.start().url.startswith("http://127.0.0.1:")
True
>>> fwd.close(); fwd.closed
True
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from collimate_rl._peer import connection_is_allowed, default_allowed_uids

__all__ = ["PortForward"]

_CHUNK = 65536


class PortForward:
    """Forward ``127.0.0.1:<local_port>`` to a WebSocket tunnel URL.

    Args:
        mint: returns a fresh connect URL (called in a worker thread).
        ttl_seconds: how long a minted URL is valid; re-minted at half of it.
        local_port: 0 picks a free port.
    """

    def __init__(
        self, mint: Callable[[], str], *, ttl_seconds: float = 3600.0, local_port: int = 0
    ) -> None:
        self._mint = mint
        self._ttl = float(ttl_seconds)
        self._want_port = int(local_port)
        self._minted: tuple[str, float] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self.port = 0
        self.closed = False
        #: whose connections are relayed: this process's uid and root
        self.allowed_uids = default_allowed_uids()
        #: connections dropped because their socket belonged to another uid
        self.refused = 0

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> PortForward:
        """Listen (raises ``OSError`` if the port cannot be bound); returns ``self``."""
        loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="collimate-port-forward", daemon=True)
        self._thread.start()
        listening = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._on_client, "127.0.0.1", self._want_port), loop
        )
        try:
            self._server = listening.result(timeout=30)
        except BaseException:
            self.close()
            raise
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def fresh_url(self) -> str:
        """A connect URL, minted again when half its lifetime has passed."""
        now = time.monotonic()
        if self._minted is None or now - self._minted[1] > self._ttl / 2:
            self._minted = (self._mint(), now)
        return self._minted[0]

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from websockets.asyncio.client import connect

        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            if not await connection_is_allowed(writer, self.allowed_uids):
                self.refused += 1
                return
            url = await asyncio.to_thread(self.fresh_url)
            async with connect(url, max_size=None, compression=None, open_timeout=10) as ws:
                upstream = asyncio.create_task(_tcp_to_ws(reader, ws))
                try:
                    await _ws_to_tcp(ws, writer)  # ends when the guest side closes
                finally:
                    upstream.cancel()
                    await asyncio.gather(upstream, return_exceptions=True)
        except (asyncio.CancelledError, Exception):  # a failed tunnel drops this connection only
            pass
        finally:
            self._conns.discard(task)
            writer.close()

    def close(self) -> None:
        """Stop listening and drop every connection. Idempotent."""
        if self.closed:
            return
        self.closed = True
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            conns = list(self._conns)
            for task in conns:
                task.cancel()
            await asyncio.gather(*conns, return_exceptions=True)
            loop.stop()

        with contextlib.suppress(RuntimeError):  # the loop already stopped
            asyncio.run_coroutine_threadsafe(shutdown(), loop)
        thread.join(timeout=10)


async def _tcp_to_ws(reader: asyncio.StreamReader, ws: Any) -> None:
    while True:
        data = await reader.read(_CHUNK)
        if not data:
            break
        await ws.send(data)
    await ws.close()


async def _ws_to_tcp(ws: Any, writer: asyncio.StreamWriter) -> None:
    try:
        async for message in ws:
            writer.write(message if isinstance(message, bytes) else message.encode())
            await writer.drain()
    finally:
        if writer.can_write_eof():
            with contextlib.suppress(OSError):
                writer.write_eof()
