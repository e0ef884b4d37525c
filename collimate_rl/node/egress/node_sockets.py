"""Is ``address:port`` one of this node's own listening sockets?

A session must never reach the node's API (nor a service bridge the node
listens on for another session), whatever its policy names. The check looks
at the truth rather than at configuration: the TCP sockets this process holds
in the ``LISTEN`` state (``/proc/self/fd`` and ``/proc/net/tcp{,6}``), so it
covers a node served on any address, a node started inside a test process,
and bridges opened after start-up. A socket bound to ``0.0.0.0``/``::``
listens on every local address; whether a destination is local is asked of
the kernel (binding to it succeeds only for the host's own addresses).

>>> import socket
>>> from ipaddress import ip_address
>>> with socket.create_server(("127.0.0.1", 0)) as srv:
...     port = srv.getsockname()[1]
...     listening_here(ip_address("127.0.0.1"), port), listening_here(ip_address("127.0.0.1"), 1)
(True, False)
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
from ipaddress import IPv4Address, IPv6Address

from collimate_rl.node.egress.entries import IPAddress, unmapped

__all__ = ["is_local_address", "listening_here", "own_listeners"]

_LISTEN = "0A"


def is_local_address(address: IPAddress) -> bool:
    """Whether ``address`` belongs to this host (the kernel lets us bind to it)."""
    address = unmapped(address)
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((str(address), 0))
    except OSError:
        return False
    return True


def _own_socket_inodes() -> set[int]:
    inodes: set[int] = set()
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/self/fd/{name}")
                if target.startswith("socket:["):
                    inodes.add(int(target[8:-1]))
    return inodes


def _decode(hex_address: str) -> IPAddress:
    raw = bytes.fromhex(hex_address)
    # /proc/net/tcp{,6} prints each 32-bit word in host byte order
    words = struct.unpack(f"={len(raw) // 4}I", raw)
    packed = b"".join(struct.pack(">I", word) for word in words)
    return IPv4Address(packed) if len(packed) == 4 else unmapped(IPv6Address(packed))


def own_listeners() -> list[tuple[IPAddress, int]]:
    """``(address, port)`` of every TCP socket this process has listening."""
    inodes = _own_socket_inodes()
    found: list[tuple[IPAddress, int]] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                lines = fh.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) < 10 or cols[3] != _LISTEN or int(cols[9]) not in inodes:
                continue
            host, _, port = cols[1].partition(":")
            found.append((_decode(host), int(port, 16)))
    return found


def listening_here(address: IPAddress, port: int) -> bool:
    """Whether a connection to ``address:port`` would reach a socket this process listens on."""
    address = unmapped(address)
    if not is_local_address(address):
        return False
    for bound, bound_port in own_listeners():
        if bound_port != port:
            continue
        if bound == address or bound.is_unspecified:
            return True
    return False
