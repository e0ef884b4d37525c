"""A zygote for the loop tests: namespaces of its own, a session's to clone into, one loop.

    python _zygote_twin.py native|python <library> <socket fd> <report fd>

Like the master before it forks the zygote, it enters a user namespace of its own
(with its mount, network and IPC namespaces), then makes a "session": one more
namespace of each kind, whose descriptors it sends on the socket (with ``ready``)
and closes (then says ``serving``), before it serves clone commands there with the
loop asked for. Every box it clones writes to the report pipe what it got (the
command, how many descriptors) and where it is (its mount, IPC and network
namespaces), then exits.
"""

from __future__ import annotations

import os
import socket
import sys

from collimate_rl.node.runtime._sandbox.home import Home, open_ns
from collimate_rl.node.runtime._sandbox.syscalls import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    setns,
    unshare,
)
from collimate_rl.node.runtime._sandbox.zygote_loop import NativeLoop, serve_in_python

KINDS = (("mnt", CLONE_NEWNS), ("ipc", CLONE_NEWIPC), ("net", CLONE_NEWNET))


def where() -> list[str]:
    return [os.readlink(f"/proc/self/ns/{kind}") for kind, _ in KINDS]


def main() -> None:
    kind, library, sock_fd, report_fd = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:5])
    sock = socket.socket(fileno=sock_fd)
    home = Home.enter()
    session = []
    for name, nstype in KINDS:
        unshare(nstype)
        session.append(open_ns(name))
        setns(home.fds[name], nstype)
    serve = NativeLoop(library) if kind == "native" else serve_in_python
    socket.send_fds(sock, [b"ready"], session)
    for fd in session:
        os.close(fd)
    sock.send(b"serving")  # (the test counts our descriptors from here on)
    received = serve(sock, home)
    if received is None:
        os._exit(0)
    command, fds = received  # a box
    os.write(report_fd, repr((command, len(fds), where())).encode() + b"\n")
    os._exit(0)


if __name__ == "__main__":
    main()
