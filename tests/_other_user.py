"""Acting as another local user: a forked child that drops to an unprivileged uid.

The tests run as root; a containment that holds "against other users of the
host" is attacked from a child that ``setuid``s to :data:`OTHER_UID`, a uid no
account uses, and reports what it saw through a pipe.
"""

from __future__ import annotations

import os
import socket

import pytest

#: An unprivileged uid for the attacker (no account uses it; not the sandbox uid).
OTHER_UID = 2_100_000_007

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another uid")


def _drop() -> None:
    os.setgroups([])
    os.setgid(OTHER_UID)
    os.setuid(OTHER_UID)


def connect_as_other_user(address: str, payload: bytes, timeout: float = 10.0) -> str:
    """Connect to ``host:port`` (or a unix socket path) as :data:`OTHER_UID`, send
    ``payload``, read until EOF.

    Returns ``"read <n> bytes: <first bytes>"`` or ``"error <exception type>"``.
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only plain syscalls, then _exit
        code = 0
        try:
            os.close(r)
            _drop()
            if address.startswith("/"):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(timeout)
                sock.connect(address)
            else:
                host, port = address.rsplit(":", 1)
                sock = socket.create_connection((host, int(port)), timeout=timeout)
            sock.sendall(payload)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
            os.write(w, f"read {len(data)} bytes: {data[:200]!r}".encode())
        except BaseException as exc:
            os.write(w, f"error {type(exc).__name__}".encode())
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode(errors="replace")
