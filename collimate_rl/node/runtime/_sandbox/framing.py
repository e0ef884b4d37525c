"""Frames on the supervisor's unix sockets: a 4-byte big-endian length, a JSON
header, then ``payload_len`` raw bytes when the header announces them.

>>> import socket
>>> a, b = socket.socketpair()
>>> send_msg(a, {"op": "ping"}, b"xy")
>>> recv_msg(b)
({'op': 'ping', 'payload_len': 2}, b'xy')
"""

from __future__ import annotations

import json
import os
import socket
import struct
from typing import Any

#: Up to this size a frame goes out in one ``send`` (a copy is cheaper than a second
#: syscall and a second wake-up of the reader); a larger payload follows in its own.
ONE_SEND_MAX = 1 << 20


def send_msg(sock: socket.socket, header: dict[str, Any], payload: bytes = b"") -> None:
    if payload:
        header = dict(header, payload_len=len(payload))
    data = json.dumps(header).encode()
    head = struct.pack(">I", len(data)) + data
    if len(payload) <= ONE_SEND_MAX:
        sock.sendall(head + payload)
    else:
        sock.sendall(head)
        sock.sendall(payload)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("peer closed")
        buf += chunk
    return bytes(buf)


def recv_msg(sock: socket.socket) -> tuple[dict[str, Any], bytes]:
    (n,) = struct.unpack(">I", _recv_exact(sock, 4))
    header: dict[str, Any] = json.loads(_recv_exact(sock, n))
    plen = int(header.get("payload_len", 0))
    payload = _recv_exact(sock, plen) if plen else b""
    return header, payload


def read_exact(fd: int, n: int) -> bytearray:
    """``n`` bytes from ``fd`` (a pipe), or ``EOFError`` if it closes first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("peer closed")
        buf += chunk
    return buf


def read_frame(fd: int) -> tuple[dict[str, Any], bytearray]:
    """A frame (as :func:`send_msg` writes it) from ``fd``."""
    (n,) = struct.unpack(">I", read_exact(fd, 4))
    header: dict[str, Any] = json.loads(bytes(read_exact(fd, n)))
    plen = int(header.get("payload_len", 0))
    return header, read_exact(fd, plen) if plen else bytearray()


def frame_bytes(header: dict[str, Any], payload: bytes = b"") -> bytes:
    """The frame :func:`send_msg` would send, as bytes (to write to a pipe)."""
    if payload:
        header = dict(header, payload_len=len(payload))
    data = json.dumps(header).encode()
    return struct.pack(">I", len(data)) + data + payload


def write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
