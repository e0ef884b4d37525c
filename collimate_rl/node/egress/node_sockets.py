"""Is ``address:port`` one of this node's own listening sockets?

A session must never reach the node's API (nor a service bridge the node
listens on for another session), whatever its policy names. The check looks
at the truth rather than at configuration: the TCP sockets this process holds
in the ``LISTEN`` state, found through ``/proc/self/fd``. So it covers a node
served on any address, a node started inside a test process, and bridges
opened after start-up. A socket bound to ``0.0.0.0``/``::`` listens on every
local address; whether a destination is local is asked of the kernel
(binding to it succeeds only for the host's own addresses), and only a local
destination is looked up at all.

Each socket descriptor is inspected once (through a duplicate: ``SO_ACCEPTCONN``
and its address); a listening or connected socket never changes its role, so
the answer is kept per socket inode until the descriptor goes away. Reading
``/proc/net/tcp`` instead costs ~15 ms per check on a busy host.

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
import threading
from typing import Final

from collimate_rl.node.egress.entries import IPAddress, parse_address, unmapped

__all__ = ["is_local_address", "listening_here", "own_listeners"]

#: What a socket descriptor turned out to be: ``(address, port)`` when it listens
#: on TCP, ``None`` when it never will (connected, or not an IP stream socket).
_Role = tuple[IPAddress, int] | None
_IP_FAMILIES: Final = (socket.AF_INET, socket.AF_INET6)


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


def _inspect(fd: int) -> tuple[_Role, bool]:
    """``(role, final)`` of descriptor ``fd``; ``final`` if the role cannot change any more."""
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:  # gone meanwhile, or not a socket
        return None, False
    with sock:
        if sock.family not in _IP_FAMILIES or sock.type != socket.SOCK_STREAM:
            return None, True
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            host, port = sock.getsockname()[:2]
            address = parse_address(str(host).split("%", 1)[0])
            return ((unmapped(address), int(port)) if address is not None else None), True
        try:
            sock.getpeername()
        except OSError:  # bound or fresh: it may still listen later
            return None, False
        return None, True


class _Listeners:
    """This process's listening TCP sockets, inspected once per socket inode."""

    def __init__(self) -> None:
        self._known: dict[int, _Role] = {}
        self._lock = threading.Lock()

    def scan(self) -> list[tuple[IPAddress, int]]:
        seen: dict[int, int] = {}
        with contextlib.suppress(OSError):
            for name in os.listdir("/proc/self/fd"):
                with contextlib.suppress(OSError, ValueError):
                    target = os.readlink(f"/proc/self/fd/{name}")
                    if target.startswith("socket:["):
                        seen[int(target[8:-1])] = int(name)
        with self._lock:
            for gone in self._known.keys() - seen.keys():
                del self._known[gone]
            found: list[tuple[IPAddress, int]] = []
            for inode, fd in seen.items():
                if inode in self._known:
                    role = self._known[inode]
                else:
                    role, final = _inspect(fd)
                    if final:
                        self._known[inode] = role
                if role is not None:
                    found.append(role)
            return found


_LISTENERS = _Listeners()


def own_listeners() -> list[tuple[IPAddress, int]]:
    """``(address, port)`` of every TCP socket this process has listening."""
    return _LISTENERS.scan()


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
