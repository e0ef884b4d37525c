"""Nodes these tests own and kill, and the leak checks that follow every fault.

A :class:`NodeProcess` is ``python -m collimate_rl.node serve`` on a unix
socket and an explicit state dir, both kept across restarts so a test can
crash a node and start the next one on the same address and state. A
:class:`RunSnapshot` remembers what one run owned (its process tree, its
memory cgroups) so the test can prove all of it is gone afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from collimate_rl.node.runtime._recovery import RECORD_NAME, process_start
from collimate_rl.wire import CollimateClient

ISOLATION = os.environ.get("COLLIMATE_FAULT_ISOLATION", "auto")


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(entry.name))
    return kids


def process_tree(root: int) -> set[tuple[int, int]]:
    """``(pid, start)`` of ``root`` and every live descendant."""
    kids, out, todo = _children(), set(), [root]
    while todo:
        pid = todo.pop()
        start = process_start(pid)
        if start is not None:
            out.add((pid, start))
        todo.extend(kids.get(pid, []))
    return out


def alive(procs: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The members of ``procs`` still running (same pid *and* start time, not a zombie)."""
    return {(pid, start) for pid, start in procs if process_start(pid) == start}


def standby_exec_boxes(procs: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The members of ``procs`` that are standby exec boxes: a ``col-exec`` init with no
    child, waiting for a busy light session's next exec (docs/fast-path.md)."""
    kids = _children()
    out = set()
    for pid, start in alive(procs):
        if comm(pid) == "col-exec" and not kids.get(pid):
            out.add((pid, start))
    return out


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                cmdline = (entry / "cmdline").read_bytes()
                if marker.encode() in cmdline and process_start(int(entry.name)) is not None:
                    found.append(int(entry.name))
    return found


def session_sockets(state_dir: Path) -> list[Path]:
    """Session sockets in a state dir (the master's excluded)."""
    return [p for p in state_dir.glob("t/*/socks/*.sock") if p.name != "master.sock"]


@dataclass
class RunSnapshot:
    """What one node run owned, taken while it was alive."""

    processes: set[tuple[int, int]]
    cgroups: list[Path]
    memcg_parent: str | None
    memcg_tag: str | None

    def cgroups_now(self) -> list[Path]:
        if not self.memcg_parent or not self.memcg_tag:
            return []
        return sorted(Path(self.memcg_parent).glob(f"collimate-{self.memcg_tag}-*"))

    def assert_gone(self, timeout: float = 10.0, *, cgroups: bool = True) -> None:
        """Every process (and memory cgroup) of the run is gone (waits up to ``timeout``)."""
        deadline = time.monotonic() + timeout

        def left() -> bool:
            return bool(alive(self.processes) or (cgroups and self.cgroups_now()))

        while left() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive(self.processes) == set(), f"leaked processes: {alive(self.processes)}"
        if cgroups:
            assert self.cgroups_now() == [], f"leaked cgroups: {self.cgroups_now()}"


class NodeProcess:
    """A node subprocess on ``<workdir>/node.sock`` with state in ``<workdir>/state``.

    Args:
        workdir: the folder for the socket, state dir and logs (the test's tmp_path).
        flags: more ``serve`` flags.
    """

    def __init__(
        self,
        workdir: Path,
        *flags: str,
        isolation: str = ISOLATION,
        state: Path | None = None,
        env: dict[str, str] | None = None,
        state_flag: bool = True,
    ) -> None:
        self.workdir = workdir
        self.socket = workdir / "node.sock"
        self.state = state if state is not None else workdir / "state"
        self.env = env
        self.state_flag = state_flag
        self.flags = list(flags)
        self.isolation = isolation
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    @property
    def log(self) -> Path:
        return self.workdir / f"node-{self.runs}.log"

    def start(self, timeout: float = 60.0) -> NodeProcess:
        """Start a node (a new run) and wait for ``/v1/health``."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.runs += 1
        argv = [sys.executable, "-m", "collimate_rl.node", "serve"]
        argv += ["--socket", str(self.socket)]
        if self.state_flag:
            argv += ["--state-dir", str(self.state)]
        argv += ["--isolation", self.isolation, "--log-level", "warning", *self.flags]
        env = {**os.environ, **(self.env or {})}
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        with self.http(2.0) as http:
            while True:
                if self.proc.poll() is not None:
                    raise AssertionError(f"node exited {self.proc.returncode}: {self.log_text()}")
                with contextlib.suppress(httpx.TransportError):
                    if http.get("/v1/health").status_code == 200:
                        return self
                assert time.monotonic() < deadline, f"node did not start: {self.log_text()}"
                time.sleep(0.05)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def http(self, timeout: float = 60.0) -> httpx.Client:
        transport = httpx.HTTPTransport(uds=str(self.socket))
        return httpx.Client(base_url="http://localhost", transport=transport, timeout=timeout)

    def client(self, **kwargs: Any) -> CollimateClient:
        return CollimateClient(unix_socket=str(self.socket), **kwargs)

    def record(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.state / RECORD_NAME).read_text())
        return data

    def snapshot(self) -> RunSnapshot:
        rec = self.record()
        snap = RunSnapshot(process_tree(self.pid), [], rec["memcg_parent"], rec["memcg_tag"])
        snap.cgroups = snap.cgroups_now()
        return snap

    def kill(self) -> None:
        """SIGKILL the node (a crash: no drain, no cleanup)."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (drain) and wait; SIGKILL past ``timeout``. Idempotent."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc is not None else None
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()

    def assert_clean_stop(self) -> None:
        """After a stop: no socket, no record, no template dirs or layers left."""
        assert not self.socket.exists()
        assert not (self.state / RECORD_NAME).exists()
        assert not (self.state / "t").exists() and not (self.state / "layers").exists()


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _is_supervisor(pid: int) -> bool:
    argv = _cmdline(pid).split(b"\0")
    return not argv[0].endswith(b"bwrap") and any(a.endswith(b"supervisor.py") for a in argv)


def template_master(node: NodeProcess) -> int:
    """The host pid of the node's (first) template master: a supervisor not forked by one."""
    for pid, _ in sorted(process_tree(node.pid)):
        if _is_supervisor(pid) and not _is_supervisor(_ppid(pid)):
            return pid
    raise AssertionError("no template master in the node's process tree")


def comm(pid: int) -> str:
    """A process's name (``""`` once it is gone)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def children_of(pid: int) -> set[int]:
    """Live direct children of ``pid``."""
    return {p for p in _children().get(pid, []) if process_start(p) is not None}
