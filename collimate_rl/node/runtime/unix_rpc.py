"""One request and its reply over a unix socket: how the host talks to a
template's master and to each session server.

The framing: a 4-byte big-endian length, a JSON header, then ``payload_len``
bytes of payload (when the header says so), the same both ways.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
from pathlib import Path
from typing import Any

__all__ = ["unix_call"]


async def unix_call(
    path: str | Path,
    header: dict[str, Any],
    payload: bytes = b"",
    *,
    timeout: float | None = 60.0,
) -> tuple[dict[str, Any], bytes]:
    """Send ``header`` (and ``payload``) to the server at ``path``; its reply and payload."""

    async def go() -> tuple[dict[str, Any], bytes]:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 20)
        try:
            hdr = dict(header)
            if payload:
                hdr["payload_len"] = len(payload)
            data = json.dumps(hdr).encode()
            writer.write(struct.pack(">I", len(data)) + data)
            if payload:
                writer.write(payload)
            await writer.drain()
            (n,) = struct.unpack(">I", await reader.readexactly(4))
            reply: dict[str, Any] = json.loads(await reader.readexactly(n))
            plen = int(reply.get("payload_len", 0))
            body = await reader.readexactly(plen) if plen else b""
            return reply, body
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    if timeout is None:
        return await go()
    return await asyncio.wait_for(go(), timeout)
