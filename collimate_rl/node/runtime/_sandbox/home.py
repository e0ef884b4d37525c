"""The master's own namespaces, and stepping into a session's and back.

The template's master M runs in a user namespace of its own (uid 1000 mapped to
itself), where it holds every capability, with private mount, network and IPC
namespaces owned by it. That lets it do in-process what needed a forked helper
before: build a light session's mount namespace (``members.py``), keep network
namespaces for a pool (``netpool.py``), and step into a session's namespaces just
for the ``clone`` of a box (``boxes.py``). The capabilities reach nothing outside
the container: the namespace maps one uid, and the container's own namespaces
(owned by the container's user namespace) are out of reach.

Single-threaded callers only: ``setns(CLONE_NEWNS)`` refuses a process whose
threads share its filesystem information.

>>> Home.KINDS[0][0]
'mnt'
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from .syscalls import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWUSER,
    MS_PRIVATE,
    MS_REC,
    mount,
    setns,
    unshare,
    write_id_maps,
)


def open_ns(kind: str, pid: str = "thread-self") -> int:
    """A descriptor of the namespace ``kind`` of ``pid`` (keeps it alive while open)."""
    return os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)


class Home:
    """M's own mount, network and IPC namespaces, to come back to after a ``setns``."""

    KINDS = (("mnt", CLONE_NEWNS), ("net", CLONE_NEWNET), ("ipc", CLONE_NEWIPC))

    def __init__(self) -> None:
        self.fds = {kind: open_ns(kind) for kind, _ in self.KINDS}

    @classmethod
    def enter(cls) -> Home:
        """Move this process into namespaces of its own (see the module docstring)."""
        uid, gid = os.getuid(), os.getgid()
        unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)
        proc = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            write_id_maps(proc, uid, uid, gid)
        finally:
            os.close(proc)
        # nothing mounted in a session's namespace may propagate back here (or on)
        mount(None, "/", None, MS_REC | MS_PRIVATE, None)
        return cls()

    @contextlib.contextmanager
    def inside(self, mnt: int = -1, net: int = -1, ipc: int = -1) -> Iterator[None]:
        """Run the body in the given namespaces (``-1``: stay), then come home."""
        entered = self.step_in(mnt, net, ipc)
        try:
            yield
        finally:
            self.step_out(entered)

    def step_in(self, mnt: int, net: int, ipc: int) -> int:
        """Enter the given namespaces (``-1``: stay); what :meth:`step_out` takes to come home
        (a bit per kind of ``KINDS`` entered).

        :meth:`inside` without its generator, for the zygote's loop (``zygote.py``).
        """
        entered = 0
        try:
            for bit, fd in enumerate((mnt, net, ipc)):
                if fd >= 0:
                    setns(fd, self.KINDS[bit][1])
                    entered |= 1 << bit
        except BaseException:
            self.step_out(entered)
            raise
        return entered

    def step_out(self, entered: int) -> None:
        """Come home from :meth:`step_in`: only the kinds it entered (each ``setns`` is a
        syscall the master pays per box; a kind it skipped is home already)."""
        for bit, (kind, nstype) in enumerate(self.KINDS):
            if entered >> bit & 1:
                setns(self.fds[kind], nstype)

    @contextlib.contextmanager
    def fresh_mount_ns(self, base: int = -1) -> Iterator[None]:
        """Run the body in a new mount namespace (a copy of ``base``'s, else home's)."""
        try:
            if base >= 0:
                setns(base, CLONE_NEWNS)
            unshare(CLONE_NEWNS)
            yield
        finally:
            setns(self.fds["mnt"], CLONE_NEWNS)

    def close_in_child(self) -> None:
        """For a forked child that must not keep M's namespace descriptors."""
        for fd in self.fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
