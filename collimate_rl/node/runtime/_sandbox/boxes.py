"""The master's side of boxes: spawn requests, the clone, readiness, reaping.

A worker (``worker.py``) asks the master for boxes over *box connections*:
``SOCK_SEQPACKET`` sockets it hands the master over its control socket, each
bound to one light session (``{"op": "connect", "session": key}``). Requests
on a box connection, one datagram each, with the new box's descriptors
attached (``SCM_RIGHTS``):

* ``{"op": "spawn", "seed", "env", "code": "marshal"|"source", "tag"}`` with
  5 fds: a candidate process, exactly the factory's spawn protocol
  (``factory.py``), so the harness's own client speaks it unchanged;
* ``{"op": "exec"}`` with 5 fds: an exec box (``box.py``).

Reply: ``{"ok": true, "pid": N, "marshal": bool}``, for a candidate once it has
hardened itself, for an exec box at once (see ``box.py``); or ``{"ok": false,
"error": ..., "lost": bool}`` (``lost``: the session is gone). A connection
that closes takes its live boxes with it.

The clone: the zygote Z (``zygote.py``) steps into the session's mount and IPC
namespaces and a pooled network namespace (``netpool.py``), clones with
``CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_PARENT`` and steps back;
the box is the master's child, which reaps it.
"""

# ruff: noqa: SIM105
from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from .box import FD_COUNT, BoxSpec
from .factory import marshal_tag
from .home import Home
from .members import Member, Members
from .netpool import NetPool
from .syscalls import CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER
from .zygote import Zygote

MAX_REQUEST = 1 << 16
#: A box that has not said it is ready by then is killed and its spawn fails.
READY_TIMEOUT = 20.0
_SEED_HEX = frozenset("0123456789abcdefABCDEF")


@dataclass
class BoxConn:
    """A worker's connection bound to one session."""

    sock: socket.socket
    key: str
    boxes: set[int] = field(default_factory=set)


@dataclass
class Box:
    pid: int
    key: str
    conn: BoxConn
    slot: int  # the pooled network namespace, -1 for a fresh one
    ready_r: int = -1
    deadline: float = 0.0
    marshal: bool = False


class BadRequest(ValueError):
    pass


class Boxes:
    """Spawns boxes for box connections and keeps track of them until reaped."""

    def __init__(
        self,
        home: Home,
        members: Members,
        cfg: dict[str, Any],
        cap_last: int,
        sel: selectors.BaseSelector,
    ) -> None:
        self.home = home
        self.members = members
        self.cfg = cfg
        self.cap_last = cap_last
        self.sel = sel
        self.net = NetPool(home)
        self.conns: dict[int, BoxConn] = {}
        self.live: dict[int, Box] = {}  # pid -> box, until reaped
        self.pending: dict[int, Box] = {}  # ready_r -> box, until it says it is ready
        self.space = socket.CMSG_SPACE(5 * 4)
        self.zygote: Zygote | None = None  # started with the master (``start_zygote``)

    def start_zygote(self) -> None:
        """Fork Z now: before the master has served anything (see ``zygote.py``)."""
        self._zygote()

    # -- connections
    def add_conn(self, sock: socket.socket, key: str) -> None:
        sock.setblocking(False)
        conn = BoxConn(sock, key)
        self.conns[sock.fileno()] = conn
        self.sel.register(sock, selectors.EVENT_READ, ("box-conn", conn))

    def _drop_conn(self, conn: BoxConn) -> None:
        fd = conn.sock.fileno()
        if self.conns.pop(fd, None) is None:
            return
        try:
            self.sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()
        for pid in list(conn.boxes):  # the worker is done with them (or died)
            self.kill(pid)

    def on_conn(self, conn: BoxConn) -> None:
        try:
            msg, fds, flags, _addr = socket.recv_fds(conn.sock, MAX_REQUEST, 5)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop_conn(conn)
            return
        try:
            if not msg and not fds:
                self._drop_conn(conn)
                return
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                raise BadRequest("request too large")
            self._spawn(conn, msg, fds)
        except BadRequest as exc:
            self._reply(conn, {"ok": False, "error": f"bad request: {exc}"})
        except OSError as exc:
            self._reply(conn, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def _reply(self, conn: BoxConn, reply: dict[str, Any]) -> bool:
        try:
            conn.sock.send(json.dumps(reply).encode())
            return True
        except OSError:  # would block or the worker is gone: never wait for it
            self._drop_conn(conn)
            return False

    # -- spawning
    def _spawn(self, conn: BoxConn, msg: bytes, fds: list[int]) -> None:
        req = _parse(msg, fds)
        member = self.members.get(conn.key)
        if member is None:
            self._reply(conn, {"ok": False, "error": "the session is gone", "lost": True})
            return
        self.members.mount(member)
        role = "exec" if req["op"] == "exec" else "candidate"
        use_marshal = role == "candidate" and req.get("tag") == marshal_tag()
        spec = BoxSpec(
            role,
            fds,
            -1,
            self.cfg,
            self.cap_last,
            seed=str(req.get("seed") or ""),
            env=dict(req.get("env") or {}),
        )
        box = self._clone(member, conn, spec)
        box.marshal = use_marshal

    def _clone(self, member: Member, conn: BoxConn, spec: BoxSpec) -> Box:
        """Have Z clone the box. A candidate's spawn is answered once it is ready; an
        exec box's at once (it reports a failed set-up on its status pipe instead)."""
        slot = self.net.acquire()
        ready_r, ready_w = os.pipe2(os.O_CLOEXEC) if spec.role == "candidate" else (-1, -1)
        spec.ready_w = ready_w
        flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | (CLONE_NEWNET if slot < 0 else 0)
        try:
            pid = self._zygote().clone(spec, flags, member.mnt, member.ipc, slot)
        except BaseException:
            if ready_r >= 0:
                os.close(ready_r)
            self.net.release(slot)
            raise
        finally:
            if ready_w >= 0:
                os.close(ready_w)
        box = Box(pid, member.key, conn, slot, ready_r, time.monotonic() + READY_TIMEOUT)
        self.live[pid] = box
        member.boxes.add(pid)
        conn.boxes.add(pid)
        if ready_r < 0:
            self._reply(conn, {"ok": True, "pid": pid})
        else:
            self.pending[ready_r] = box
            self.sel.register(ready_r, selectors.EVENT_READ, ("box-ready", box))
        return box

    def _zygote(self) -> Zygote:
        """Z, (re)started on demand: the master never read a test, so a fork of it is pristine."""
        if self.zygote is None:
            self.zygote = Zygote.start(self.home, self.cfg, self.cap_last)
        return self.zygote

    def zygote_died(self, pid: int) -> bool:
        if self.zygote is None or self.zygote.pid != pid:
            return False
        self.zygote.sock.close()
        self.zygote = None
        return True

    def on_ready(self, box: Box) -> None:
        try:
            said = os.read(box.ready_r, 4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            said = b""
        self._settle(box, said)

    def _settle(self, box: Box, said: bytes) -> None:
        """The box is ready (``ok``), failed (``error ...``) or died (empty): answer its spawn."""
        if box.ready_r < 0:
            return
        self.pending.pop(box.ready_r, None)
        try:
            self.sel.unregister(box.ready_r)
        except (KeyError, ValueError):
            pass
        os.close(box.ready_r)
        box.ready_r = -1
        if said == b"ok":
            if self._reply(box.conn, {"ok": True, "pid": box.pid, "marshal": box.marshal}):
                return
        else:
            why = said.decode(errors="replace")[6:] if said.startswith(b"error ") else "it died"
            self._reply(box.conn, {"ok": False, "error": f"the box did not start: {why}"})
        self.kill(box.pid)

    def check_deadlines(self) -> float | None:
        """Fail boxes that never got ready; seconds until the next deadline (or None)."""
        now = time.monotonic()
        for box in list(self.pending.values()):
            if now >= box.deadline:
                self._settle(box, b"error not ready in time")
        if not self.pending:
            return None
        return max(0.0, min(b.deadline for b in self.pending.values()) - now)

    # -- the end of a box
    def kill(self, pid: int) -> None:
        """SIGKILL a box (its pid namespace dies with it); it stays ours until reaped."""
        if pid in self.live:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def kill_member(self, member: Member) -> None:
        """Kill a dropped session's boxes and tell its connections it is gone."""
        for pid in list(member.boxes):
            self.kill(pid)
        for conn in [c for c in self.conns.values() if c.key == member.key]:
            self._reply(conn, {"ok": False, "error": "the session is gone", "lost": True})

    def reaped(self, pid: int) -> bool:
        """A child exited; True if it was a box (its network namespace is free again)."""
        box = self.live.pop(pid, None)
        if box is None:
            return False
        if box.ready_r >= 0:
            self._settle(box, b"")
        self.net.release(box.slot)
        box.conn.boxes.discard(pid)
        member = self.members.get(box.key)
        if member is not None:
            member.boxes.discard(pid)
        return True

    def stats(self) -> dict[str, int]:
        return {
            "boxes": len(self.live),
            "box_conns": len(self.conns),
            "netns": self.net.made,
            "netns_free": len(self.net.free),
            "netns_dropped": self.net.dropped,
        }


def _parse(msg: bytes, fds: list[int]) -> dict[str, Any]:
    try:
        req = json.loads(msg.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(str(exc)) from None
    if not isinstance(req, dict) or req.get("op") not in ("spawn", "exec"):
        raise BadRequest("op must be spawn or exec")
    role = "exec" if req["op"] == "exec" else "candidate"
    if len(fds) != FD_COUNT[role]:
        raise BadRequest(f"pass {FD_COUNT[role]} fds")
    if role == "candidate":
        seed = req.get("seed")
        if not (isinstance(seed, str) and len(seed) == 64 and set(seed) <= _SEED_HEX):
            raise BadRequest("seed must be 64 hex digits")
        env = req.get("env")
        if not isinstance(env, dict) or not all(
            type(k) is str and type(v) is str and k and "=" not in k and "\0" not in k + v
            for k, v in env.items()
        ):
            raise BadRequest("env must map names to strings")
        if req.get("code") != "marshal":
            raise BadRequest("boxes run marshal programs only")
    return req
