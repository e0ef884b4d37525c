"""The master's light sessions and workers: records, forks, kills, box and worker sockets.

Mixed into :class:`~.master.Master` when the template is isolated (``bwrap``):
the master then lives in namespaces of its own (``home.py``), keeps light
sessions as records (``members.py``), clones boxes for its workers
(``boxes.py``) and forks the workers themselves (``worker.py``).
"""

# ruff: noqa: SIM105
from __future__ import annotations

import json
import os
import selectors
import signal
import socket
from typing import Any

from .boxes import Boxes
from .common import b36
from .home import Home
from .members import Members
from .worker import start_worker


class LightSessions:
    """Mixed into :class:`~.master.Master`: light sessions, boxes and workers."""

    cfg: dict[str, Any]
    sock_dir: str
    sel: selectors.BaseSelector
    cap: int
    home: Home | None
    members: Members | None
    boxes: Boxes | None
    workers: dict[int, socket.socket]  # pid -> the master's end of its control socket
    counter: int

    def start_light(self) -> None:
        """Enter the master's own namespaces; ready the records and the box machinery."""
        self.home = Home.enter()
        disk = int(self.cfg["limits"]["session_disk_bytes"])
        self.members = Members(self.home, disk, image=bool(self.cfg.get("image")))
        self.boxes = Boxes(self.home, self.members, self.cfg, self.cap, self.sel)

    # -- ops on records
    def light_create(self) -> str:
        assert self.members is not None
        self.counter += 1
        key = b36(self.counter)
        self.members.create(key, list(self.cfg["layers"]))
        return key

    def light_fork(self, parent: str, n: int) -> dict[str, Any]:
        assert self.members is not None
        member = self.members.get(parent)
        if member is None:
            return {"ok": False, "error": "parent session is gone", "lost": True}
        keys = []
        for _ in range(n):
            self.counter += 1
            keys.append(b36(self.counter))
        gen = member.gen
        children = self.members.fork(member, keys)
        if member.gen != gen and self.boxes is not None:  # its upper layer froze
            self.boxes.standby.drop(parent)
        return {"ok": True, "keys": [c.key for c in children]}

    def light_kill(self, key: str) -> bool:
        """Drop a light session (False: no such record); its boxes die with it."""
        if self.members is None or self.boxes is None:
            return False
        member = self.members.drop(key)
        if member is None:
            return False
        self.boxes.kill_member(member)
        return True

    def light_alive(self, keys: list[str]) -> list[str]:
        return [k for k in keys if self.members is not None and k in self.members]

    # -- workers
    def start_worker_op(self) -> dict[str, Any]:
        self.counter += 1
        wid = self.counter
        pid, ctl = start_worker(self.cfg, self.sock_dir, wid, self.cap)
        ctl.setblocking(False)
        self.workers[pid] = ctl
        self.sel.register(ctl, selectors.EVENT_READ, ("worker-ctl", pid))
        return {"ok": True, "pid": pid, "sock": f"w{wid}.sock"}

    def stop_worker(self, pid: int) -> None:
        if pid in self.workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def worker_gone(self, pid: int) -> None:
        ctl = self.workers.pop(pid, None)
        if ctl is not None:
            try:
                self.sel.unregister(ctl)
            except (KeyError, ValueError):
                pass
            ctl.close()

    def on_worker_ctl(self, pid: int) -> None:
        """A worker hands over a box connection bound to a session (see ``boxes.py``)."""
        ctl = self.workers.get(pid)
        if ctl is None or self.boxes is None:
            return
        try:
            msg, fds, _flags, _addr = socket.recv_fds(ctl, 4096, 1)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            msg, fds = b"", []
        if not msg and not fds:
            self.worker_gone(pid)
            return
        try:
            req = json.loads(msg)
            if len(fds) == 1 and isinstance(req, dict) and req.get("op") == "connect":
                # family and type given (a worker's socket pair): no syscalls to find them
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, fds.pop())
                self.boxes.add_conn(sock, str(req["session"]))
        except (ValueError, KeyError):
            pass
        finally:
            for fd in fds:
                os.close(fd)

    def light_stats(self) -> dict[str, Any]:
        if self.members is None or self.boxes is None:
            return {}
        mounted = sum(1 for m in self.members.by_key.values() if m.mounted)
        stats: dict[str, Any] = {
            "light": len(self.members.by_key),
            "mounted": mounted,
            "mount_spares": len(self.members.spares.free),
            "mounts_reused": self.members.spares.reused,
            "mounts_dirty": self.members.spares.dirty,
            "workers": len(self.workers),
        }
        stats.update(self.boxes.stats())
        return stats
