"""The session server: pid 1 of a session, serving its execs on a unix socket.

A single-threaded loop: it accepts connections from the node, forks an exec
child per ``exec`` (``exec_child.py``), collects its merged output under the
cap and the deadline, kills it when the node hangs up, sweeps leftovers
(``session_sweep.py``) and replies with the exit code, timings and the seed
acknowledgement. It also freezes the session's upper layer for a fork, and
owns the factory F (``factory_link.py``), the service keeper K
(``service_link.py``) and, in a networked session, the egress relay R
(``egress_link.py``).
"""

# ruff: noqa: SIM105
from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import struct
import time
from typing import Any

from .common import log_exception
from .egress_link import EgressLink
from .egress_relay import proxy_env
from .exec_child import ExecJob, exec_child
from .factory_link import FactoryLink
from .framing import send_msg
from .hardening import drop_bounding_set
from .image_root import mount_image_root_parts
from .landlock import Fence
from .layers import freeze_upper
from .layout import ZYGOTE_FD
from .running_exec import RunningExec
from .service_link import ServiceLink
from .session_sweep import Sweeper
from .syscalls import cap_last


class _Conn:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.need_header: int | None = None
        self.header: dict[str, Any] | None = None


class SessionServer(FactoryLink, ServiceLink, EgressLink, Sweeper):
    """Serves one session's execs on a unix socket (single-threaded loop)."""

    def __init__(
        self,
        cfg: dict[str, Any],
        lsock: socket.socket,
        *,
        isolated: bool,
        sandbox_dir: str,
        tmp_dir: str,
        layer_dir: str | None,
        lowers: list[str],
        gen: int,
        networked: bool = False,
    ) -> None:
        self.cfg = cfg
        self.lsock = lsock
        self.isolated = isolated
        self.sandbox_dir = sandbox_dir
        self.tmp_dir = tmp_dir
        self.layer_dir = layer_dir
        self.lowers = lowers
        self.gen = gen
        self.cap_last = cap_last()
        # A networked session's processes may open IP sockets: its namespace has
        # only loopback, where the egress relay R is their one way out.
        self.networked = networked and isolated
        filter_key = "_seccomp_inet" if self.networked else "_seccomp"
        self.seccomp: bytes = (cfg.get(filter_key) or b"") if isolated else b""  # prepared
        # (the none driver's: ABI 0, applies nothing)
        self.fence: Fence = cfg.get("_fence_net" if self.networked else "_fence") or Fence(False, 0)
        if isolated:
            drop_bounding_set(self.cap_last)
        self.execs: dict[int, RunningExec] = {}
        self.conns: dict[int, _Conn] = {}
        self.stopping = False
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        self.base_env: dict[str, str] = dict(cfg.get("base_env") or {})
        if self.networked:
            self.base_env.update(proxy_env())
        self.factory_pid = 0  # the pristine factory F (factory.py), 0 when none
        # F starts when the first connection arrives, before anything is read from
        # it: a session never used (an idle fork, a GRPO member forked ahead) costs
        # one process, not two, and a fork of a group does not pay for F.
        # (an image template has none: its code runs in the image's python3, not ours)
        self.factory_pending = isolated and not cfg.get("image")
        self.factory_ctl: socket.socket | None = None
        self.service_pid = 0  # the service keeper K (service.py), 0 when none
        self.relay_pid = 0  # the egress relay R (egress_relay.py), 0 when none

    # -- fds a forked exec child must not keep
    def close_fds(self) -> None:
        for conn in list(self.conns.values()):
            conn.sock.close()
        for ex in self.execs.values():
            ex.sock.close()
        if self.factory_ctl is not None:
            self.factory_ctl.close()
        self.lsock.close()
        try:
            self.sel.close()
        except Exception:
            pass

    def serve(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if not self.isolated:
            # pid 1 of a pid namespace only receives signals it handles: keep
            # the isolated server deaf to everything but SIGCHLD.
            signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        self.lsock.setblocking(False)
        self.sel.register(self.lsock, selectors.EVENT_READ, ("accept", None))
        self.sel.register(self.wake_r, selectors.EVENT_READ, ("wake", None))
        while not self.stopping:
            timeout = None
            if self.execs:
                now = time.monotonic()
                pending = [e.deadline for e in self.execs.values() if not e.timed_out]
                if pending:
                    timeout = max(0.0, min(pending) - now)
            try:
                events = self.sel.select(timeout)
            except InterruptedError:
                events = []
            for key, _ in events:
                kind, obj = key.data
                # an earlier event of this batch may have finished an exec or
                # dropped a connection (and closed its fd): skip stale events
                try:
                    if kind == "accept":
                        self._accept()
                    elif kind == "wake":
                        try:
                            while os.read(self.wake_r, 512):
                                pass
                        except BlockingIOError:
                            pass
                        self._reap()
                    elif kind == "conn":
                        conn = self.conns.get(obj.sock.fileno())
                        if conn is not None and conn is obj:
                            self._on_conn(conn)
                    else:  # "out" / "peer": only while the exec is live
                        ex = self.execs.get(obj.pid)
                        if ex is not None and ex is obj:
                            if kind == "out" and ex.out_open:
                                self._on_output(ex)
                            elif kind == "peer":
                                self._on_peer(ex)
                except Exception:
                    log_exception("session server event")
            self._check_deadlines()
            self._reap()
        self._shutdown()

    def _on_term(self, *_: Any) -> None:
        self.stopping = True

    def _shutdown(self) -> None:
        for ex in list(self.execs.values()):
            ex.kill()
        os._exit(0)

    def _accept(self) -> None:
        if self.factory_pending:
            self.factory_pending = False  # one attempt: F is never re-created
            self.start_factory()  # this server has read nothing yet
        while True:
            try:
                sock, _ = self.lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # EMFILE and friends: retry on the next wake-up
                log_exception("accept")
                return
            sock.setblocking(False)
            conn = _Conn(sock)
            self.conns[sock.fileno()] = conn
            self.sel.register(sock, selectors.EVENT_READ, ("conn", conn))

    def _drop_conn(self, conn: _Conn, close: bool = True) -> None:
        fd = conn.sock.fileno()
        if fd >= 0:
            try:
                self.sel.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
            self.conns.pop(fd, None)
        if close:
            conn.sock.close()

    def _on_conn(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(1 << 20)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop_conn(conn)
            return
        conn.buf += data
        del data
        while True:
            if conn.header is None:
                if len(conn.buf) < 4:
                    return
                (n,) = struct.unpack(">I", conn.buf[:4])
                if len(conn.buf) < 4 + n:
                    return
                conn.header = json.loads(bytes(conn.buf[4 : 4 + n]))
                del conn.buf[: 4 + n]
            plen = int(conn.header.get("payload_len", 0))
            if len(conn.buf) < plen:
                return
            payload = conn.buf[:plen]
            conn.buf[:plen] = bytes(plen)  # zero our copy of the request's files
            header = conn.header
            self._drop_conn(conn, close=False)
            conn.sock.setblocking(True)
            self._handle(conn.sock, header, payload)
            return

    def _reply(self, sock: socket.socket, header: dict[str, Any], payload: bytes = b"") -> None:
        try:
            send_msg(sock, header, payload)
        except OSError:
            pass
        finally:
            sock.close()

    def _handle(
        self, sock: socket.socket, header: dict[str, Any], payload: bytes | bytearray
    ) -> None:
        op = header.get("op")
        try:
            if op == "exec":
                self._start_exec(sock, ExecJob(header, payload))
            elif op == "ping":
                self._reply(sock, {"ok": True, "busy": len(self.execs), "pid": os.getpid()})
            elif op == "freeze":
                self._freeze(sock)
            elif op == "exit":
                self._reply(sock, {"ok": True})
                self.stopping = True
            else:
                self._reply(sock, {"ok": False, "error": f"unknown op {op!r}"})
        except Exception as exc:
            self._reply(sock, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})

    def _freeze(self, sock: socket.socket) -> None:
        if self.execs:
            self._reply(sock, {"ok": False, "busy": True, "error": "an exec is running"})
            return
        if not self.isolated or self.layer_dir is None:
            self._reply(sock, {"ok": True, "lowers": [], "gen": self.gen})
            return
        changed = freeze_upper(self.layer_dir, self.lowers, self.gen)
        if changed is not None:  # something changed since the last freeze
            self.lowers, self.gen = changed
            if self.cfg.get("image"):  # the new overlay has no /dev nor /proc inside yet
                mount_image_root_parts()
            # F's mount namespace is a copy made at its start: it still has the
            # old overlay, whose upper layer is now frozen and shared with the
            # forks. Processes F spawned would write into it, so F goes (later
            # execs fall back to a fresh interpreter).
            if self.factory_pid:
                try:
                    os.kill(self.factory_pid, signal.SIGKILL)
                except OSError:
                    pass
                self._factory_died()
        self._reply(sock, {"ok": True, "lowers": self.lowers, "gen": self.gen})

    def _start_exec(self, sock: socket.socket, job: ExecJob) -> None:
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        ack_r, ack_w = os.pipe2(os.O_CLOEXEC)
        zconn = self._factory_conn()
        zfd = zconn.fileno() if zconn is not None else -1
        if 0 <= zfd <= ZYGOTE_FD:  # the child dup2s onto 0..4 first (never the case)
            zfd = -1
        try:
            pid = os.fork()
        except BaseException:
            if zconn is not None:
                zconn.close()
            raise
        if pid == 0:  # pragma: no cover
            exec_child(self, sock, job, out_w, ack_w, self.devnull, zfd)
        if zconn is not None:
            zconn.close()
        job.drop_payload()
        os.close(out_w)
        os.close(ack_w)
        os.set_blocking(out_r, False)
        os.set_blocking(ack_r, False)
        cap = int(self.cfg["limits"]["output_cap_bytes"])
        ex = RunningExec(pid, sock, out_r, ack_r, seed=job.seed, timeout=job.timeout, cap=cap)
        self.execs[pid] = ex
        self.sel.register(out_r, selectors.EVENT_READ, ("out", ex))
        # the host hanging up (a cancelled request) kills the exec
        self.sel.register(sock, selectors.EVENT_READ, ("peer", ex))

    def _on_peer(self, ex: RunningExec) -> None:
        try:
            self.sel.unregister(ex.sock)
        except (KeyError, ValueError):
            pass
        try:
            ex.sock.setblocking(False)
            data = ex.sock.recv(1)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        finally:
            ex.sock.setblocking(True)
        if not data and ex.status is None:
            ex.cancelled = True
            ex.kill()

    def _close_out(self, ex: RunningExec) -> None:
        if ex.out_open:
            ex.out_open = False
            try:
                self.sel.unregister(ex.out_r)
            except (KeyError, ValueError):
                pass

    def _on_output(self, ex: RunningExec) -> None:
        if not ex.read_output():
            self._close_out(ex)

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for ex in list(self.execs.values()):
            if ex.status is None and not ex.timed_out and now >= ex.deadline:
                ex.timed_out = True
                ex.kill()

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            if pid == 0:
                return
            if pid == self.factory_pid:
                self._factory_died()
            if pid == self.service_pid:
                self.service_pid = 0  # its leftovers die at the next sweep
            if pid == self.relay_pid:
                self.relay_pid = 0  # killed by the session's code: no more egress
            ex = self.execs.get(pid)
            if ex is not None:
                ex.status = status
                ex.t_end = time.monotonic()
                self._finish(ex)

    def _finish(self, ex: RunningExec) -> None:
        del self.execs[ex.pid]
        try:
            self.sel.unregister(ex.sock)
        except (KeyError, ValueError):
            pass
        try:
            os.killpg(ex.pid, signal.SIGKILL)  # background jobs of the exec
        except OSError:
            pass
        if self.isolated and not self.execs:
            self._sweep()
        if ex.out_open:
            if not ex.truncated:
                ex.read_output()
            self._close_out(ex)
        os.close(ex.out_r)
        try:
            ack = os.read(ex.ack_r, 256).decode(errors="replace")
        except OSError:
            ack = ""
        os.close(ex.ack_r)
        header, payload = ex.result(ack)
        self._reply(ex.sock, header, payload)
