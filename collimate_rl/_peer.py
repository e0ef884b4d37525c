"""Who is on the other end of a loopback TCP connection: the uid owning the peer's socket.

A TCP port on ``127.0.0.1`` is open to every user of the host. Our loopback
forwarders (the node's service bridges, the OpenEnv provider's tunnel) look
the connecting socket up in the kernel's socket table (``/proc/net/tcp``,
``/proc/net/tcp6``) before relaying a single byte, and serve only connections
whose socket belongs to an allowed uid: by default the forwarder's own and
root's, the same people who could open a ``0600`` unix socket of its owner.
Clients need nothing new: ``endpoints`` stay ``"127.0.0.1:<port>"``.

The uid is the one the kernel recorded when the peer's socket was created; no
unprivileged process can change it. A peer socket that is not live (closed,
only a ``TIME_WAIT`` leftover, whose table row shows uid 0) or is not in this
network namespace (a remote peer) has no owner here and is refused.

>>> encode_address("127.0.0.1", 8000, socket.AF_INET) in ("0100007F:1F40", "7F000001:1F40")
True
>>> row = "0: 0100007F:A0F4 0100007F:1F40 01 00000000:00000000 00:00000000 00000000  1000 0 4242"
>>> owner_in_table([row], "0100007F:A0F4", "0100007F:1F40")
1000
>>> owner_in_table([row.replace(" 4242", " 0")], "0100007F:A0F4", "0100007F:1F40") is None
True
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterable
from typing import Any, Final

__all__ = [
    "default_allowed_uids",
    "encode_address",
    "loopback_peer_uid",
    "owner_in_table",
    "peer_is_allowed",
]

#: Socket states whose owner is still a live socket: established, and half-closed
#: by the peer (FIN_WAIT1/2: it shut down writing and still reads the answer).
_LIVE_STATES: Final = frozenset({"01", "04", "05"})


def default_allowed_uids() -> frozenset[int]:
    """This process's effective uid and root."""
    return frozenset({os.geteuid(), 0})


def encode_address(host: str, port: int, family: int) -> str:
    """``host:port`` as ``/proc/net/tcp{,6}`` writes it (the address in host byte order)."""
    raw = socket.inet_pton(family, host)
    words = struct.unpack(f"={len(raw) // 4}I", raw)
    return "".join(f"{w:08X}" for w in words) + f":{port:04X}"


def owner_in_table(rows: Iterable[str], local: str, remote: str) -> int | None:
    """The uid of the live socket whose local/remote addresses are ``local``/``remote``."""
    for row in rows:
        fields = row.split()
        if len(fields) < 10 or fields[1] != local or fields[2] != remote:
            continue
        if fields[3] in _LIVE_STATES and fields[9] != "0":  # inode 0: no open socket
            return int(fields[7])
    return None


def _read_table(family: int) -> list[str]:
    name = "/proc/net/tcp6" if family == socket.AF_INET6 else "/proc/net/tcp"
    try:
        with open(name) as f:
            return f.read().splitlines()[1:]
    except OSError:
        return []


def loopback_peer_uid(sockname: Any, peername: Any) -> int | None:
    """The uid owning the socket at ``peername`` connected to us at ``sockname``, or ``None``.

    Args:
        sockname: our end, ``(host, port[, ...])`` as ``socket.getsockname()`` gives it.
        peername: the peer's end, as ``socket.getpeername()`` gives it.
    """
    try:
        host, port = str(peername[0]), int(peername[1])
        our_host, our_port = str(sockname[0]), int(sockname[1])
    except (TypeError, IndexError, ValueError):
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        peer = encode_address(host, port, family)
        ours = encode_address(our_host, our_port, family)
    except OSError:
        return None
    # From the peer's side its socket's local address is the peer's, its remote ours.
    return owner_in_table(_read_table(family), peer, ours)


def peer_is_allowed(sockname: Any, peername: Any, allowed: frozenset[int]) -> bool:
    """Whether the loopback peer's socket belongs to one of the ``allowed`` uids."""
    uid = loopback_peer_uid(sockname, peername)
    return uid is not None and uid in allowed
