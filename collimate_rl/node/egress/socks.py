"""The SOCKS5 side of the egress proxy (RFC 1928): ``CONNECT`` only, no authentication.

For TCP that is not HTTP (``ALL_PROXY=socks5h://127.0.0.1:1080``). Names are
resolved by the proxy (``socks5h``); a refusal is the reply ``0x02``
("connection not allowed by ruleset"), sent at once; other failures get the
matching code (``0x04`` host unreachable, ``0x05`` connection refused, ...).
``BIND`` and ``UDP ASSOCIATE`` are answered ``0x07`` (not supported).

>>> socks_reply(2)
b'\\x05\\x02\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00'
"""

from __future__ import annotations

import asyncio
import struct
from ipaddress import IPv4Address, IPv6Address
from typing import Final

from collimate_rl.node.egress.decide import Refused, Target
from collimate_rl.node.egress.upstream import Opener, UpstreamError
from collimate_rl.node.runtime.bridge import pump

__all__ = ["SOCKS_VERSION", "serve_socks5", "socks_reply"]

SOCKS_VERSION: Final = 5
_NO_AUTH: Final = 0
_NO_ACCEPTABLE_METHOD: Final = 0xFF
_CMD_CONNECT: Final = 1
_SUCCEEDED: Final = 0
_GENERAL_FAILURE: Final = 1
_NOT_ALLOWED: Final = 2
_HOST_UNREACHABLE: Final = 4
_COMMAND_NOT_SUPPORTED: Final = 7
_ADDRESS_TYPE_NOT_SUPPORTED: Final = 8
#: How long a client may take over its greeting and request (seconds).
HANDSHAKE_TIMEOUT: Final = 30.0


def socks_reply(code: int) -> bytes:
    """A reply with ``code`` and an all-zero IPv4 bound address (we do not reveal ours)."""
    return bytes([SOCKS_VERSION, code, 0, 1]) + bytes(6)


async def _read_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> Target | None:
    """The greeting and the request; ``None`` once a failure reply is written."""
    (count,) = await reader.readexactly(1)
    methods = await reader.readexactly(count)
    if _NO_AUTH not in methods:
        writer.write(bytes([SOCKS_VERSION, _NO_ACCEPTABLE_METHOD]))
        return None
    writer.write(bytes([SOCKS_VERSION, _NO_AUTH]))
    version, command, _reserved, kind = await reader.readexactly(4)
    if version != SOCKS_VERSION:
        writer.write(socks_reply(_GENERAL_FAILURE))
        return None
    if kind == 1:
        host = str(IPv4Address(await reader.readexactly(4)))
    elif kind == 3:
        (length,) = await reader.readexactly(1)
        host = (await reader.readexactly(length)).decode("ascii", "replace")
    elif kind == 4:
        host = str(IPv6Address(await reader.readexactly(16)))
    else:
        writer.write(socks_reply(_ADDRESS_TYPE_NOT_SUPPORTED))
        return None
    (port,) = struct.unpack(">H", await reader.readexactly(2))
    if command != _CMD_CONNECT:
        writer.write(socks_reply(_COMMAND_NOT_SUPPORTED))
        return None
    try:
        return Target.parse(host, port)
    except ValueError:
        writer.write(socks_reply(_HOST_UNREACHABLE))
        return None


async def serve_socks5(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, opener: Opener
) -> None:
    """Serve one SOCKS5 connection whose version byte was already read."""
    target = await asyncio.wait_for(_read_request(reader, writer), HANDSHAKE_TIMEOUT)
    if target is None:
        return
    try:
        up = await opener.open(target)
    except Refused:
        writer.write(socks_reply(_NOT_ALLOWED))
        return
    except UpstreamError as exc:
        writer.write(socks_reply(exc.socks_reply))
        return
    try:
        writer.write(socks_reply(_SUCCEEDED))
        await asyncio.gather(
            pump(reader, up.writer, up.counters.add_out),
            pump(up.reader, writer, up.counters.add_in),
            return_exceptions=True,
        )
    finally:
        up.writer.close()
