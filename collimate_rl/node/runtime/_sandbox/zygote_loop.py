"""The zygote's loop: take a clone command, step into the session, clone, step home, answer.

Two twins serve the same commands with the same answers: the native loop
(``zygote_loop.c``, built once per machine by ``runtime/native.py`` and loaded
here with ``ctypes``) and :func:`serve_in_python`, for a machine without a C
compiler. Each returns only in a box, with the command and the descriptors it
came with; in the zygote it returns ``None`` once the master hung up.

Why a native twin: every page the zygote writes after a clone is shared with
the boxes still alive, so each write copies one. The Python loop touches ~95
pages per clone (its frames, the objects it names, ctypes, the allocator),
about as much CPU as the ``clone`` itself; the C loop touches its stack and
the command buffer (``docs/fast-path-log.md``, round 14).

A command is one ``SOCK_SEQPACKET`` datagram: :data:`HEADER` (the clone flags,
the box's descriptor count, whether a ready pipe follows them), then what only
the box reads (:func:`pack_command`). With it, by ``SCM_RIGHTS``: the box's
descriptors, its ready pipe, the session's mount and IPC namespaces and,
optionally, a pooled network namespace. The answer is the box's pid as 8
bytes (signed, big-endian), or ``-errno``. An empty datagram reads as the
master hanging up (``SOCK_SEQPACKET`` cannot tell them apart): the loop ends.

>>> unpack_command(pack_command(0x10000000, 3, True, b"role"))
(268435456, 3, True, b'role')
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import struct
from collections.abc import Callable
from typing import Any

from .home import Home
from .syscalls import clone_process

#: The part of a command the loop reads: clone flags, box fd count, has a ready pipe.
HEADER = struct.Struct("=QBB")
#: The most descriptors a command carries (more are closed unread).
MAX_FDS = 16
#: The longest command (a longer one is refused: the box's part would be cut).
COMMAND_MAX = 4096
#: clone(2)'s flag: the child's parent is the caller's parent (the master).
CLONE_PARENT = 0x00008000

#: ``serve(sock, home)``: in a box, ``(command, fds)``; in the zygote, ``None`` at hang-up.
Serve = Callable[[socket.socket, Home], "tuple[bytes, list[int]] | None"]


def pack_command(flags: int, box_fds: int, ready: bool, box_part: bytes) -> bytes:
    """A clone command: the loop's header, then ``box_part`` (for the box alone)."""
    return HEADER.pack(flags, box_fds, ready) + box_part


def unpack_command(command: bytes) -> tuple[int, int, bool, bytes]:
    """A command's clone flags, box fd count, whether a ready pipe follows, and box part."""
    flags, count, ready = HEADER.unpack_from(command)
    return flags, count, ready != 0, command[HEADER.size :]


def _namespaces(command: bytes, fds: list[int]) -> tuple[int, int, int, int] | None:
    """(flags, mount, IPC, network or -1) of a command the loop can act on, else None."""
    if len(command) < HEADER.size:
        return None
    flags, count, ready, _box_part = unpack_command(command)
    at = count + ready
    if len(fds) < at + 2:
        return None
    return flags, fds[at], fds[at + 1], fds[at + 2] if len(fds) > at + 2 else -1


def serve_in_python(sock: socket.socket, home: Home) -> tuple[bytes, list[int]] | None:
    """The loop in Python: the native loop's twin, step for step."""
    while True:
        # (room for MAX_FDS descriptors: the kernel closes any beyond, and says MSG_CTRUNC)
        command, fds, msg_flags, _addr = socket.recv_fds(sock, COMMAND_MAX, MAX_FDS)
        if not command:
            return None
        answer = -errno.EINVAL
        found = _namespaces(command, fds)
        if found is not None and not msg_flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            flags, mnt, ipc, net = found
            answer = _clone_in(home, flags, mnt, net, ipc)
            if answer == 0:
                return command, fds
        for fd in fds:
            os.close(fd)
        sock.send(answer.to_bytes(8, "big", signed=True))


def _clone_in(home: Home, flags: int, mnt: int, net: int, ipc: int) -> int:
    """Clone a box in the given namespaces: 0 in the box, its pid (or ``-errno``) here."""
    try:
        entered = home.step_in(mnt, net, ipc)
    except OSError as exc:
        return -(exc.errno or errno.EINVAL)
    try:
        pid = clone_process(flags | CLONE_PARENT)
    except OSError as exc:
        pid = -(exc.errno or errno.EINVAL)
    if pid != 0:
        home.step_out(entered)  # (an error here ends the zygote: it cannot get home)
    return pid


class NativeLoop:
    """The C loop (``zygote_loop.c``), loaded from ``path``; call it as a :data:`Serve`."""

    def __init__(self, path: str) -> None:
        serve = ctypes.CDLL(path).collimate_zygote_serve
        serve.restype = ctypes.c_long
        serve.argtypes = [ctypes.c_int] * 4 + [
            ctypes.c_char_p,
            ctypes.c_long,
            ctypes.POINTER(ctypes.c_long),
            ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_int),
        ]
        self._serve: Any = serve

    def __call__(self, sock: socket.socket, home: Home) -> tuple[bytes, list[int]] | None:
        command = ctypes.create_string_buffer(COMMAND_MAX)
        fds = (ctypes.c_int * MAX_FDS)()
        size, count = ctypes.c_long(), ctypes.c_int()
        homes = (home.fds["mnt"], home.fds["net"], home.fds["ipc"])
        rc = self._serve(sock.fileno(), *homes, command, COMMAND_MAX, size, fds, count)
        if rc != 0:
            return None
        return command.raw[: size.value], list(fds[: count.value])


def choose_loop(native_path: str | None) -> tuple[Serve, str]:
    """The native loop when ``native_path`` loads, else the Python one; and a word for which."""
    if native_path:
        try:
            return NativeLoop(native_path), "native"
        except (OSError, AttributeError):  # not loadable here, or another build's library
            pass
    return serve_in_python, "python"
