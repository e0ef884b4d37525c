"""The master's side of boxes: spawn requests, the clone, standby exec boxes, reaping.

A worker (``worker.py``) asks the master for boxes over *box connections*:
``SOCK_SEQPACKET`` sockets it hands the master over its control socket, each
bound to one light session (``{"op": "connect", "session": key}``). Requests
on a box connection, one datagram each:

* ``{"op": "spawn", "seed", "env", "code": "marshal"|"source", "tag"}`` with the
  candidate's 5 fds attached (``SCM_RIGHTS``): a candidate process, exactly the
  factory's spawn protocol (``factory.py``), so the harness's own client speaks it
  unchanged. Reply, once it has hardened itself: ``{"ok": true, "pid": N,
  "marshal": bool}``.
* ``{"op": "exec", "spawn": bool}``, no fds: an exec box (``box.py``). Reply at
  once: ``{"ok": true, "pid": N}`` with the worker's ends of the box's pipes
  attached: the job pipe, the merged output, the seed acknowledgement and the
  status pipe.
* ``{"op": "warm-image"}``, no fds: an image template's grade, for a session whose
  files are the template's: an image worker of its warm fork-server (``image_zygote.py``),
  the connection's until it closes. Reply: ``{"ok": true}`` with the worker's socket and
  a pidfd of it (what the node worker kills at the deadline), or ``{"ok": false,
  "fallback": true}``: run the grade as an exec instead.

A failure is ``{"ok": false, "error": ..., "lost": bool}`` (``lost``: the session
is gone). A connection that closes takes its live boxes with it.

Exec boxes may wait for their session's next exec, hardened: ``standby.py``.

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
from typing import Any

from .box import BoxSpec
from .box_records import Box, BoxConn
from .box_requests import MAX_REQUEST, MAX_REQUEST_FDS, BadRequest, parse_request
from .environ import environ_changes, template_env
from .factory import marshal_tag
from .home import Home
from .image_zygote import ImageZygote
from .layout import ZYGOTE_ENV
from .members import Member, Members
from .netpool import NetPool
from .standby import STANDBY_AFTER_EXECS, Standby, close_all, exec_pipes
from .syscalls import CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER
from .zygote import Zygote

#: A box that has not said it is ready by then is killed and its spawn fails.
READY_TIMEOUT = 20.0


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
        self.template_env = template_env(cfg)  # Z's environment
        self.net = NetPool(home)
        self.conns: dict[int, BoxConn] = {}
        self.live: dict[int, Box] = {}  # pid -> box, until reaped
        self.pending: dict[int, Box] = {}  # ready_r -> box, until it says it is ready
        self.standby = Standby(self._clone_exec, self.kill)
        self.zygote: Zygote | None = None  # started with the master (``start_zygote``)
        #: an image template's warm fork-server (started on its first grade)
        self.image_zygote = ImageZygote(self, cfg) if cfg.get("image") else None

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
        if conn.image_worker is not None and self.image_zygote is not None:
            self.image_zygote.give_back(conn.image_worker)  # the grade is over
            conn.image_worker = None
        member = self.members.get(conn.key) if conn.arm else None
        kept = False
        for pid in list(conn.boxes):  # the worker is done with them (or died)
            if member is not None and self.standby.keep(self.live.get(pid), member):
                kept = True
            else:
                self.kill(pid)
        if member is not None and not kept:
            self.standby.arm(member)

    def on_conn(self, conn: BoxConn) -> None:
        try:
            msg, fds, flags, _addr = socket.recv_fds(conn.sock, MAX_REQUEST, MAX_REQUEST_FDS)
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
        req = parse_request(msg, fds)
        member = self.members.get(conn.key)
        if member is None:
            self._reply(conn, {"ok": False, "error": "the session is gone", "lost": True})
            return
        if req["op"] == "warm-image":  # (before the mount: its files stay the template's)
            self._warm_image(conn, member)
            return
        self.members.mount(member)
        if req["op"] == "exec":
            self._exec(conn, member, bool(req.get("spawn", False)))
            return
        seed = str(req["seed"])
        env = {**req["env"], "COLLIMATE_SEED": seed}
        env.pop(ZYGOTE_ENV, None)
        # the box starts from Z's environment: it gets the changes only (environ.py)
        changes = environ_changes(self.template_env, env)
        spec = BoxSpec("candidate", fds, -1, self.cfg, self.cap_last, seed=seed, env=changes)
        ready_r, spec.ready_w = os.pipe2(os.O_CLOEXEC)
        try:
            box = self.clone_box(member, spec)
        except BaseException:
            os.close(ready_r)
            raise
        finally:
            os.close(spec.ready_w)
        box.marshal = req.get("tag") == marshal_tag()
        box.ready_r, box.deadline = ready_r, time.monotonic() + READY_TIMEOUT
        self._bind(box, conn)
        self.pending[ready_r] = box  # answered once it is ready (``on_ready``)
        self.sel.register(ready_r, selectors.EVENT_READ, ("box-ready", box))

    def _exec(self, conn: BoxConn, member: Member, spawn: bool) -> None:
        """Hand ``conn`` an exec box of ``member``: a standby one if it has one for the
        job (a kept box takes only a ``spawn`` job), else a fresh clone.

        The reply is immediate: a box that cannot set itself up says so on its status pipe.
        """
        box = self.standby.take(member.key, spawn) or self._clone_exec(member)
        self._bind(box, conn)
        pipes, box.pipes = box.pipes, []
        try:
            socket.send_fds(conn.sock, [json.dumps({"ok": True, "pid": box.pid}).encode()], pipes)
        except OSError:  # would block or the worker is gone: never wait for it
            self._drop_conn(conn)
        finally:
            close_all(pipes)
        member.execs += 1
        # armed once the exec is over (its connection closes), not beside it: on two
        # cores the box's set-up would take CPU from the exec it follows
        conn.arm = member.execs >= STANDBY_AFTER_EXECS

    def _warm_image(self, conn: BoxConn, member: Member) -> None:
        """Hand ``conn`` an image worker for its grade, or tell it to fall back."""
        iz = self.image_zygote
        if iz is None or not iz.serves(member) or conn.image_worker is not None:
            self._reply(conn, {"ok": False, "fallback": True, "error": "no image worker"})
            return
        try:
            worker = iz.take_worker()
        except OSError as exc:  # nothing ran: the grade runs as an exec instead
            self._reply(conn, {"ok": False, "fallback": True, "error": str(exc)})
            return
        conn.image_worker = worker
        iz.grades += 1
        reply = json.dumps({"ok": True}).encode()
        try:
            socket.send_fds(conn.sock, [reply], [worker.sock.fileno(), worker.pidfd])
        except OSError:  # would block or the worker is gone: never wait for it
            self._drop_conn(conn)

    def _clone_exec(self, member: Member) -> Box:
        """Clone an exec box with pipes of the master's making (their other ends in ``pipes``)."""
        theirs, ours = exec_pipes()
        job_r, out_w, ack_w, st_w = theirs
        line, its_line = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fds = [job_r, out_w, out_w, ack_w, st_w, its_line.fileno()]
        spec = BoxSpec("exec", fds, -1, self.cfg, self.cap_last)
        try:
            box = self.clone_box(member, spec)
        except BaseException:
            close_all(ours)
            line.close()
            raise
        finally:
            close_all(theirs)
            its_line.close()
        box.pipes, box.line, box.gen = ours, line, member.gen
        return box

    def clone_box(self, member: Member, spec: BoxSpec) -> Box:
        """Have Z clone a box into ``member``'s namespaces; it is live (ours to reap) at once."""
        slot = self.net.acquire()
        flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | (CLONE_NEWNET if slot < 0 else 0)
        try:
            pid = self._zygote().clone(spec, flags, member.mnt, member.ipc, slot)
        except BaseException:
            self.net.release(slot)
            raise
        box = Box(pid, member.key, slot)
        self.live[pid] = box
        member.boxes.add(pid)
        return box

    def _bind(self, box: Box, conn: BoxConn) -> None:
        """The box is ``conn``'s now: it dies when the connection closes."""
        box.conn = conn
        conn.boxes.add(box.pid)

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
        assert box.conn is not None  # (a candidate: bound when cloned)
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
        self.standby.forget(member.key)
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
        self.standby.reaped(box)
        close_all(box.pipes)  # a standby box's, never handed over
        if box.line is not None:
            box.line.close()
        self.net.release(box.slot)
        if self.image_zygote is not None:
            self.image_zygote.reaped(pid)
        if box.conn is not None:
            box.conn.boxes.discard(pid)
        self.members.box_gone(box.key, pid)
        return True

    def stats(self) -> dict[str, int]:
        return {
            "boxes": len(self.live),
            "box_conns": len(self.conns),
            "standby": len(self.standby),
            "kept": self.standby.times_kept,
            "netns": self.net.made,
            "netns_free": len(self.net.free),
            "netns_dropped": self.net.dropped,
            **(self.image_zygote.stats() if self.image_zygote is not None else {}),
        }
