"""The template's master: a fork-server that creates, forks and kills sessions.

It runs as the container's first process, preloads the template's modules
and the warm trusted modules (``factory.load_warm_modules``) once, builds
the seccomp filters, then serves one request per connection on
``master.sock``: ``create``, ``fork``, ``kill``, ``killall``, ``alive``,
``ping``. Forks of a session are all or nothing.
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

from .common import b36, freeze_heap
from .factory import load_warm_modules
from .framing import recv_msg, send_msg
from .layout import INTERNAL_DIR
from .seccomp import build_seccomp_filter
from .service_link import unlink_service_files
from .session_setup import SessionSetup
from .syscalls import PR_SET_CHILD_SUBREAPER, prctl


class Master(SessionSetup):
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

    def preload(self) -> None:
        import importlib

        if self.isolated:
            self.cfg["_seccomp"] = build_seccomp_filter()
            # services and networked sessions: IP sockets too (their namespace has only lo)
            self.cfg["_seccomp_inet"] = build_seccomp_filter(allow_inet=True, ip_only=True)
        try:  # trusted modules, e.g. the grading harness (see factory.load_warm_modules)
            load_warm_modules(self.cfg.get("warm_modules"))
        except Exception as exc:
            print(f"collimate master: warm modules failed: {exc!r}", file=sys.stderr)

        for name in self.cfg.get("preload") or []:
            try:
                importlib.import_module(name)
            except Exception as exc:
                print(f"collimate master: preload {name!r} failed: {exc!r}", file=sys.stderr)

    def run(self) -> None:
        if self.isolated:
            prctl(PR_SET_CHILD_SUBREAPER, 1)
        signal.signal(signal.SIGCHLD, self._on_chld)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        self.preload()
        freeze_heap()
        path = os.path.join(self.sock_dir, "master.sock")
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(path + ".tmp")
        os.rename(path + ".tmp", path)
        lsock.listen(128)
        self.lsock = lsock
        while True:
            conn, _ = lsock.accept()
            self.conn = conn
            try:
                header, _payload = recv_msg(conn)
                reply = self._handle(header)
            except EOFError:
                reply = None
            except Exception as exc:
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            if reply is not None:
                try:
                    send_msg(conn, reply)
                except OSError:
                    pass
            conn.close()
            self.conn = None

    def _on_chld(self, *_: Any) -> None:
        while True:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.live:
                self.live.discard(pid)
                if pid in self.key_of:  # still registered: remember it died
                    self.dead.add(pid)

    def _handle(self, header: dict[str, Any]) -> dict[str, Any]:
        op = header.get("op")
        if op == "ping":
            return {"ok": True, "sessions": len(self.sessions), "pid": os.getpid()}
        if op == "create":
            keys = self._spawn(None, [list(self.cfg["layers"])], bool(header.get("network")))
            return {"ok": True, "keys": keys}
        if op == "fork":
            parent = str(header["parent"])
            if parent not in self.sessions:
                return {"ok": False, "error": "parent session is gone", "lost": True}
            lowers = [str(x) for x in header["lowers"]]
            keys = self._spawn(parent, [lowers] * int(header["n"]), parent in self.networked)
            return {"ok": True, "keys": keys}
        if op == "kill":
            for key in header["keys"]:
                self._kill(str(key))
            return {"ok": True}
        if op == "killall":
            for key in list(self.sessions):
                self._kill(key)
            return {"ok": True}
        if op == "alive":
            return {"ok": True, "alive": [k for k in header["keys"] if k in self.sessions]}
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
    """``supervisor.py master SOCK_DIR CONFIG_JSON``: serve forever."""
    if len(argv) != 2:
        print("usage: supervisor.py master SOCK_DIR CONFIG_JSON", file=sys.stderr)
        return 2
    cfg = json.loads(argv[1])
    for path in reversed(cfg.get("sys_path") or []):
        if path not in sys.path:
            sys.path.insert(0, path)
    Master(cfg, argv[0]).run()
    return 0
