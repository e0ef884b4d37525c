"""The template's master: a fork-server that creates, forks and kills sessions.

It runs as the container's first process, preloads the template's modules
and the warm trusted modules (``factory.load_warm_modules``) once, builds
the seccomp filters, then serves one request per connection on
``master.sock``: ``create``, ``fork``, ``kill``, ``killall``, ``alive``,
``ping``, ``worker``, ``stop_worker``, ``stats``. Forks of a session are all or
nothing.

Isolated (``bwrap``), it first moves into namespaces of its own (``home.py``)
and also keeps light sessions as records, clones boxes for its workers and
forks the workers (``light.py``); its loop then also serves the workers'
control sockets, their box connections and the boxes' readiness pipes.
A session created with ``{"light": true}`` is such a record.
"""

# ruff: noqa: SIM105
from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys
import time
from typing import Any

from .boxes import Boxes
from .common import b36, freeze_heap, take_low_fds
from .factory import load_warm_modules
from .framing import recv_msg, send_msg
from .home import Home
from .landlock import Fence, writable_paths
from .layout import INTERNAL_DIR
from .light import LightSessions
from .members import Members
from .seccomp import PreparedFilter, build_seccomp_filter
from .service_link import unlink_service_files
from .session_setup import SessionSetup
from .syscalls import PR_SET_CHILD_SUBREAPER, cap_last, prctl, set_name

#: How long the master waits for one host request on an accepted connection.
_REQUEST_TIMEOUT = 10.0


class Master(SessionSetup, LightSessions):
    """The template's fork-server: creates, forks and kills sessions."""

    def __init__(self, cfg: dict[str, Any], sock_dir: str) -> None:
        self.cfg = cfg
        self.isolated: bool = bool(cfg["isolated"])
        self.sock_dir = sock_dir
        self.sessions: dict[str, int] = {}  # key -> pid (master's pid ns)
        self.dead: set[int] = set()  # session servers that died, until killed/forgotten
        self.live: set[int] = set()
        self.key_of: dict[int, str] = {}
        self.networked: set[str] = set()  # keys of networked sessions (their forks are too)
        self.counter = 0
        self.lsock: socket.socket | None = None
        self.conn: socket.socket | None = None
        self.sel = selectors.DefaultSelector()
        self.cap = cap_last()
        self.home: Home | None = None
        self.members: Members | None = None
        self.boxes: Boxes | None = None
        self.workers: dict[int, socket.socket] = {}

    def preload(self) -> None:
        import importlib

        if self.isolated:
            allowlist = self.cfg.get("syscall_policy", "allowlist") != "record"
            self.cfg["_seccomp"] = PreparedFilter(build_seccomp_filter(allowlist=allowlist))
            # services and networked sessions: IP sockets too (their namespace has only lo)
            inet = build_seccomp_filter(allow_inet=True, ip_only=True, allowlist=allowlist)
            self.cfg["_seccomp_inet"] = PreparedFilter(inet)
            # the egress relay R: one thread that never starts a process (egress_relay.py)
            relay = build_seccomp_filter(no_spawn=True, allowlist=allowlist)
            self.cfg["_seccomp_relay"] = PreparedFilter(relay)
            if self.cfg.get("warm_image"):  # its image zygote (image_zygote.py)
                nest = build_seccomp_filter(nest=True, allowlist=allowlist)
                self.cfg["_seccomp_nest"] = PreparedFilter(nest)
            # the Landlock fences (landlock.py): no TCP without network; none at ABI 0
            paths = writable_paths(self.cfg)
            self.cfg["_fence"] = fence = Fence(networked=False, writable=paths)
            self.cfg["_fence_net"] = Fence(networked=True, abi=fence.abi, writable=paths)
        try:  # trusted modules, e.g. the grading harness (see factory.load_warm_modules)
            # (popped: their encoded code would stay in every image forked from here)
            load_warm_modules(self.cfg.pop("warm_modules", None))
        except Exception as exc:
            print(f"collimate master: warm modules failed: {exc!r}", file=sys.stderr)

        for name in self.cfg.get("preload") or []:
            try:
                importlib.import_module(name)
            except Exception as exc:
                print(f"collimate master: preload {name!r} failed: {exc!r}", file=sys.stderr)

    def run(self) -> None:
        set_name("col-master")
        take_low_fds()  # so every descriptor received later is >= 5 (see box.py)
        if self.isolated:
            prctl(PR_SET_CHILD_SUBREAPER, 1)
            if self.cfg.get("light", True):
                self.start_light()
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        self.preload()
        freeze_heap()
        if self.boxes is not None:
            self.boxes.start_zygote()  # a pristine fork: nothing was served yet
        path = os.path.join(self.sock_dir, "master.sock")
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(path + ".tmp")
        os.rename(path + ".tmp", path)
        lsock.listen(128)
        self.lsock = lsock
        self.sel.register(lsock, selectors.EVENT_READ, ("accept", None))
        self.sel.register(wake_r, selectors.EVENT_READ, ("wake", wake_r))
        while True:
            timeout = self.boxes.check_deadlines() if self.boxes is not None else None
            try:
                events = self.sel.select(timeout)
            except InterruptedError:
                events = []
            for key, _ in events:
                kind, obj = key.data
                try:
                    self._event(kind, obj)
                except Exception as exc:
                    print(f"collimate master: {kind} failed: {exc!r}", file=sys.stderr)

    def _event(self, kind: str, obj: Any) -> None:
        if kind == "accept":
            self._serve_host()
        elif kind == "wake":
            try:
                while os.read(obj, 512):
                    pass
            except BlockingIOError:
                pass
            self._reap()
        elif self.boxes is not None:
            if kind == "box-conn" and obj.sock.fileno() in self.boxes.conns:
                self.boxes.on_conn(obj)
            elif kind == "box-ready" and obj.ready_r >= 0:
                self.boxes.on_ready(obj)
            elif kind == "worker-ctl":
                self.on_worker_ctl(obj)

    def _serve_host(self) -> None:
        """One request per connection from the host (trusted; bounded in time)."""
        assert self.lsock is not None
        try:
            conn, _ = self.lsock.accept()
        except (BlockingIOError, InterruptedError):
            return
        self.conn = conn
        try:
            conn.settimeout(_REQUEST_TIMEOUT)
            try:
                header, _payload = recv_msg(conn)
                reply: dict[str, Any] | None = self._handle(header)
            except (EOFError, TimeoutError):
                reply = None
            except Exception as exc:
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            if reply is not None:
                try:
                    send_msg(conn, reply)
                except OSError:
                    pass
        finally:
            conn.close()
            self.conn = None

    def _reap(self) -> None:
        while True:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            if pid == 0:
                return
            if self.boxes is not None and (self.boxes.reaped(pid) or self.boxes.zygote_died(pid)):
                continue
            if pid in self.workers:
                self.worker_gone(pid)
            if pid in self.live:
                self.live.discard(pid)
                if pid in self.key_of:  # still registered: remember it died
                    self.dead.add(pid)

    def _handle(self, header: dict[str, Any]) -> dict[str, Any]:
        op = header.get("op")
        if op == "ping":
            return {"ok": True, "sessions": len(self.sessions), "pid": os.getpid()}
        if op == "create":
            network = bool(header.get("network"))
            if header.get("light") and self.members is not None and not network:
                return {"ok": True, "keys": [self.light_create()], "light": True}
            keys = self._spawn(None, [list(self.cfg["layers"])], network)
            return {"ok": True, "keys": keys}
        if op == "fork":
            parent = str(header["parent"])
            if self.members is not None and parent in self.members:
                return self.light_fork(parent, int(header["n"]))
            if parent not in self.sessions:
                return {"ok": False, "error": "parent session is gone", "lost": True}
            lowers = [str(x) for x in header["lowers"]]
            keys = self._spawn(parent, [lowers] * int(header["n"]), parent in self.networked)
            return {"ok": True, "keys": keys}
        if op == "kill":
            for key in header["keys"]:
                if not self.light_kill(str(key)):
                    self._kill(str(key))
            return {"ok": True}
        if op == "killall":
            for key in list(self.sessions):
                self._kill(key)
            if self.members is not None:
                for key in list(self.members.by_key):
                    self.light_kill(key)
            return {"ok": True}
        if op == "alive":
            keys = [str(k) for k in header["keys"]]
            light = set(self.light_alive(keys))
            return {"ok": True, "alive": [k for k in keys if k in self.sessions or k in light]}
        if op == "worker":
            if self.members is None:
                return {"ok": False, "error": "workers need the bwrap driver"}
            return self.start_worker_op()
        if op == "stop_worker":
            self.stop_worker(int(header["pid"]))
            return {"ok": True}
        if op == "stats":
            return {"ok": True, "sessions": len(self.sessions), **self.light_stats()}
        return {"ok": False, "error": f"unknown op {op!r}"}

    def _kill(self, key: str) -> None:
        pid = self.sessions.pop(key, None)
        self.networked.discard(key)
        if pid is not None and pid not in self.dead:
            if self.isolated:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            else:
                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError:
                    pass
                deadline = time.monotonic() + 2.0
                while pid not in self.dead and time.monotonic() < deadline:
                    time.sleep(0.002)
                    self._reap()
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
        if pid is not None:
            self.key_of.pop(pid, None)
            self.dead.discard(pid)
        try:
            os.unlink(os.path.join(self.sock_dir, f"{key}.sock"))
        except OSError:
            pass
        unlink_service_files(self.sock_dir, key)
        if self.isolated:
            try:
                os.rmdir(os.path.join(INTERNAL_DIR, "s", key))
            except OSError:
                pass
        else:
            import shutil

            shutil.rmtree(os.path.join(self.cfg["none_root"], key), ignore_errors=True)

    def _spawn(
        self, parent: str | None, lowers_list: list[list[str]], network: bool = False
    ) -> list[str]:
        """Fork len(lowers_list) sessions; all or nothing. Returns their keys.

        ``network``: the sessions get the egress relay and may open IP sockets
        (isolated sessions only; a fork inherits its parent's).
        """
        ns_fds: list[int] = []
        if parent is not None and self.isolated:
            ppid = self.sessions[parent]
            ns_fds = [
                os.open(f"/proc/{ppid}/ns/user", os.O_RDONLY | os.O_CLOEXEC),
                os.open(f"/proc/{ppid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC),
            ]
        started: list[tuple[str, int, int]] = []  # key, read fd, C pid
        try:
            if self.isolated:
                jobs: list[tuple[str, list[str], int]] = []
                for lowers in lowers_list:
                    self.counter += 1
                    key = b36(self.counter)
                    r, w = os.pipe2(os.O_CLOEXEC)
                    jobs.append((key, lowers, w))
                    started.append((key, r, 0))
                try:
                    if ns_fds:
                        # helpers (one per CPU) join the parent's namespaces and clone
                        n_help = max(1, min(len(jobs), os.cpu_count() or 1))
                        for h in range(n_help):
                            chunk = jobs[h::n_help]
                            if os.fork() == 0:  # pragma: no cover - child
                                mine = {w for _, _, w in chunk}
                                for _, _, w in jobs:
                                    if w not in mine:
                                        os.close(w)
                                for _, r, _ in started:
                                    os.close(r)
                                self._clone_sessions(chunk, ns_fds, network)
                    else:
                        self._clone_sessions(jobs, [], network)
                finally:
                    for _, _, w in jobs:
                        os.close(w)
            else:
                for lowers in lowers_list:
                    self.counter += 1
                    key = b36(self.counter)
                    r, w = os.pipe2(os.O_CLOEXEC)
                    pid = os.fork()
                    if pid == 0:  # pragma: no cover - child
                        os.close(r)
                        self._session_child(key, lowers, ns_fds, parent, w)
                    os.close(w)
                    started.append((key, r, pid))
            results = self._collect(started)
        finally:
            for fd in ns_fds:
                os.close(fd)
        for key, (pid, _) in results.items():
            if pid:
                self.live.add(pid)
                self.key_of[pid] = key
        errors = [err for _, (_, err) in results.items() if err]
        if errors:
            for key, (pid, _) in results.items():
                if pid:
                    self.sessions[key] = pid
                    self._kill(key)
            raise OSError(errors[0])
        for key, (pid, _) in results.items():
            self.sessions[key] = pid
            if network and self.isolated:
                self.networked.add(key)
        return [key for key, _, _ in started]

    def _collect(self, started: list[tuple[str, int, int]]) -> dict[str, tuple[int, str]]:
        """Read each child's report: 'pid N' then 'ready' (or 'error ...')."""
        sel = selectors.DefaultSelector()
        bufs: dict[int, bytearray] = {}
        for key, r, _ in started:
            sel.register(r, selectors.EVENT_READ, key)
            bufs[r] = bytearray()
        deadline = time.monotonic() + 30.0
        open_fds = {r for _, r, _ in started}
        while open_fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for skey, _ in sel.select(remaining):
                fd = int(skey.fd)
                try:
                    chunk = os.read(fd, 4096)
                except InterruptedError:
                    continue
                if chunk:
                    bufs[fd] += chunk
                else:
                    sel.unregister(fd)
                    open_fds.discard(fd)
        sel.close()
        out: dict[str, tuple[int, str]] = {}
        for key, r, _ in started:
            os.close(r)
            pid = 0
            err = ""
            ready = False
            for line in bufs[r].decode(errors="replace").splitlines():
                if line.startswith("pid "):
                    pid = int(line[4:])
                elif line == "ready":
                    ready = True
                elif line.startswith("error "):
                    err = line[6:]
            if not ready and not err:
                err = "session server did not come up"
            out[key] = (pid, err)
        return out


def main(argv: list[str]) -> int:
    """``supervisor.py master SOCK_DIR CONFIG_JSON|-``: serve forever.

    The config is the JSON text, or ``-``: read it from stdin (the node's way). A
    long argument costs every process forked from this one its copies (the
    interpreter keeps ``argv`` twice, as wide strings, ~20 bytes of image per
    byte of argument), and the warm modules' code is most of the config.
    """
    if len(argv) != 2:
        print("usage: supervisor.py master SOCK_DIR CONFIG_JSON|-", file=sys.stderr)
        return 2
    cfg = json.loads(_read_stdin() if argv[1] == "-" else argv[1])
    for path in reversed(cfg.get("sys_path") or []):
        if path not in sys.path:
            sys.path.insert(0, path)
    Master(cfg, argv[0]).run()
    return 0


def _read_stdin() -> bytes:
    """All of fd 0, which then becomes /dev/null (as it was before stdin carried the config)."""
    chunks = []
    while chunk := os.read(0, 1 << 16):
        chunks.append(chunk)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return b"".join(chunks)
