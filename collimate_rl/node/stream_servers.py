"""Closing an asyncio stream server together with the connections it is serving.

The node's egress gates and service bridges both keep a set of per-connection
tasks beside their ``asyncio.Server``; closing one means: stop accepting,
cancel every live connection and wait for it, then wait (bounded) for the
server itself.

>>> import asyncio
>>> async def demo() -> bool:
...     server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
...     await close_stream_server(server, set())
...     return server.is_serving()
>>> asyncio.run(demo())
False
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["close_stream_server"]

#: How long a closed server may take to finish its own shutdown.
WAIT_CLOSED_SECONDS = 5.0


async def close_stream_server(
    server: asyncio.AbstractServer | None, connections: set[asyncio.Task[None]]
) -> None:
    """Stop ``server`` accepting, cancel ``connections`` and wait for all of them."""
    if server is not None:
        server.close()
    live = list(connections)
    for task in live:
        task.cancel()
    await asyncio.gather(*live, return_exceptions=True)
    if server is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), WAIT_CLOSED_SECONDS)
