"""A networked session's egress relay R: its only way out, to the node's egress gate.

Stdlib only; runs inside the session. A networked session still has nothing
but loopback in its own network namespace. R listens on the session's
``127.0.0.1:3128`` (HTTP proxy) and ``127.0.0.1:1080`` (SOCKS5) and relays
every connection, unchanged, to the node's gate for this session:
``<key>.net.sock`` in the host-shared socket folder. The node enforces the
session's policy there (``collimate_rl/node/egress/``); R decides nothing, so
a process that kills or imitates R gains nothing: the gate's socket is the
session's identity, and only R holds a way to reach it.

R is started by the session server (``egress_link.py``) after the factory:
it binds its listeners and brings loopback up while it still may, keeps an
``O_PATH`` descriptor of the socket folder, hides ``/.collimate``, drops every
capability, becomes non-dumpable (so ``/proc/<R>/fd`` does not hand that
descriptor to the session's code) and loads its seccomp filter: the exec's allowlist
(unix sockets only: accepting on a bound TCP listener needs no ``socket()``) with no
process creation (``fork``, ``clone``, ``execve``: R is one thread that starts nothing).

>>> proxy_env()["HTTPS_PROXY"], proxy_env()["all_proxy"]
('http://127.0.0.1:3128', 'socks5h://127.0.0.1:1080')
>>> gate_socket_name("1a")
'1a.net.sock'
"""

from __future__ import annotations

import socket
from typing import Final

from .relay import Relay

#: Inside the session: the HTTP proxy (HTTP, HTTPS via CONNECT) and the SOCKS5 port.
HTTP_PROXY_PORT: Final = 3128
SOCKS_PROXY_PORT: Final = 1080
RELAY_PORTS: Final = (HTTP_PROXY_PORT, SOCKS_PROXY_PORT)


def gate_socket_name(key: str) -> str:
    """The node's gate for session ``key``, in the host-shared socket folder."""
    return f"{key}.net.sock"


def proxy_env() -> dict[str, str]:
    """The proxy variables a networked session's processes get (upper and lower case)."""
    http = f"http://127.0.0.1:{HTTP_PROXY_PORT}"
    socks = f"socks5h://127.0.0.1:{SOCKS_PROXY_PORT}"
    env: dict[str, str] = {}
    for name, value in (
        ("HTTP_PROXY", http),
        ("HTTPS_PROXY", http),
        ("ALL_PROXY", socks),
        ("NO_PROXY", "localhost,127.0.0.1,::1"),
    ):
        env[name] = value
        env[name.lower()] = value
    return env


def bind_relay_listeners() -> dict[int, socket.socket]:
    """Listen on the session's ``127.0.0.1`` relay ports (loopback must be up)."""
    out: dict[int, socket.socket] = {}
    for port in RELAY_PORTS:
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind(("127.0.0.1", port))
        lsock.listen(128)
        lsock.setblocking(False)
        out[port] = lsock
    return out


class EgressRelay(Relay):
    """Relays both ports to the gate ``<dir_fd>/<name>`` (reached through ``/proc/self/fd``).

    Args:
        listeners: port -> listening TCP socket on the session's loopback.
        dir_fd: an ``O_PATH`` descriptor of the host-shared socket folder.
        name: the gate's socket name there.
    """

    def __init__(self, listeners: dict[int, socket.socket], dir_fd: int, name: str) -> None:
        self.gate_path = f"/proc/self/fd/{dir_fd}/{name}"
        super().__init__(listeners, self._dial_gate)

    def _dial_gate(self, port: int) -> tuple[socket.socket, int]:
        inner = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        inner.setblocking(False)
        err = inner.connect_ex(self.gate_path)  # no gate yet (a pooled session): refused
        return inner, err
