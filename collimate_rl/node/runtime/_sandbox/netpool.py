"""Network namespaces kept for boxes: one per running box, reused once it is dead.

Every box needs a network namespace of its own: abstract unix sockets and
``/proc/net/unix`` are per namespace, so two boxes sharing one could talk, or
see each other's socket names. A fresh namespace per box costs ~0.6 ms of CPU
and a teardown in a kernel worker (``docs/fast-path.md``); a namespace from this
pool costs a ``setns``. A namespace is handed out to one box at a time and
comes back when that box's pid 1 has been reaped: every process that could hold
a socket in it is dead then. Before reusing one, the pool checks its
``/proc/net/unix`` is empty: a socket kept alive only by a cycle of in-flight
``SCM_RIGHTS`` messages outlives its processes until the kernel's collector
runs, and its name would reach the next box. Such a namespace is dropped.

The namespaces belong to the master's user namespace: a box (in a user
namespace below it) has no capability over them, so it cannot configure them
(loopback stays down) or reach anything through them.

>>> NetPool.is_clean_table(b"Num       RefCount Protocol Flags    Type St Inode Path\\n")
True
"""

from __future__ import annotations

import os

from .home import Home, open_ns
from .syscalls import CLONE_NEWNET, setns, unshare


class NetPool:
    """Free network namespaces (descriptors), made on demand up to ``cap``."""

    def __init__(self, home: Home, cap: int = 256) -> None:
        self.home = home
        self.cap = cap
        self.free: list[int] = []
        self.made = 0  # namespaces this pool holds (free or lent)
        self.dropped = 0  # found dirty and discarded

    def acquire(self) -> int:
        """A clean namespace for one box, or ``-1``: the box makes its own (``CLONE_NEWNET``)."""
        while self.free:
            fd = self.free.pop()
            if self._clean(fd):
                return fd
            os.close(fd)
            self.made -= 1
            self.dropped += 1
        if self.made >= self.cap:
            return -1
        fd = self._make()
        self.made += 1
        return fd

    def release(self, fd: int) -> None:
        """Give back a namespace whose box is dead (reaped)."""
        if fd >= 0:
            self.free.append(fd)

    def close(self) -> None:
        for fd in self.free:
            os.close(fd)
        self.free.clear()

    def _make(self) -> int:
        unshare(CLONE_NEWNET)
        try:
            return open_ns("net")
        finally:
            setns(self.home.fds["net"], CLONE_NEWNET)

    def _clean(self, fd: int) -> bool:
        with self.home.inside(net=fd):
            try:
                table = os.open("/proc/thread-self/net/unix", os.O_RDONLY)
                try:  # a page: enough to see a second line (plain os calls: this runs per box)
                    return self.is_clean_table(os.read(table, 4096))
                finally:
                    os.close(table)
            except OSError:
                return False

    @staticmethod
    def is_clean_table(table: bytes) -> bool:
        """``/proc/net/unix`` with no socket in it (just its header line)."""
        return len(table.splitlines()) <= 1
