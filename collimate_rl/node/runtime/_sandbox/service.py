"""A session's service: a long-lived server process and the relay that reaches it.

Stdlib only, Python 3.10+, loaded by the supervisor (next to it, in the
read-only ``/.collimate/sup``); importing it has no side effects.

A template may declare a service (``cmd`` plus TCP ``ports``). Each isolated
session of it then forks one *keeper* K at start-up (F comes later). The
session server does the privileged part (see ``SessionServer.start_service``
in ``supervisor.py``): K binds one unix socket per declared port in the
host-shared socket directory, brings the session's loopback up, then hides
``/.collimate``, drops every capability, sets ``no_new_privs``, loads the
exec seccomp filter *with* ``AF_INET`` allowed (the session's network
namespace has nothing but loopback) and applies the exec rlimits except the
CPU-time one (a server lives as long as its session). What runs here is
unprivileged:

* K starts ``/bin/sh -c <cmd>`` as its child, in K's own process session
  (the session server's post-exec sweep spares that process session while K
  lives), its stdout/stderr on a pipe to K;
* K keeps the last :data:`LOG_TAIL` bytes of that output in
  ``<key>.svc.log`` and, when the command exits, writes its exit code to
  ``<key>.svc.exit`` (both in the socket directory, through a directory fd
  opened before ``/.collimate`` was hidden);
* K relays every connection accepted on ``<key>.p<port>.sock`` to
  ``127.0.0.1:<port>`` inside the session (``relay.py``: bytes both ways,
  half-closes passed on, a refused connect closes the accepted one).

The host side (``collimate_rl/node/runtime/bridge.py``) listens on TCP and
forwards to those unix sockets. Nothing else in the session can reach them:
execs, F and the service itself run with ``/.collimate`` hidden.
"""

# ruff: noqa: SIM105
from __future__ import annotations

import os
import selectors
import signal
import socket
from collections.abc import Callable
from typing import Any

from .relay import Relay

#: Bytes of the service's output kept for error messages.
LOG_TAIL = 8192
_CHUNK = 65536


def socket_name(key: str, port: int) -> str:
    """The relay socket of ``port`` for session ``key``.

    >>> socket_name("1a", 8000)
    '1a.p8000.sock'
    """
    return f"{key}.p{int(port)}.sock"


def bind_listeners(sock_dir: str, key: str, ports: list[int]) -> dict[int, socket.socket]:
    """Listening unix sockets, one per port (bound under a temporary name, then renamed)."""
    out: dict[int, socket.socket] = {}
    for port in ports:
        path = os.path.join(sock_dir, socket_name(key, port))
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(path + ".tmp")
        os.rename(path + ".tmp", path)
        lsock.listen(128)
        lsock.setblocking(False)
        out[int(port)] = lsock
    return out


def _dial_port(port: int) -> tuple[socket.socket, int]:
    """Start connecting to the service's ``127.0.0.1:<port>`` (inside the session)."""
    inner = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    inner.setblocking(False)
    return inner, inner.connect_ex(("127.0.0.1", port))


class Keeper(Relay):
    """Runs the service command and relays the unix sockets to its TCP ports.

    Args:
        listeners: port -> listening unix socket (non-blocking).
        argv/env/cwd: the service command.
        log_fd/exit_name/dir_fd: where the output tail and the exit code go.
        in_child: called in the forked service process before ``execve``.
    """

    def __init__(
        self,
        listeners: dict[int, socket.socket],
        *,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        log_fd: int,
        dir_fd: int,
        exit_name: str,
        devnull: int,
        in_child: Callable[[], None],
    ) -> None:
        super().__init__(listeners, _dial_port)
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.log_fd = log_fd
        self.dir_fd = dir_fd
        self.exit_name = exit_name
        self.devnull = devnull
        self.in_child = in_child
        self.tail = bytearray()
        self.child = 0
        self.out_r = -1

    # -- the service process
    def spawn(self) -> None:
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the service
            try:
                for sig in (signal.SIGCHLD, signal.SIGPIPE, signal.SIGTERM, signal.SIGINT):
                    signal.signal(sig, signal.SIG_DFL)
                self.in_child()
                os.dup2(self.devnull, 0)
                os.dup2(out_w, 1)
                os.dup2(out_w, 2)
                os.closerange(3, 1 << 16)
                os.chdir(self.cwd)
                os.execve(self.argv[0], self.argv, self.env)
            except BaseException as exc:
                try:
                    os.write(2, f"collimate: service start failed: {exc!r}\n".encode())
                except BaseException:
                    pass
            os._exit(127)
        os.close(out_w)
        os.set_blocking(out_r, False)
        self.child, self.out_r = pid, out_r
        self.selector.register(out_r, selectors.EVENT_READ, ("log", None))

    def _on_log(self) -> None:
        try:
            data = os.read(self.out_r, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.selector.unregister(self.out_r)
            os.close(self.out_r)
            self.out_r = -1
            return
        self.tail += data
        del self.tail[:-LOG_TAIL]
        try:
            os.pwrite(self.log_fd, bytes(self.tail), 0)
            os.ftruncate(self.log_fd, len(self.tail))
        except OSError:
            pass

    def _check_child(self) -> None:
        if not self.child:
            return
        try:
            pid, status = os.waitpid(self.child, os.WNOHANG)
        except ChildProcessError:
            pid, status = self.child, 0
        if pid == 0:
            return
        self.child = 0
        code = os.waitstatus_to_exitcode(status)
        tmp = self.exit_name + ".tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=self.dir_fd)
            try:
                os.write(fd, str(code).encode())
            finally:
                os.close(fd)
            os.rename(tmp, self.exit_name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
        except OSError:
            pass

    def run(self) -> None:
        """Start the service and serve until killed (never returns normally)."""
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        self.register_listeners()
        self.spawn()
        while True:
            try:
                events = self.selector.select(0.2 if self.child else None)
            except InterruptedError:
                events = []
            for key, mask in events:
                kind, obj = key.data
                if kind == "log":
                    if self.out_r >= 0:
                        self._on_log()
                else:
                    self.handle(kind, obj, mask)
            self._check_child()


def service_env(base: dict[str, str], extra: list[Any]) -> dict[str, str]:
    """The service's environment: the session's base env plus the template's.

    >>> service_env({"A": "1"}, [["B", "2"]])
    {'A': '1', 'B': '2'}
    """
    env = dict(base)
    env.update({str(k): str(v) for k, v in extra})
    return env
