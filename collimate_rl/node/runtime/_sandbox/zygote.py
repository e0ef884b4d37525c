"""The zygote Z: the one process that clones boxes, and does nothing else.

A process that is forked from pays for it afterwards: every page it writes
while a child still shares it is copied. The master writes all over its heap
(requests, records, selectors), so it no longer clones boxes itself (measured:
a third of its time went to those copies). At start-up, right after the
preload, it forks Z, a pristine copy that has never received a request. Z's
whole loop is: receive a clone command and its descriptors, step into the
session's namespaces, ``clone`` with ``CLONE_PARENT`` (the box is the master's
child: the master reaps it, as before), step back, answer the pid. Few pages
move, so few are copied. Before the loop Z sets what every box starts from, so
no box builds it: the template's environment and the candidates' stdio objects.

Command (one ``SOCK_SEQPACKET`` datagram from the master): ``marshal`` of
``(role, seed, env, box_fd_count, has_ready_pipe, clone_flags)`` (``env``: a
candidate's changes to Z's environment, see ``environ.py``) with, by
``SCM_RIGHTS``, the box's fds, its ready pipe (a candidate's), the session's
mount and IPC namespaces and, optionally, a pooled network namespace. Answer: the pid as 8 bytes (signed,
big-endian), or ``-errno``.
"""

# ruff: noqa: SIM105
from __future__ import annotations

import array
import marshal
import os
import signal
import socket
from typing import Any

from .box import BoxSpec, box_main
from .environ import replace_environ, template_env
from .factory import Stdio, open_stdio
from .home import Home
from .syscalls import PR_SET_PDEATHSIG, clone_process, prctl, set_name

#: clone(2)'s flag: the child's parent is the caller's parent (the master).
CLONE_PARENT = 0x00008000
_MAX_FDS = 16


class Zygote:
    """The master's handle on Z."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock = sock
        self.pid = pid

    @classmethod
    def start(cls, home: Home, cfg: dict[str, Any], cap_last: int) -> Zygote:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - Z
            ours.detach()
            _zygote_main(theirs, home, cfg, cap_last)
        theirs.close()
        return cls(ours, pid)

    def clone(
        self,
        spec: BoxSpec,
        flags: int,
        mnt: int,
        ipc: int,
        net: int,
    ) -> int:
        """Have Z clone a box; its pid (an ``OSError`` when Z cannot)."""
        ready = [spec.ready_w] if spec.ready_w >= 0 else []
        fds = [*spec.fds, *ready, mnt, ipc] + ([net] if net >= 0 else [])
        command = marshal.dumps((spec.role, spec.seed, spec.env, len(spec.fds), bool(ready), flags))
        try:
            self.sock.sendmsg(
                [command], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
            )
            answer = self.sock.recv(8)
        except OSError as exc:
            raise OSError(f"the zygote is gone: {exc}") from None
        if len(answer) != 8:
            raise OSError("the zygote is gone")
        pid = int.from_bytes(answer, "big", signed=True)
        if pid <= 0:
            raise OSError(-pid, f"clone: {os.strerror(-pid)}")
        return pid

    def stop(self) -> None:
        self.sock.close()
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass


def _zygote_main(
    sock: socket.socket, home: Home, cfg: dict[str, Any], cap_last: int
) -> None:  # pragma: no cover - Z; never returns
    try:
        set_name("col-zygote")
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        # every box sets its exec's environment: start it from what they share
        replace_environ(template_env(cfg))
        stdio = _stdio_for_candidates()
        space = socket.CMSG_SPACE(_MAX_FDS * array.array("i").itemsize)
        while True:
            msg, ancdata, _flags, _addr = sock.recvmsg(4096, space)
            if not msg:
                os._exit(0)
            fds: list[int] = []
            for level, kind, data in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds += array.array("i", data[: len(data) - len(data) % 4])
            answer = _clone(fds, msg, home, cfg, cap_last, stdio)
            for fd in fds:
                os.close(fd)
            sock.send(answer.to_bytes(8, "big", signed=True))
    except BaseException:
        os._exit(1)


def _stdio_for_candidates() -> Stdio:  # pragma: no cover - in Z
    """The stdio objects a candidate box runs its program with, made once, never used here.

    Opened in every box they cost it ~70 page copies (codec and io objects). A
    box's fds 0, 1 and 2 are pipes, so they are opened on a pipe (whether a stream
    is seekable or a tty, its buffer size: each is read from its fd when it is made);
    Z's own fds are put back after.
    """
    r, w = os.pipe()
    saved = [os.dup(fd) for fd in (0, 1, 2)]
    try:
        for fd, end in zip((0, 1, 2), (r, w, w), strict=True):
            os.dup2(end, fd)
        return open_stdio()
    finally:
        for fd, copy in zip((0, 1, 2), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)
        os.close(r)
        os.close(w)


def _clone(
    fds: list[int], msg: bytes, home: Home, cfg: dict[str, Any], cap_last: int, stdio: Stdio
) -> int:  # pragma: no cover - in Z
    # Every page Z writes is shared with the boxes still alive, so each write copies one:
    # Z only reads the command, steps in, clones and steps back; the box makes its spec.
    try:
        role, seed, env, count, has_ready, flags = marshal.loads(msg)
        at = count + bool(has_ready)
        net = fds[at + 2] if len(fds) > at + 2 else -1
        entered = home.step_in(fds[at], net, fds[at + 1])
        try:
            pid = clone_process(flags | CLONE_PARENT)
        except BaseException:
            home.step_out(entered)
            raise
        if pid == 0:  # the box, in its new namespaces for good
            try:
                ready = fds[count] if has_ready else -1
                spec = BoxSpec(
                    role, fds[:count], ready, cfg, cap_last, seed=seed, env=env, stdio=stdio
                )
            except BaseException:
                os._exit(1)  # (never back into Z's loop)
            box_main(spec)
        home.step_out(entered)
        return pid
    except OSError as exc:
        return -(exc.errno or 1)
    except (ValueError, TypeError, IndexError, EOFError):
        return -22  # EINVAL: a command Z cannot read
