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
  ``127.0.0.1:<port>`` inside the session, bytes both ways, half-closes
  passed on. A refused connect closes the accepted one.

The host side (``collimate_rl/node/runtime/bridge.py``) listens on TCP and
forwards to those unix sockets. Nothing else in the session can reach them:
execs, F and the service itself run with ``/.collimate`` hidden.
"""

# ruff: noqa: SIM105
from __future__ import annotations

import errno
import os
import selectors
import signal
import socket
from collections.abc import Callable
from typing import Any

#: Bytes of the service's output kept for error messages.
LOG_TAIL = 8192
_CHUNK = 65536
_HIGH_WATER = 1 << 20  # stop reading a side while this much waits for the other


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


def loopback_up() -> None:
    """Bring ``lo`` up (a fresh network namespace has it down); needs CAP_NET_ADMIN."""
    import fcntl
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sh14x", b"lo", 0)
        flags = struct.unpack("16sh14x", fcntl.ioctl(s.fileno(), siocgifflags, req))[1]
        fcntl.ioctl(s.fileno(), siocsifflags, struct.pack("16sh14x", b"lo", flags | iff_up))


class _Side:
    """One socket of a relayed connection and the bytes waiting to be written to it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.pending = bytearray()
        self.eof = False  # the peer will send nothing more
        self.shut = False  # we passed the peer's EOF on (SHUT_WR)


class _Pair:
    def __init__(self, outer: socket.socket, inner: socket.socket) -> None:
        self.outer = _Side(outer)
        self.inner = _Side(inner)
        self.connected = False
        self.closed = False

    def other(self, side: _Side) -> _Side:
        return self.inner if side is self.outer else self.outer


class Keeper:
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
        self.listeners = listeners
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.log_fd = log_fd
        self.dir_fd = dir_fd
        self.exit_name = exit_name
        self.devnull = devnull
        self.in_child = in_child
        self.tail = bytearray()
        self.sel = selectors.DefaultSelector()
        self.pairs: set[_Pair] = set()
        self.child = 0
        self.out_r = -1
        self.paused: set[int] = set()  # ports whose accept hit the fd limit

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
        self.sel.register(out_r, selectors.EVENT_READ, ("log", None))

    def _on_log(self) -> None:
        try:
            data = os.read(self.out_r, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.sel.unregister(self.out_r)
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

    # -- the relay
    def _accept(self, port: int) -> None:
        lsock = self.listeners[port]
        while True:
            try:
                outer, _ = lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # EMFILE: stop accepting until a connection closes (no busy loop)
                self.sel.unregister(lsock)
                self.paused.add(port)
                return
            outer.setblocking(False)
            inner = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            inner.setblocking(False)
            pair = _Pair(outer, inner)
            self.pairs.add(pair)
            err = inner.connect_ex(("127.0.0.1", port))
            if err not in (0, errno.EINPROGRESS):
                self._close(pair)
                continue
            self.sel.register(inner, selectors.EVENT_WRITE, ("connect", pair))

    def _on_connect(self, pair: _Pair) -> None:
        err = pair.inner.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        self.sel.unregister(pair.inner.sock)
        if err:
            self._close(pair)
            return
        pair.connected = True
        self.sel.register(pair.outer.sock, selectors.EVENT_READ, ("io", (pair, pair.outer)))
        self.sel.register(pair.inner.sock, selectors.EVENT_READ, ("io", (pair, pair.inner)))

    def _interest(self, pair: _Pair, side: _Side) -> None:
        if pair.closed:
            return
        other = pair.other(side)
        events = 0
        if not side.eof and len(other.pending) < _HIGH_WATER:
            events |= selectors.EVENT_READ
        if side.pending:
            events |= selectors.EVENT_WRITE
        try:
            if events:
                self.sel.modify(side.sock, events, ("io", (pair, side)))
            else:
                self.sel.unregister(side.sock)
        except KeyError:
            if events:
                self.sel.register(side.sock, events, ("io", (pair, side)))

    def _on_io(self, pair: _Pair, side: _Side, mask: int) -> None:
        other = pair.other(side)
        try:
            if mask & selectors.EVENT_READ and not side.eof:
                data = side.sock.recv(_CHUNK)
                if data:
                    other.pending += data
                else:
                    side.eof = True
            if mask & selectors.EVENT_WRITE and side.pending:
                sent = side.sock.send(side.pending)
                del side.pending[:sent]
            for a, b in ((side, other), (other, side)):
                # a's peer said EOF and everything it sent reached b: pass the EOF on
                if a.eof and not b.pending and not b.shut:
                    b.shut = True
                    b.sock.shutdown(socket.SHUT_WR)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._close(pair)
            return
        if side.shut and other.shut:
            self._close(pair)
            return
        self._interest(pair, side)
        self._interest(pair, other)

    def _close(self, pair: _Pair) -> None:
        if pair.closed:
            return
        pair.closed = True
        self.pairs.discard(pair)
        for side in (pair.outer, pair.inner):
            try:
                self.sel.unregister(side.sock)
            except (KeyError, ValueError):
                pass
            side.sock.close()
        for port in self.paused:
            self.sel.register(self.listeners[port], selectors.EVENT_READ, ("accept", port))
        self.paused.clear()

    def run(self) -> None:
        """Start the service and serve until killed (never returns normally)."""
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        for port, lsock in self.listeners.items():
            self.sel.register(lsock, selectors.EVENT_READ, ("accept", port))
        self.spawn()
        while True:
            try:
                events = self.sel.select(0.2 if self.child else None)
            except InterruptedError:
                events = []
            for key, mask in events:
                kind, obj = key.data
                if kind == "accept":
                    self._accept(obj)
                elif kind == "log":
                    if self.out_r >= 0:
                        self._on_log()
                elif kind == "connect":
                    pair = obj
                    if not pair.closed and not pair.connected:
                        self._on_connect(pair)
                else:
                    pair, side = obj
                    if not pair.closed:
                        self._on_io(pair, side, mask)
            self._check_child()


def service_env(base: dict[str, str], extra: list[Any]) -> dict[str, str]:
    """The service's environment: the session's base env plus the template's.

    >>> service_env({"A": "1"}, [["B", "2"]])
    {'A': '1', 'B': '2'}
    """
    env = dict(base)
    env.update({str(k): str(v) for k, v in extra})
    return env
