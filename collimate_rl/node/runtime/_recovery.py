"""Owning a state dir, and clearing what a crashed node left in one.

A running runtime holds an exclusive ``flock`` on ``<state>/node.lock`` for
its whole life and keeps ``<state>/node.run.json`` (its *run record*) up to
date: its pid and start time, the template hosts it launched, its memory
cgroups and its listen socket. The kernel drops a flock together with the
last descriptor of its holder, so a free lock proves the previous owner is
dead, however it died. A runtime starting on a dir whose lock is free first
clears what the previous run left:

* processes of that run: recorded template hosts (checked by pid *and* start
  time, so a reused pid is never hit) and their process groups/sessions,
  every task in the run's memory cgroups, and processes whose working
  directory lies in the run's template dirs (the ``none`` driver's sessions);
* mounts under the state dir (in this mount namespace);
* the run's memory cgroups (cgroup v1, named ``collimate-<tag>-*``);
* its listen socket, if nobody listens on it any more;
* the template dirs (session folders, session sockets) and baked layers.

A second node on a dir whose lock is held fails with :class:`StateDirBusy`
and touches nothing. :func:`sweep_orphan_state_dirs` does the same recovery
for default (``mkdtemp``) state dirs of crashed nodes, then removes them.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as tmp:
...     claim, cleaned = claim_state_dir(Path(tmp) / "state")
...     try:
...         claim_state_dir(Path(tmp) / "state")
...     except StateDirBusy as exc:
...         print("busy:", "in use by a live node" in str(exc))
...     finally:
...         claim.release()
busy: True
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Final

from .base import RuntimeError_

__all__ = [
    "LOCK_NAME",
    "RECORD_NAME",
    "Cleanup",
    "StateClaim",
    "StateDirBusy",
    "claim_state_dir",
    "die_with_parent_preexec",
    "process_start",
    "recover_state_dir",
    "sweep_orphan_state_dirs",
]

log = logging.getLogger("collimate_rl.node.runtime")

#: The lock file a live runtime holds an exclusive flock on.
LOCK_NAME: Final = "node.lock"
#: The run record: who owns the dir and what it launched.
RECORD_NAME: Final = "node.run.json"
#: Prefix of the default state dirs (``tempfile.mkdtemp``).
TEMP_PREFIX: Final = "collimate-node-"
#: The runtime's own subdirectories (everything else in an explicit dir is left alone).
_RUNTIME_SUBDIRS: Final = ("t", "layers")


class StateDirBusy(RuntimeError_):
    """Another live node owns this state dir."""


@dataclass
class Cleanup:
    """What a recovery removed (all zero for a clean dir).

    >>> Cleanup().summary(), bool(Cleanup(processes=2))
    ('nothing', True)
    """

    processes: int = 0
    mounts: int = 0
    cgroups: int = 0
    sockets: int = 0
    paths: int = 0

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    def summary(self) -> str:
        """``"2 processes, 1 cgroups"``, or ``"nothing"``."""
        parts = [f"{getattr(self, f.name)} {f.name}" for f in fields(self) if getattr(self, f.name)]
        return ", ".join(parts) or "nothing"


# -- /proc helpers -------------------------------------------------------------


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` from the state field on (index 0 = field 3), or ``None``."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    return raw.rsplit(")", 1)[1].split()


def process_start(pid: int) -> int | None:
    """The start time (clock ticks since boot) of a live, non-zombie ``pid``, else ``None``.

    Together with the pid it names one process for the whole boot.

    >>> process_start(os.getpid()) is not None, process_start(0)
    (True, None)
    """
    if pid <= 0:
        return None
    f = _stat_fields(pid)
    if f is None or f[0] in ("Z", "X"):
        return None
    return int(f[19])


def _all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _protected() -> set[int]:
    """This process and its ancestors: never killed, whatever a record says."""
    out, pid = set(), os.getpid()
    while pid > 0 and pid not in out:
        out.add(pid)
        f = _stat_fields(pid)
        pid = int(f[1]) if f else 0
    return out


def _under(path: str, root: Path) -> bool:
    return path == str(root) or path.startswith(str(root).rstrip("/") + "/")


# -- the run record ------------------------------------------------------------


def _read_record(state_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((state_dir / RECORD_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class StateClaim:
    """This run's ownership of a state dir: the held lock and the run record.

    Args:
        state_dir: the dir.
        fd: the lock file's descriptor (flocked).
        owned: the runtime created the dir (a default temp dir): a sweep may
            remove it whole once its node is dead.
    """

    def __init__(self, state_dir: Path, fd: int, *, owned: bool) -> None:
        self.state_dir = state_dir
        self._fd: int | None = fd
        self.record: dict[str, Any] = {
            "pid": os.getpid(),
            "start": process_start(os.getpid()),
            "boot_id": _boot_id(),
            "owned": owned,
            "hosts": [],
            "memcg_parent": None,
            "memcg_tag": None,
            "listen_socket": None,
        }
        self._write()

    def _write(self) -> None:
        tmp = self.state_dir / f".{RECORD_NAME}.tmp"
        tmp.write_text(json.dumps(self.record))
        os.replace(tmp, self.state_dir / RECORD_NAME)

    def note_host(self, pid: int) -> None:
        """Record a process this run launched (a template host, a bake)."""
        self.record["hosts"].append([pid, process_start(pid)])
        self._write()

    def note_memcg(self, parent: Path | None, tag: str) -> None:
        """Record where this run's memory cgroups live (``<parent>/collimate-<tag>-*``)."""
        self.record["memcg_parent"] = str(parent) if parent is not None else None
        self.record["memcg_tag"] = tag
        self._write()

    def note_listen_socket(self, path: Path | None) -> None:
        """Record the unix socket the node serves on."""
        self.record["listen_socket"] = str(path) if path is not None else None
        self._write()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Forget the run record and drop the lock. Idempotent.

        The lock file itself stays: unlinking it would let a node waiting on
        the old inode and a new one on a fresh file both believe they own the dir.
        """
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            (self.state_dir / RECORD_NAME).unlink()
        os.close(fd)


def _try_lock(fd: int, wait: float) -> bool:
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


def claim_state_dir(
    state_dir: Path, *, owned: bool = False, wait: float = 0.0
) -> tuple[StateClaim, Cleanup]:
    """Take ``state_dir`` for this process, clearing what a dead previous owner left.

    Args:
        state_dir: the dir (created if missing).
        owned: the runtime created it (see :class:`StateClaim`).
        wait: seconds to wait for the lock before giving up.

    Raises:
        StateDirBusy: a live node holds the dir; nothing was touched.
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(state_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        if not _try_lock(fd, wait):
            holder = _read_record(state_dir).get("pid", "unknown")
            raise StateDirBusy(
                f"state dir {state_dir} is in use by a live node (pid {holder}); "
                "stop that node or pass another --state-dir"
            )
        cleaned = recover_state_dir(state_dir)
    except BaseException:
        os.close(fd)
        raise
    if cleaned:
        log.warning(
            "state dir %s: cleared leftovers of a crashed node: %s", state_dir, cleaned.summary()
        )
    return StateClaim(state_dir, fd, owned=owned), cleaned


# -- recovery -----------------------------------------------------------------


def recover_state_dir(state_dir: Path) -> Cleanup:
    """Clear the leftovers of the run recorded in ``state_dir``. The caller holds the lock."""
    record = _read_record(state_dir)
    same_boot = bool(record) and record.get("boot_id") == _boot_id()
    out = Cleanup()
    cgroups = _run_cgroups(record)
    if same_boot or (not record and (state_dir / "t").exists()):
        out.processes = _kill(_leftover_pids(state_dir, record, cgroups))
    out.mounts = _unmount_under(state_dir)
    out.cgroups = _remove_cgroups(cgroups)
    out.sockets = _remove_stale_socket(record.get("listen_socket"))
    for name in _RUNTIME_SUBDIRS:
        sub = state_dir / name
        if sub.is_dir() and any(sub.iterdir()):
            out.paths += sum(1 for _ in sub.iterdir())
        shutil.rmtree(sub, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        (state_dir / RECORD_NAME).unlink()
    return out


def _run_cgroups(record: dict[str, Any]) -> list[Path]:
    parent, tag = record.get("memcg_parent"), record.get("memcg_tag")
    if not parent or not tag:
        return []
    try:
        return sorted(Path(parent).glob(f"collimate-{tag}-*"))
    except OSError:
        return []


def _leftover_pids(state_dir: Path, record: dict[str, Any], cgroups: list[Path]) -> set[int]:
    """Every live process that provably belongs to the recorded run."""
    found: set[int] = set()
    groups: set[int] = set()  # process groups / sessions led by a recorded host
    for pid, start in record.get("hosts") or []:
        now = process_start(int(pid))
        if now is not None and now == start:
            found.add(int(pid))
            groups.add(int(pid))
        elif now is None:
            # The leader is gone; the kernel does not reuse a pid that still
            # names a live group or session, so members of it are ours.
            groups.add(int(pid))
    for cg in cgroups:
        with contextlib.suppress(OSError, ValueError):
            found.update(int(p) for p in (cg / "cgroup.procs").read_text().split())
    templates = state_dir / "t"
    for pid in _all_pids():
        f = _stat_fields(pid)
        if f is None or f[0] in ("Z", "X"):
            continue
        if int(f[2]) in groups or int(f[3]) in groups:
            found.add(pid)
            continue
        with contextlib.suppress(OSError):
            if _under(os.readlink(f"/proc/{pid}/cwd"), templates):
                found.add(pid)
    return found - _protected()


def _kill(pids: set[int], wait: float = 5.0) -> int:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + wait
    while any(process_start(p) is not None for p in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    return len(pids)


def _mount_points() -> list[str]:
    out: list[str] = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split()
        if len(parts) > 4:
            # mountinfo escapes space, tab, newline and backslash as \ooo
            out.append(parts[4].encode().decode("unicode_escape"))
    return out


def _unmount_under(state_dir: Path) -> int:
    root = state_dir.resolve()
    points = [p for p in _mount_points() if _under(p, root) and p != str(root)]
    if not points:
        return 0
    from ._sandbox import syscalls as sv

    done = 0
    for point in sorted(points, key=len, reverse=True):  # deepest first
        try:
            sv.umount2(point, sv.MNT_DETACH)
            done += 1
        except OSError as exc:
            log.warning("could not unmount stale %s: %s", point, exc)
    return done


def _remove_cgroups(cgroups: list[Path]) -> int:
    removed = 0
    for cg in cgroups:
        for _ in range(200):
            try:
                cg.rmdir()
                removed += 1
                break
            except FileNotFoundError:
                break
            except OSError:  # tasks still exiting
                time.sleep(0.01)
        else:
            log.warning("could not remove stale memory cgroup %s", cg)
    return removed


def _remove_stale_socket(path: str | None) -> int:
    """Unlink ``path`` if it is a unix socket nobody listens on."""
    if not path:
        return 0
    try:
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            return 0
    except OSError:
        return 0
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
        return 0  # somebody (a new node) listens there now
    except OSError:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return 1
    finally:
        probe.close()


def die_with_parent_preexec() -> Callable[[], None]:
    """A ``preexec_fn`` giving the child SIGKILL when the spawning thread's process dies.

    Like bwrap's ``--die-with-parent``: the signal is tied to the thread that
    spawns the child (the runtime spawns on its event-loop thread).
    """
    from ._sandbox import syscalls as sv

    sv.libc()  # load before fork
    parent = os.getpid()

    def preexec() -> None:
        sv.prctl(sv.PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the prctl
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def sweep_orphan_state_dirs(tmp_dir: Path, prefix: str = TEMP_PREFIX) -> int:
    """Recover and remove default state dirs of dead nodes in ``tmp_dir``; how many.

    Only a dir with a run record saying the runtime created it, whose lock is
    free, is touched: dirs of live nodes, explicit ``--state-dir`` dirs and
    anything without a record are left alone.
    """
    swept = 0
    try:
        candidates = sorted(tmp_dir.glob(f"{prefix}*"))
    except OSError:
        return 0
    for d in candidates:
        if not _read_record(d).get("owned"):
            continue
        try:
            fd = os.open(d / LOCK_NAME, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if not _try_lock(fd, 0.0) or not _read_record(d).get("owned"):
                continue
            cleaned = recover_state_dir(d)
            shutil.rmtree(d, ignore_errors=True)
            swept += 1
            log.warning("removed %s, left by a crashed node (%s)", d, cleaned.summary())
        finally:
            os.close(fd)
    return swept
