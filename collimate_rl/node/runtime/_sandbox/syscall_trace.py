"""Run a command and list the syscall numbers it (and every process it starts) makes.

A script for inside a sandbox (stdlib only; the recorder, ``syscall_recorder.py``, sends its
source as an exec's file): ``python3 syscall_trace.py ARGV...``. The child loads a seccomp
filter that answers every syscall with ``SECCOMP_RET_USER_NOTIF``; this process, the
supervisor, takes the filter's listener out of the child (``pidfd_getfd``), notes each call's
number and lets it continue (``SECCOMP_USER_NOTIF_FLAG_CONTINUE``). The last line on stderr is
``COLLIMATE-SYSCALLS {"numbers": [...], "exit": CODE}``.

Calls an outer filter refuses (the sandbox's own: the dangerous ones, clone3, foreign socket
families) never reach the listener: the recorder runs its sandbox with the ``record`` policy,
where every other call is allowed, so what it lists is what the workload tries. Calls the child
makes before its ``execve`` (this script's) are left out.

>>> len(_listener_filter(0xC000003E)) // 8
5
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import select
import struct
import sys
import time
from typing import Any

_NR = {
    "x86_64": {"seccomp": 317, "pidfd_open": 434, "pidfd_getfd": 438, "execve": 59},
    "aarch64": {"seccomp": 277, "pidfd_open": 434, "pidfd_getfd": 438, "execve": 221},
}
_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
_SECCOMP_RET_USER_NOTIF = 0x7FC00000
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_USER_NOTIF_FLAG_CONTINUE = 1
#: ``_IOWR('!', 0, struct seccomp_notif)`` (80 bytes) and ``_IOWR('!', 1, ..._resp)`` (24)
_NOTIF_RECV = 0xC0502100
_NOTIF_SEND = 0xC0182101
_NOTIF = struct.Struct("<QIIiIQ6Q")  # id, pid, flags, then seccomp_data: nr, arch, ip, args
_RESP = struct.Struct("<QqiI")  # id, val, error, flags
PR_SET_NO_NEW_PRIVS = 38


def _listener_filter(arch_id: int) -> bytes:
    """Every syscall of ``arch_id`` to the listener; another architecture's goes on."""

    def ins(code: int, jt: int, jf: int, k: int) -> bytes:
        return struct.pack("<HBBI", code, jt, jf, k)

    return b"".join(
        [
            ins(0x20, 0, 0, 4),  # ld arch
            ins(0x15, 1, 0, arch_id),
            ins(0x06, 0, 0, _SECCOMP_RET_ALLOW),
            ins(0x20, 0, 0, 0),  # ld nr (not needed, kept for a reader of the program)
            ins(0x06, 0, 0, _SECCOMP_RET_USER_NOTIF),
        ]
    )


def _syscall() -> Any:
    fn = ctypes.CDLL(None, use_errno=True).syscall
    fn.restype = ctypes.c_long
    fn.argtypes = [ctypes.c_long, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_void_p]
    return fn


def _child(argv: list[str], nr: dict[str, int], arch_id: int) -> None:  # pragma: no cover
    """Load the listener filter and exec ``argv``; every call from here on waits for us."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        prog = _listener_filter(arch_id)
        buf = ctypes.create_string_buffer(prog, len(prog))
        fprog = struct.pack("<HxxxxxxQ", len(prog) // 8, ctypes.addressof(buf))
        fprog_buf = ctypes.create_string_buffer(fprog, len(fprog))
        flags = _SECCOMP_FILTER_FLAG_NEW_LISTENER
        fd = _syscall()(nr["seccomp"], _SECCOMP_SET_MODE_FILTER, flags, ctypes.addressof(fprog_buf))
        if fd < 0:
            os._exit(125)
        os.execvp(argv[0], argv)
    except BaseException:
        os._exit(127)


def _take_listener(pid: int, nr: dict[str, int]) -> int:
    """The child's listener fd, copied here once the child has made it."""
    fn = _syscall()
    pidfd = int(fn(nr["pidfd_open"], pid, 0, None))
    if pidfd < 0:
        raise OSError(ctypes.get_errno(), "pidfd_open")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            for name in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{name}") == "anon_inode:seccomp notify":
                    got = int(fn(nr["pidfd_getfd"], pidfd, int(name), None))
                    if got < 0:
                        raise OSError(ctypes.get_errno(), "pidfd_getfd")
                    os.close(pidfd)
                    return got
        except FileNotFoundError:
            pass
        time.sleep(0.0005)
    raise TimeoutError("the child made no seccomp listener")


def supervise(listener: int, execve_nr: int) -> set[int]:
    """Answer every notification until the last filtered process is gone; the numbers seen
    from the first ``execve`` on."""
    seen: set[int] = set()
    started = False
    poller = select.poll()
    poller.register(listener, select.POLLIN)
    notif = bytearray(_NOTIF.size)
    while True:
        events = poller.poll()
        if any(ev & (select.POLLHUP | select.POLLERR) for _fd, ev in events) and not any(
            ev & select.POLLIN for _fd, ev in events
        ):
            return seen
        notif[:] = bytes(len(notif))
        try:
            fcntl.ioctl(listener, _NOTIF_RECV, notif, True)
        except OSError:  # ENOENT: the caller died before we read it
            continue
        ident, _pid, _flags, number, *_rest = _NOTIF.unpack(notif)
        started = started or number == execve_nr
        if started:
            seen.add(number)
        resp = bytearray(_RESP.pack(ident, 0, 0, _SECCOMP_USER_NOTIF_FLAG_CONTINUE))
        with contextlib.suppress(OSError):  # ENOENT: interrupted meanwhile
            fcntl.ioctl(listener, _NOTIF_SEND, resp, True)


def main(argv: list[str]) -> int:
    arch = os.uname().machine
    nr = _NR[arch]
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        _child(argv, nr, _ARCH[arch])
    listener = _take_listener(pid, nr)
    seen = supervise(listener, nr["execve"])
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    said = json.dumps({"numbers": sorted(seen), "exit": code})
    sys.stderr.write(f"\nCOLLIMATE-SYSCALLS {said}\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
