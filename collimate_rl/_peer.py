"""Who is on the other end of a loopback TCP connection: the uid owning the peer's socket.

A TCP port on ``127.0.0.1`` is open to every user of the host. Our loopback
forwarders (the node's service bridges, the OpenEnv provider's tunnel) look
the connecting socket up in the kernel's socket table before relaying a single
byte, and serve only connections whose socket belongs to an allowed uid: by
default the forwarder's own and root's, the same people who could open a
``0600`` unix socket of its owner. Clients need nothing new: ``endpoints``
stay ``"127.0.0.1:<port>"``.

The lookup asks ``sock_diag`` (netlink) for that one socket, which takes
tens of microseconds; where netlink is unavailable it scans ``/proc/net/tcp``
(``tcp6``), which walks the kernel's whole connection table (milliseconds on a
large machine).

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

import asyncio
import errno
import os
import socket
import struct
from collections.abc import Iterable
from typing import Any, Final

__all__ = [
    "connection_is_allowed",
    "default_allowed_uids",
    "encode_address",
    "loopback_peer_uid",
    "owner_in_table",
    "peer_is_allowed",
]

#: Socket states whose owner is still a live socket: established, and half-closed
#: by the peer (FIN_WAIT1/2: it shut down writing and still reads the answer).
_LIVE: Final = frozenset({1, 4, 5})
_LIVE_STATES: Final = frozenset(f"{state:02X}" for state in _LIVE)

# sock_diag (linux/sock_diag.h, linux/inet_diag.h)
_NETLINK_SOCK_DIAG: Final = 4
_SOCK_DIAG_BY_FAMILY: Final = 20
_NLM_F_REQUEST: Final = 1
_NLMSG_ERROR: Final = 2
_NO_COOKIE: Final = 0xFFFFFFFF
_NLMSG_HDR: Final = struct.Struct("=IHHII")
_DIAG_REQ: Final = struct.Struct("=BBBBI")  # family, protocol, ext, pad, states
_DIAG_MSG_UID_OFFSET: Final = _NLMSG_HDR.size + 4 + 48 + 12  # after family..retrans, id, 3 u32


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


def _ask_sock_diag(
    family: int, local: tuple[str, int], remote: tuple[str, int]
) -> tuple[bool, int | None]:
    """``(answered, uid)`` for the TCP socket ``local`` -> ``remote``, from ``sock_diag``.

    ``answered`` is ``False`` when netlink itself failed (the caller falls back).
    """
    sockid = (
        struct.pack("!HH", local[1], remote[1])
        + socket.inet_pton(family, local[0]).ljust(16, b"\0")
        + socket.inet_pton(family, remote[0]).ljust(16, b"\0")
        + struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE)  # any interface, no cookie check
    )
    body = _DIAG_REQ.pack(family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
    header = _NLMSG_HDR.pack(
        _NLMSG_HDR.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0
    )
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as nl:
            nl.settimeout(2.0)
            nl.sendto(header + body, (0, 0))
            reply = nl.recv(65536)
        _, kind, _, _, _ = _NLMSG_HDR.unpack_from(reply)
        if kind == _NLMSG_ERROR:
            (err,) = struct.unpack_from("=i", reply, _NLMSG_HDR.size)
            return (err == -errno.ENOENT), None  # no such socket: a definite answer
        state = reply[_NLMSG_HDR.size + 1]
        uid, inode = struct.unpack_from("=II", reply, _DIAG_MSG_UID_OFFSET)
    except (OSError, struct.error, IndexError):
        return False, None
    return True, (uid if state in _LIVE and inode != 0 else None)


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
    answered, uid = _ask_sock_diag(family, (host, port), (our_host, our_port))
    if answered:
        return uid
    return owner_in_table(_read_table(family), peer, ours)


def peer_is_allowed(sockname: Any, peername: Any, allowed: frozenset[int]) -> bool:
    """Whether the loopback peer's socket belongs to one of the ``allowed`` uids."""
    uid = loopback_peer_uid(sockname, peername)
    return uid is not None and uid in allowed


async def connection_is_allowed(writer: asyncio.StreamWriter, allowed: frozenset[int]) -> bool:
    """:func:`peer_is_allowed` for an accepted asyncio connection (looked up off the loop)."""
    return await asyncio.to_thread(
        peer_is_allowed,
        writer.get_extra_info("sockname"),
        writer.get_extra_info("peername"),
        allowed,
    )
