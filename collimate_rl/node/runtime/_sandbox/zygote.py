"""The zygote Z: the one process that clones boxes, and does nothing else.

A process that is forked from pays for it afterwards: every page it writes
while a child still shares it is copied. The master writes all over its heap
(requests, records, selectors), so it no longer clones boxes itself (measured:
a third of its time went to those copies). At start-up, right after the
preload, it forks Z, a pristine copy that has never received a request. Z's
whole loop is: receive a clone command and its descriptors, step into the
session's namespaces, ``clone`` with ``CLONE_PARENT`` (the box is the master's
child: the master reaps it, as before), step back, answer the pid
(``zygote_loop.py``: in C where the node could build it, else in Python).
Before the loop Z sets what every box starts from, so no box builds it: the
template's environment and the candidates' stdio objects.

The command's box part is ``marshal`` of ``(role, seed, env)`` (``env``: a
candidate's changes to Z's environment, see ``environ.py``); the box reads it,
Z never does.
"""

# ruff: noqa: SIM105
from __future__ import annotations

import array
import marshal
import os
import signal
import socket
import sys
from typing import Any

from .box import BoxSpec, box_main
from .environ import replace_environ, template_env
from .factory import Stdio, open_stdio
from .home import Home
from .syscalls import PR_SET_PDEATHSIG, prctl, set_name
from .zygote_loop import choose_loop, pack_command, unpack_command


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
        box_part = marshal.dumps((spec.role, spec.seed, spec.env))
        command = pack_command(flags, len(spec.fds), bool(ready), box_part)
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
        serve, kind = choose_loop(cfg.get("zygote_loop"))
        if kind != "native" and cfg.get("zygote_loop"):
            print("zygote: the native loop did not load; serving in Python", file=sys.stderr)
        received = serve(sock, home)  # returns in each box, or when the master hung up
        if received is None:
            os._exit(0)
        command, fds = received
    except BaseException:
        os._exit(1)
    try:  # the box, in its new namespaces for good
        spec = _box_spec(command, fds, cfg, cap_last, stdio)
    except BaseException:
        os._exit(1)  # (never back into Z's loop)
    box_main(spec)


def _box_spec(
    command: bytes, fds: list[int], cfg: dict[str, Any], cap_last: int, stdio: Stdio
) -> BoxSpec:  # pragma: no cover - in a box
    _flags, count, has_ready, box_part = unpack_command(command)
    role, seed, env = marshal.loads(box_part)
    ready = fds[count] if has_ready else -1
    return BoxSpec(role, fds[:count], ready, cfg, cap_last, seed=seed, env=env, stdio=stdio)


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
